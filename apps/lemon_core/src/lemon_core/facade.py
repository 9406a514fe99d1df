"""Lazy package facades (PEP 562): a package's public names, loaded on first use.

A facade ``__init__`` lists where each public name lives (``_EXPORTS``: name -> (module,
attribute)), repeats the imports under ``TYPE_CHECKING`` for type checkers and the names in a
literal ``__all__`` for the architecture gate, and ends with::

    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)

so importing one submodule of the package (its config section, say) loads none of the rest.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, tuple[str, str]], public: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of the facade ``package``: a name of
    ``exports`` is imported from its module on first use and kept in the package's namespace;
    any other name is an :class:`AttributeError` naming the package."""
    namespace = sys.modules[package].__dict__
    listed = frozenset(public)

    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attr = where
        value = getattr(importlib.import_module(module), attr)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *listed})

    return __getattr__, __dir__
