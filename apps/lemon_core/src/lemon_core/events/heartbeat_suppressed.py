"""``heartbeat_suppressed`` on ``cron``."""

from __future__ import annotations

from typing import ClassVar

from lemon_core.events._payload import Payload

__all__ = ["HeartbeatSuppressed"]


class HeartbeatSuppressed(Payload, frozen=True, kw_only=True):
    """A heartbeat run's answer was suppressed (nothing to report)."""

    event_type: ClassVar[str] = "heartbeat_suppressed"

    agent_id: str
    job_id: str | None = None
    job_name: str | None = None
    run_id: str | None = None
