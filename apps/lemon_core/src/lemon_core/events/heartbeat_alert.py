"""``heartbeat_alert`` on ``cron``."""

from __future__ import annotations

from typing import ClassVar

from lemon_core.events._payload import Payload

__all__ = ["HeartbeatAlert"]


class HeartbeatAlert(Payload, frozen=True, kw_only=True):
    """A heartbeat run produced something worth telling the user."""

    event_type: ClassVar[str] = "heartbeat_alert"

    agent_id: str
    job_id: str | None = None
    job_name: str | None = None
    run_id: str | None = None
    response: str | None = None
    severity: str = "warning"
