"""The session events a :class:`~lemon_core.sessions.SessionStream` yields: one ordered, closed,
typed union. Each is a tagged msgspec record (``type`` names it on the wire)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import msgspec

from lemon_core.events import (
    ActionKind,
    ApprovalDecision,
    ErrorCode,
    QueueOutcomeKind,
    RunPhase,
    RunUsage,
)

__all__ = [
    "ApprovalAsked",
    "ApprovalEnded",
    "QueueNotice",
    "RunEnded",
    "RunPhaseNotice",
    "SessionEvent",
    "StreamOverflow",
    "TextDelta",
    "ToolCard",
    "approval_arguments",
    "approval_command",
]


class _SessionEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    session_key: str


class TextDelta(_SessionEvent, frozen=True, kw_only=True, tag="text_delta"):
    """A piece of the answer; ``seq`` orders one run attempt's pieces (1, 2, ...)."""

    run_id: str
    seq: int
    text: str


class ToolCard(_SessionEvent, frozen=True, kw_only=True, tag="tool_card"):
    """A tool call (or command, file change, note...) moving through its phases; the same
    ``action_id`` from ``started`` to ``completed``."""

    run_id: str
    action_id: str
    phase: Literal["started", "updated", "completed"]
    kind: ActionKind
    title: str
    detail: dict[str, Any] = msgspec.field(default_factory=dict)
    ok: bool | None = None
    message: str | None = None


class ApprovalAsked(_SessionEvent, frozen=True, kw_only=True, tag="approval_asked"):
    """A tool call waits for a decision: answer with ``SessionPort.resolve_approval``."""

    approval_id: str
    run_id: str | None
    tool: str
    action: dict[str, Any] | None = None
    rationale: str | None = None
    expires_at_ms: int | None = None


def approval_arguments(action: Mapping[str, Any] | None) -> dict[str, Any]:
    """The tool arguments an approval's ``action`` carries (its ``arguments``, else the action
    itself; a non-mapping is ``{"action": value}``), for showing a question to a person."""
    given = action or {}
    args = given.get("arguments", given)
    return dict(args) if isinstance(args, Mapping) else {"action": args}


def approval_command(args: Mapping[str, Any]) -> str:
    """A bash call's command as the shell would show it (``argv`` joined with quoting, else
    ``command``), ``""`` when there is none."""
    argv = args.get("argv")
    if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
        return shlex.join(argv)
    return str(args.get("command", ""))


class ApprovalEnded(_SessionEvent, frozen=True, kw_only=True, tag="approval_ended"):
    """An approval is no longer pending (decided here or elsewhere, timed out, expired)."""

    approval_id: str
    decision: ApprovalDecision


class QueueNotice(_SessionEvent, frozen=True, kw_only=True, tag="queue_notice"):
    """What the session's queue did with a submission that did not become its own run."""

    run_id: str
    outcome: QueueOutcomeKind
    into_run_id: str | None = None
    position: int | None = None
    reason: str | None = None


class RunPhaseNotice(_SessionEvent, frozen=True, kw_only=True, tag="run_phase"):
    """A run moved to ``phase`` (accepted, queued, waiting for a slot, streaming, ...)."""

    run_id: str
    phase: RunPhase
    previous: RunPhase | None = None
    retry_of: str | None = None
    """Set on the first phase of a retry attempt: the run as submitted (``run_id`` is then
    the new attempt's id, under which its text and tool cards stream)."""


class RunEnded(_SessionEvent, frozen=True, kw_only=True, tag="run_ended"):
    """A run's one canonical end. ``run_id`` is the run as submitted; ``attempt_id`` the
    attempt that produced this end (they differ after a retry)."""

    run_id: str
    attempt_id: str
    ok: bool
    error_code: ErrorCode | None = None
    error: str | None = None
    answer: str = ""
    usage: RunUsage | None = None
    synthetic: bool = False
    warning: str | None = None


class StreamOverflow(_SessionEvent, frozen=True, kw_only=True, tag="stream_overflow"):
    """The stream fell behind and ended here: call ``SessionPort.snapshot`` and watch again."""

    reason: str


SessionEvent: TypeAlias = (
    TextDelta
    | ToolCard
    | ApprovalAsked
    | ApprovalEnded
    | QueueNotice
    | RunPhaseNotice
    | RunEnded
    | StreamOverflow
)
