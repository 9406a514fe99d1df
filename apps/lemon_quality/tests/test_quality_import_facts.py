"""Import facts: every import form the gate must see, and agreement with a full AST walk."""

from __future__ import annotations

import ast
import sys
import sysconfig
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lemon_quality._facts import extract

SOURCE = b'''"""Doc: import notreal is text, not an import."""
from __future__ import annotations

import os
import alpha.beta as ab, gamma
from delta.eps import one, two as deux
from . import sibling
from ..parent import thing
from typing import TYPE_CHECKING
import typing

if TYPE_CHECKING:
    from zeta import Z
    import eta
else:
    import theta

if typing.TYPE_CHECKING:
    import iota


def f():
    import kappa
    try:
        from lam import da
    except ImportError:
        pass
    return importlib.import_module("mu.nu")


class C:
    def g(self):
        return __import__("xi")

# import omicron
x = "import pi"
'''


def test_extract_records_every_form_except_relative_and_stdlib() -> None:
    imports, hacks, error = extract(SOURCE)[:3]
    assert error == ("", 0)
    assert hacks == ()
    got = {(module, names, tc, kind) for _, module, names, tc, kind in imports}
    assert got == {
        ("alpha.beta", (), False, "import"),
        ("gamma", (), False, "import"),
        ("delta.eps", ("one", "two"), False, "from"),
        ("zeta", ("Z",), True, "from"),
        ("eta", (), True, "import"),
        ("theta", (), False, "import"),
        ("iota", (), True, "import"),
        ("kappa", (), False, "import"),
        ("lam", ("da",), False, "from"),
        ("mu.nu", (), False, "dynamic"),
        ("xi", (), False, "dynamic"),
    }


def test_line_numbers_are_those_of_the_statement() -> None:
    imports, _, _ = extract(SOURCE)[:3]
    lines = {module: line for line, module, _, _, _ in imports}
    assert lines["alpha.beta"] == 5
    assert lines["zeta"] == 13
    assert lines["mu.nu"] == 28


@pytest.mark.parametrize(
    "code",
    [
        "import sys\nsys.path.insert(0, 'x')\n",
        "import sys\nsys.path.append('x')\n",
        "import sys\nsys.path += ['x']\n",
        "import sys\nsys.path = ['x']\n",
        "import sys\nsys.path[0:0] = ['x']\n",
        "import site\nsite.addsitedir('x')\n",
        "import sys\nclass K:\n    def m(self):\n        sys.path.extend(['x'])\n",
    ],
)
def test_sys_path_manipulation_is_recorded(code: str) -> None:
    _, hacks, _ = extract(code.encode())[:3]
    assert len(hacks) == 1


def test_reading_sys_path_is_not_manipulation() -> None:
    _, hacks, _ = extract(b"import sys\nprint(sys.path)\nfor p in sys.path:\n    pass\n")[:3]
    assert hacks == ()


def test_a_syntax_error_is_reported_with_its_line() -> None:
    imports, _, error = extract(b"import alpha\n\ndef broken(:\n")[:3]
    assert imports == ()
    assert error[0]
    assert error[1] == 3


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_line_endings_do_not_shift_lines(newline: bytes) -> None:
    src = newline.join([b"x = 1", b"", b"def f():", b"    import alpha", b""])
    imports, _, _ = extract(src)[:3]
    assert [(line, m) for line, m, _, _, _ in imports] == [(4, "alpha")]


def test_an_encoding_cookie_is_honoured() -> None:
    src = "# -*- coding: latin-1 -*-\nimport alpha\nx = 'é'\n".encode("latin-1")
    imports, _, error = extract(src)[:3]
    assert error == ("", 0)
    assert [m for _, m, _, _, _ in imports] == ["alpha"]


_STDLIB = frozenset(sys.stdlib_module_names) | {"__main__"}


def _reference(source: bytes) -> set[tuple[int, str, tuple[str, ...], bool, str]]:
    """A slow, obviously-complete walk: every node, with its If ancestors."""
    tree = ast.parse(source)
    out: set[tuple[int, str, tuple[str, ...], bool, str]] = set()

    def visit(node: ast.AST, tc: bool) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.partition(".")[0] not in _STDLIB:
                    out.add((node.lineno, a.name, (), tc, "import"))
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if not node.level and mod.partition(".")[0] not in _STDLIB:
                out.add((node.lineno, mod, tuple(a.name for a in node.names), tc, "from"))
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = getattr(func, "id", None) or getattr(func, "attr", None)
            arg = node.args[0]
            if (
                name in ("import_module", "__import__")
                and isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
                and arg.value
                and not arg.value.startswith(".")
                and arg.value.partition(".")[0] not in _STDLIB
            ):
                out.add((node.lineno, arg.value, (), False, "dynamic"))
        if isinstance(node, ast.If):
            test = node.test
            is_tc = (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
            )
            visit(test, tc)
            for child in node.body:
                visit(child, tc or is_tc)
            for child in node.orelse:
                visit(child, tc)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, tc)

    visit(tree, False)
    return out


def _stdlib_files() -> list[Path]:
    base = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(
        p
        for p in base.rglob("*.py")
        if not {"test", "tests", "site-packages", "idlelib"} & set(p.parts)
    )
    step = max(1, len(files) // 150)
    return files[::step]


def test_the_fast_walk_agrees_with_a_full_walk_on_the_standard_library() -> None:
    checked = 0
    for path in _stdlib_files():
        data = path.read_bytes()
        try:
            expected = _reference(data)
        except (SyntaxError, ValueError, RecursionError):
            continue
        imports, _, error = extract(data)[:3]
        assert error == ("", 0), path
        assert set(imports) == expected, path
        checked += 1
    assert checked > 100


_NAMES = st.sampled_from(["alpha", "beta.gamma", "delta", "os", "json"])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["top", "tc", "else", "def", "class", "try"]),
            _NAMES,
            st.sampled_from(["import", "from", "dynamic"]),
        ),
        max_size=12,
    )
)
def test_generated_modules_agree_with_the_full_walk(
    items: list[tuple[str, str, str]],
) -> None:
    lines = ["from typing import TYPE_CHECKING", "import importlib"]
    for where, name, kind in items:
        stmt = {
            "import": f"import {name}",
            "from": f"from {name} import thing",
            "dynamic": f'importlib.import_module("{name}")',
        }[kind]
        block = {
            "top": [stmt],
            "tc": ["if TYPE_CHECKING:", f"    {stmt}"],
            "else": ["if TYPE_CHECKING:", "    pass", "else:", f"    {stmt}"],
            "def": ["def f():", f"    {stmt}"],
            "class": ["class K:", "    def m(self):", f"        {stmt}"],
            "try": ["try:", f"    {stmt}", "except ImportError:", "    pass"],
        }[where]
        lines.extend(block)
    source = ("\n".join(lines) + "\n").encode()
    imports, _, _ = extract(source)[:3]
    assert set(imports) == _reference(source)


def test_dynamic_imports_in_headers_handlers_and_decorators_are_seen() -> None:
    src = b"""import importlib

@importlib.import_module("deco.rator").wrap
def f(x=importlib.import_module("default.arg")):
    try:
        pass
    except importlib.import_module("handler.mod").Error:
        pass
    for y in importlib.import_module("loop.iter").items():
        pass
"""
    imports, _, _ = extract(src)[:3]
    assert {m for _, m, _, _, _ in imports} == {
        "deco.rator",
        "default.arg",
        "handler.mod",
        "loop.iter",
    }
    assert set(imports) == _reference(src)
