"""``__all__`` of lemon_core's events and bus surfaces is sorted and names what is defined."""

from __future__ import annotations

import importlib

import pytest

MODULES = ["lemon_core", "lemon_core.events", "lemon_core.bus", "lemon_core.errors"]


def _isort_key(name: str) -> tuple[int, str]:
    if name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


@pytest.mark.parametrize("module_name", MODULES)
def test_all_is_sorted_and_every_name_is_defined(module_name: str) -> None:
    module = importlib.import_module(module_name)
    exported = list(module.__all__)
    assert exported == sorted(exported, key=_isort_key)
    assert len(exported) == len(set(exported))
    for name in exported:
        assert hasattr(module, name), f"{module_name}.__all__ names missing {name!r}"
