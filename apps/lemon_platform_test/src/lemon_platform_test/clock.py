"""The one manual clock of the test kit: a ``lemon_core.Clock`` that moves only when told to.

``now`` is both its wall and its monotonic reading (milliseconds). ``advance(ms)`` moves it;
``sleep_ms(ms)`` returns at once, moves it by ``ms`` and records the sleep in ``sleeps`` (so a
test can assert a backoff), and ``slept(count)`` waits until that many sleeps happened.
"""

from __future__ import annotations

import asyncio

__all__ = ["ManualClock"]


class ManualClock:
    """See the module docstring; implements :class:`lemon_core.clock.Clock`."""

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
