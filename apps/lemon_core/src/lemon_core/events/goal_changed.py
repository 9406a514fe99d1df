"""``goal_*`` on ``goals`` (and the goal's ``session:<key>``)."""

from __future__ import annotations

from typing import Any, ClassVar

from lemon_core.events._payload import Payload

__all__ = ["GoalChanged"]


class GoalChanged(Payload, frozen=True, kw_only=True):
    """A goal changed; the event type (``goal_set``, ``goal_paused``, ...) says how."""

    event_type: ClassVar[str] = "goal_changed"

    goal_id: str
    agent_id: str | None = None
    session_key: str | None = None
    status: str | None = None
    objective_bytes: int | None = None
    continuation_count: int | None = None
    last_run_id: str | None = None
    loop_verdict: dict[str, Any] | None = None
    loop_status: str | None = None
    loop_auto_enabled: bool | None = None
