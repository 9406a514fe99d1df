"""``engine_action`` on ``run:<run_id>``: an action started, updated or completed."""

from __future__ import annotations

import enum
from typing import ClassVar

from lemon_core.events._payload import Payload
from lemon_core.events.action import Action

__all__ = ["EngineAction", "EngineActionPhase"]


class EngineActionPhase(enum.StrEnum):
    """Where an action is in its life."""

    STARTED = "started"
    UPDATED = "updated"
    COMPLETED = "completed"


class EngineAction(Payload, frozen=True, kw_only=True):
    """An action event; ``ok`` and ``message`` describe a completed action's outcome."""

    event_type: ClassVar[str] = "engine_action"

    action: Action
    engine: str | None = None
    phase: EngineActionPhase = EngineActionPhase.UPDATED
    ok: bool | None = None
    message: str | None = None
    level: str | None = None
