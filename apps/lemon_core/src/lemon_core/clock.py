"""The one clock shape components accept: milliseconds, as integers.

``now_ms()`` is the wall clock (epoch milliseconds: what stores persist as expiry times);
``monotonic_ms()`` only moves forward (only differences mean anything: windows, deadlines);
``sleep_ms(ms)`` waits on the same clock. :data:`SYSTEM_CLOCK` is the real one; tests pass
:class:`ManualClock` (the one manual clock: the test kit ``lemon_platform_test`` exports it,
and the tests of lemon_core and lemon_infra, below the kit, use it from here), which moves only
when told to (or slept on): ``now`` is both its wall and its monotonic reading;
``advance(ms)`` moves it; ``sleep_ms(ms)`` returns at once, moves it by ``ms`` and records the
sleep in ``sleeps`` (so a test can assert a backoff); ``slept(count)`` waits until that many
sleeps happened.
"""

from __future__ import annotations

import asyncio
import time
from typing import Final, Protocol, runtime_checkable

__all__ = ["SYSTEM_CLOCK", "Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """Wall and monotonic milliseconds, and a sleep measured on the same clock."""

    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch."""
        ...

    def monotonic_ms(self) -> int:
        """Milliseconds on a monotonic clock (only differences are meaningful)."""
        ...

    async def sleep_ms(self, ms: int) -> None:
        """Wait ``ms`` milliseconds."""
        ...


class SystemClock:
    """The real clock: ``time.time_ns``, ``time.monotonic_ns`` and ``asyncio.sleep``."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    async def sleep_ms(self, ms: int) -> None:
        await asyncio.sleep(ms / 1000)


#: The clock every component uses unless a test hands it another.
SYSTEM_CLOCK: Final[Clock] = SystemClock()


class ManualClock:
    """A :class:`Clock` that moves only when told to (see the module docstring)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now = start_ms
        self.sleeps: list[int] = []
        self._changed = asyncio.Condition()

    def now_ms(self) -> int:
        return self.now

    def monotonic_ms(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms

    async def sleep_ms(self, ms: int) -> None:
        self.sleeps.append(ms)
        self.now += ms
        async with self._changed:
            self._changed.notify_all()
        await asyncio.sleep(0)

    async def slept(self, count: int) -> None:
        """Wait until at least ``count`` sleeps happened."""
        async with self._changed:
            await self._changed.wait_for(lambda: len(self.sleeps) >= count)
