"""``cron_job_created`` / ``cron_job_updated`` / ``cron_job_deleted`` on ``cron``."""

from __future__ import annotations

import enum
from typing import Any, ClassVar

from lemon_core.events._payload import Payload

__all__ = ["CronJobAction", "CronJobChanged"]


class CronJobAction(enum.StrEnum):
    """What happened to the job."""

    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"


class CronJobChanged(Payload, frozen=True, kw_only=True):
    """A cron job changed. Registered under three types; ``job`` is absent on delete."""

    event_type: ClassVar[str] = "cron_job_changed"

    action: CronJobAction
    job_id: str
    name: str | None = None
    agent_id: str | None = None
    job: dict[str, Any] | None = None
