"""``cron_run_started`` on ``cron``."""

from __future__ import annotations

from typing import Any, ClassVar

from lemon_core.events._payload import Payload

__all__ = ["CronRunStarted"]


class CronRunStarted(Payload, frozen=True, kw_only=True):
    """A cron job's run started (``router_run_id`` is the run it submitted)."""

    event_type: ClassVar[str] = "cron_run_started"

    cron_run_id: str
    router_run_id: str | None = None
    job_id: str
    job_name: str | None = None
    agent_id: str | None = None
    session_key: str | None = None
    triggered_by: str = "schedule"
    started_at_ms: int | None = None
    run: dict[str, Any] | None = None
