"""``cron_run_completed`` on ``cron``."""

from __future__ import annotations

from typing import Any, ClassVar

from lemon_core.events._payload import Payload

__all__ = ["CronRunCompleted"]


class CronRunCompleted(Payload, frozen=True, kw_only=True):
    """A cron job's run finished; ``suppressed`` marks a heartbeat answer that was not sent."""

    event_type: ClassVar[str] = "cron_run_completed"

    cron_run_id: str
    router_run_id: str | None = None
    job_id: str
    agent_id: str | None = None
    session_key: str | None = None
    status: str | None = None
    duration_ms: int | None = None
    output: str | None = None
    error: str | None = None
    suppressed: bool = False
    run: dict[str, Any] | None = None
