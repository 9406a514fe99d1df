"""Import facts of one Python source file, read from its AST.

The facts are path-independent, so one cache entry per content hash serves every file with
that content. Records are plain tuples so that they
marshal quickly:

* import: ``(line, module, names, type_checking, kind)``; ``kind`` is ``import``
  (``import a.b``: module ``a.b``, no names), ``from`` (``from m import x, y``: names ``x, y``)
  or ``dynamic`` (a literal ``importlib.import_module("a.b")`` / ``__import__("a.b")``).
  ``type_checking`` is true inside the body of ``if TYPE_CHECKING:`` /
  ``if typing.TYPE_CHECKING:``.
  Relative imports and standard-library imports are not recorded: neither can name another
  app or a third-party package, and leaving them out keeps the cache small and warm runs fast.
  (The standard-library list is the running Python's, which is part of the cache key.)
* path hack: ``(line, description)`` for ``sys.path`` edits and ``site.addsitedir`` calls.
* error: ``(message, line)`` when the file does not parse, else ``("", 0)``.

Only statements are walked, which is what keeps this fast. Expressions are walked only inside
the statements that span a line whose bytes mention ``import_module``/``__import__`` (dynamic
imports) or ``sys.path``/``addsitedir`` (path hacks); a class is entered rather than walked whole.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator

ImportFact = tuple[int, str, tuple[str, ...], bool, str]
HackFact = tuple[int, str]
Facts = tuple[tuple[ImportFact, ...], tuple[HackFact, ...], tuple[str, int]]

# Bump when the facts format or meaning changes: it invalidates every cache entry.
FACTS_VERSION = 2

_STDLIB = frozenset(sys.stdlib_module_names) | {"__main__"}

_DYNAMIC = re.compile(rb"\b(?:import_module|__import__)\b")
_PATH = re.compile(rb"\bsys\s*\.\s*path\b|\baddsitedir\b")
_PATH_METHODS = frozenset({"insert", "append", "extend", "remove", "clear", "pop", "__setitem__"})


def extract(source: bytes) -> Facts:
    """The import facts of ``source`` (bytes, so encoding cookies are honoured)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 1
        msg = getattr(exc, "msg", None) or str(exc)
        return (), (), (str(msg), int(line))
    imports: list[ImportFact] = []
    _statements(tree.body, False, imports)
    hacks: list[HackFact] = []
    dynamic = _lines(_DYNAMIC, source)
    if dynamic:
        _dynamic(_spanning(tree.body, dynamic), imports)
    path = _lines(_PATH, source)
    if path:
        _hacks(_spanning(tree.body, path), hacks)
    imports.sort()
    hacks.sort()
    return tuple(imports), tuple(hacks), ("", 0)


def _lines(pattern: re.Pattern[bytes], source: bytes) -> frozenset[int]:
    return frozenset(source.count(b"\n", 0, m.start()) + 1 for m in pattern.finditer(source))


def _spanning(body: list[ast.stmt], lines: frozenset[int]) -> Iterator[ast.AST]:
    """Every node inside the statements of ``body`` that span one of ``lines``."""
    for stmt in body:
        end = stmt.end_lineno or stmt.lineno
        if not any(stmt.lineno <= line <= end for line in lines):
            continue
        if isinstance(stmt, ast.ClassDef):
            for expr in (*stmt.decorator_list, *stmt.bases, *stmt.keywords):
                yield from ast.walk(expr)
            yield from _spanning(stmt.body, lines)
        else:
            yield from ast.walk(stmt)


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _statements(body: list[ast.stmt], tc: bool, out: list[ImportFact]) -> None:
    for node in body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.partition(".")[0] not in _STDLIB:
                    out.append((node.lineno, alias.name, (), tc, "import"))
        elif isinstance(node, ast.ImportFrom):
            if node.level or (node.module or "").partition(".")[0] in _STDLIB:
                continue
            names = tuple(alias.name for alias in node.names)
            out.append((node.lineno, node.module or "", names, tc, "from"))
        elif isinstance(node, ast.If):
            _statements(node.body, tc or _is_type_checking(node.test), out)
            _statements(node.orelse, tc, out)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            _statements(node.body, tc, out)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            _statements(node.body, tc, out)
            _statements(node.orelse, tc, out)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            _statements(node.body, tc, out)
        elif isinstance(node, (ast.Try, ast.TryStar)):
            _statements(node.body, tc, out)
            for handler in node.handlers:
                _statements(handler.body, tc, out)
            _statements(node.orelse, tc, out)
            _statements(node.finalbody, tc, out)
        elif isinstance(node, ast.Match):
            for case in node.cases:
                _statements(case.body, tc, out)


def _dynamic(nodes: Iterator[ast.AST], out: list[ImportFact]) -> None:
    for node in nodes:
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = (
            func.id
            if isinstance(func, ast.Name)
            else (func.attr if isinstance(func, ast.Attribute) else "")
        )
        if name not in ("import_module", "__import__"):
            continue
        arg = node.args[0]
        if (
            isinstance(arg, ast.Constant)
            and isinstance(arg.value, str)
            and arg.value
            and not arg.value.startswith(".")
            and arg.value.partition(".")[0] not in _STDLIB
        ):
            out.append((node.lineno, arg.value, (), False, "dynamic"))


def _is_sys_path(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def _hacks(nodes: Iterator[ast.AST], out: list[HackFact]) -> None:
    for node in nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if func.attr in _PATH_METHODS and _is_sys_path(func.value):
                out.append((node.lineno, f"sys.path.{func.attr}(...)"))
            elif func.attr == "addsitedir":
                out.append((node.lineno, "site.addsitedir(...)"))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                base = target.value if isinstance(target, ast.Subscript) else target
                if _is_sys_path(base):
                    out.append((node.lineno, "assignment to sys.path"))
