"""The execution and store import surfaces: sorted ``__all__`` of defined names."""

from __future__ import annotations

import lemon_core.execution
import lemon_core.store


def _isort_key(name: str) -> tuple[int, str]:
    # ruff's RUF022 order: CONSTANTS, then Classes, then functions.
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_store_and_execution_all_are_sorted_and_defined() -> None:
    for module in (lemon_core.execution, lemon_core.store):
        names = module.__all__
        assert names == sorted(names, key=_isort_key)
        for name in names:
            assert hasattr(module, name), (module.__name__, name)
