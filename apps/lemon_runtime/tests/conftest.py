"""Shared fixtures of lemon_runtime's tests."""

from __future__ import annotations

import pytest


class ManualWallClock:
    """A ``lemon_core.Clock`` that moves only when told to (lemon_runtime's tests cannot use the
    test kit's ``ManualClock``: the kit depends on lemon_core)."""

    def __init__(self, now: int = 0) -> None:
        self.now = now

    def now_ms(self) -> int:
        return self.now

    def monotonic_ms(self) -> int:
        return self.now

    async def sleep_ms(self, ms: int) -> None:
        self.now += ms


@pytest.fixture
def clock() -> ManualWallClock:
    return ManualWallClock()
