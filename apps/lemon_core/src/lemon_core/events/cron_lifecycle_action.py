"""``cron_lifecycle_action`` on ``cron``: an audit record of a lifecycle action."""

from __future__ import annotations

from typing import Any, ClassVar

from lemon_core.events._payload import Payload

__all__ = ["CronLifecycleAction"]


class CronLifecycleAction(Payload, frozen=True, kw_only=True):
    """An audited cron lifecycle action; ``audit`` is a free mapping owned by automation."""

    event_type: ClassVar[str] = "cron_lifecycle_action"

    audit: dict[str, Any]
