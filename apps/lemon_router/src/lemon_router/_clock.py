"""The router's notion of time: a monotonic millisecond clock with an awaitable sleep.

Injected so tests control the followup merge window and the submit backoff exactly.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Monotonic milliseconds and a sleep measured on the same clock."""

    def now_ms(self) -> int:
        """Milliseconds on a monotonic clock (only differences are meaningful)."""
        ...

    async def sleep_ms(self, ms: int) -> None:
        """Wait ``ms`` milliseconds."""
        ...


class SystemClock:
    """The real clock: ``time.monotonic`` and ``asyncio.sleep``."""

    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    async def sleep_ms(self, ms: int) -> None:
        await asyncio.sleep(ms / 1000)
