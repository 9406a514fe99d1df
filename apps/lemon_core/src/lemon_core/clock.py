"""The one clock shape components accept: milliseconds, as integers.

``now_ms()`` is the wall clock (epoch milliseconds: what stores persist as expiry times);
``monotonic_ms()`` only moves forward (only differences mean anything: windows, deadlines);
``sleep_ms(ms)`` waits on the same clock. :data:`SYSTEM_CLOCK` is the real one; tests pass
``lemon_platform_test.ManualClock``, which moves only when told to (or slept on).
"""

from __future__ import annotations

import asyncio
import time
from typing import Final, Protocol, runtime_checkable

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock"]


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
