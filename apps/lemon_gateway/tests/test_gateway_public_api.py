"""The gateway's import surface: a sorted ``__all__`` of names that exist."""

from __future__ import annotations

import lemon_gateway


def _isort_key(name: str) -> tuple[int, str]:
    # ruff's RUF022 order: CONSTANTS, then Classes, then functions.
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_gateway_all_is_sorted_and_defined() -> None:
    names = lemon_gateway.__all__
    assert names == sorted(names, key=_isort_key)
    for name in names:
        assert hasattr(lemon_gateway, name), name
    assert "ExecutionRequest" not in names  # private: consumers submit ExecutionCommands
