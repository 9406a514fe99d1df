"""Shared fixtures for lemon_quality tests: materialising fixture workspaces."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
VALID = FIXTURES / "valid"
RULES = FIXTURES / "rules"
REPO_ROOT = Path(__file__).resolve().parents[3]


def materialise(dest: Path, code: str | None = None) -> Path:
    """Copy ``valid/`` to ``dest`` and lay the overlay of rule ``code`` over it."""
    shutil.copytree(VALID, dest)
    if code is not None:
        shutil.copytree(RULES / code, dest, dirs_exist_ok=True)
    return dest


@pytest.fixture
def workspace(tmp_path: Path) -> Callable[[str | None], Path]:
    """A factory: ``workspace(code)`` returns a fresh copy of that fixture workspace."""
    counter = iter(range(1000))

    def make(code: str | None = None) -> Path:
        return materialise(tmp_path / f"ws{next(counter)}", code)

    return make


@pytest.fixture
def repo_root() -> Path:
    """The root of the repository these tests live in."""
    return REPO_ROOT


@pytest.fixture
def rule_fixtures() -> Path:
    """The directory of per-rule overlays."""
    return RULES
