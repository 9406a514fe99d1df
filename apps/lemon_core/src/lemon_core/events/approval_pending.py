"""``ApprovalPending``: a pending approval request, nested in the approval events."""

from __future__ import annotations

from typing import Any, ClassVar

from lemon_core.events._payload import Payload

__all__ = ["ApprovalPending"]


class ApprovalPending(Payload, frozen=True, kw_only=True):
    """A tool call waiting for a decision.

    ``invocation_context_key`` is private: it stays in process and is left out of JSON.
    """

    event_type: ClassVar[str] = "approval_pending"
    private_fields: ClassVar[frozenset[str]] = frozenset({"invocation_context_key"})

    id: str
    run_id: str | None = None
    session_id: str | None = None
    session_key: str | None = None
    agent_id: str | None = None
    invocation_context_key: str | None = None
    tool: str
    tool_call_id: str | None = None
    action: dict[str, Any] | None = None
    rationale: str | None = None
    requested_at_ms: int | None = None
    expires_at_ms: int | None = None
