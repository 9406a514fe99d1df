"""The one manual clock of the test kit: ``lemon_core.clock.ManualClock``, exported here.

A ``lemon_core.Clock`` that moves only when told to: ``now`` is both its wall and its monotonic
reading (milliseconds); ``advance(ms)`` moves it; ``sleep_ms(ms)`` returns at once, moves it by
``ms`` and records the sleep in ``sleeps``; ``slept(count)`` waits until that many sleeps
happened. It is defined in lemon_core so that the tests of the apps below this kit (lemon_core,
lemon_infra) use the same one.
"""

from __future__ import annotations

from lemon_core.clock import ManualClock

__all__ = ["ManualClock"]
