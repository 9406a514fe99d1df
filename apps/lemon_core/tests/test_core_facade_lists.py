"""lemon_core's root facade: its three listings name the same names, and each loads."""

from __future__ import annotations

import ast
from pathlib import Path

import lemon_core


def _type_checking_names() -> dict[str, str]:
    tree = ast.parse(Path(lemon_core.__file__).read_text())
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom)
                assert stmt.module is not None
                for alias in stmt.names:
                    names[alias.asname or alias.name] = stmt.module
    return names


def test_the_type_imports_the_lazy_table_and_all_agree() -> None:
    assert _type_checking_names() == lemon_core._LAZY
    assert sorted(lemon_core.__all__) == sorted(lemon_core._LAZY)


def test_every_name_loads_from_its_module() -> None:
    for name, module in lemon_core._LAZY.items():
        value = getattr(lemon_core, name)
        assert getattr(__import__(module, fromlist=[name]), name) is value
