"""Shared fixtures of lemon_core's tests."""

from __future__ import annotations

import pytest

from lemon_core.clock import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    """The one manual clock (lemon_core.clock), at 0: tests set ``clock.now``."""
    return ManualClock(0)
