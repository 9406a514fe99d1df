"""The ``lemon`` command and the terminal client.

A lazy facade (PEP 562): importing the package loads none of its modules, so the console
script's front (``lemon_cli.main:main``, the entry point) starts without the Typer
application.
"""

from __future__ import annotations

import importlib

# Never true when run; type checkers read the import (importing typing for its TYPE_CHECKING
# would be a third of ``lemon --help``, and a public name here would join the facade).
_TYPE_CHECKING = False
if _TYPE_CHECKING:
    from lemon_cli._app import app

#: Where each facade name lives (the _TYPE_CHECKING imports repeat it for type checkers,
#: ``__all__`` for the architecture gate).
_EXPORTS: dict[str, tuple[str, str]] = {
    "app": ("lemon_cli._app", "app"),
}

__all__ = ["app"]


def __getattr__(name: str) -> object:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _EXPORTS[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value
