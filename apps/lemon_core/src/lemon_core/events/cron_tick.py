"""``cron_tick`` on ``cron``: the scheduler's clock tick."""

from __future__ import annotations

from typing import ClassVar

from lemon_core.events._payload import Payload

__all__ = ["CronTick"]


class CronTick(Payload, frozen=True, kw_only=True):
    """A scheduler tick at wall-clock ``timestamp_ms``."""

    event_type: ClassVar[str] = "cron_tick"

    timestamp_ms: int
