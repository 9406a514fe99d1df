"""The apps' lazy facades (PEP 562) list each name three times, so a test keeps them equal.

An app's ``__init__`` imports nothing at run time: ``_EXPORTS`` says where each public name
lives (the loader reads it on first use), the ``TYPE_CHECKING`` imports repeat it for type
checkers and ``__all__`` for the architecture gate. Importing one submodule (an app's config
section, for ``lemon config validate``) must not load the app's runtime code.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys

import pytest

LAZY = [
    "coding_agent",
    "lemon_channels",
    "lemon_cli",
    "lemon_control_plane",
    "lemon_gateway",
    "lemon_router",
    "lemon_skills",
    "lemon_web",
    "lemon_webhooks",
]


@pytest.mark.parametrize("app", LAZY)
def test_the_three_listings_agree_and_every_name_resolves(app: str) -> None:
    package = importlib.import_module(app)
    exports: dict[str, tuple[str, str]] = package._EXPORTS
    assert sorted(exports) == sorted(package.__all__)
    tree = ast.parse(inspect.getsource(package))
    typed: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        # lemon_cli's facade keeps typing out of its start-up: its own never-true flag
        if isinstance(node, ast.If) and ast.unparse(node.test) in (
            "TYPE_CHECKING",
            "_TYPE_CHECKING",
        ):
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                assert imp.module is not None
                for alias in imp.names:
                    typed[alias.asname or alias.name] = (imp.module, alias.name)
    assert typed == exports
    for name, (module, attr) in exports.items():
        assert getattr(package, name) is getattr(importlib.import_module(module), attr)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        package.no_such_name  # noqa: B018


@pytest.mark.parametrize("app", LAZY)
def test_importing_the_package_loads_none_of_its_modules(app: str) -> None:
    code = f"import sys, {app}\nprint(sorted(m for m in sys.modules if m.startswith('{app}.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
