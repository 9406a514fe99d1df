"""``Action``: one engine action (tool call, command, ...), nested in :class:`EngineAction`."""

from __future__ import annotations

import enum
from typing import Any, ClassVar

import msgspec

from lemon_core.events._payload import Payload

__all__ = ["Action", "ActionKind"]


class ActionKind(enum.StrEnum):
    """What kind of action an engine reports."""

    TOOL = "tool"
    COMMAND = "command"
    FILE_CHANGE = "file_change"
    WEB_SEARCH = "web_search"
    FETCH = "fetch"
    SUBAGENT = "subagent"
    REASONING = "reasoning"
    NOTE = "note"
    APPROVAL = "approval"
    COMPACTION = "compaction"


class Action(Payload, frozen=True, kw_only=True):
    """An action with a stable ``id``; ``detail`` is a free mapping owned by the engine."""

    event_type: ClassVar[str] = "action"

    id: str
    kind: ActionKind
    title: str
    detail: dict[str, Any] = msgspec.field(default_factory=dict)
