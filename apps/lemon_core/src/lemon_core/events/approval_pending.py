"""``ApprovalPending``: a pending approval request, nested in the approval events."""

from __future__ import annotations

from typing import Any, ClassVar

from lemon_core.events._payload import Payload, PrivateFields

__all__ = ["ApprovalPending"]


class ApprovalPending(Payload, frozen=True, kw_only=True, metaclass=PrivateFields):
    """A tool call waiting for a decision.

    ``invocation_context_key`` is private: it stays in process and no serialisation path
    (codec, Store, bus backend, plain msgspec) writes it.
    """

    event_type: ClassVar[str] = "approval_pending"
    private_fields: ClassVar[frozenset[str]] = frozenset({"invocation_context_key"})

    #: Private (a ``ClassVar`` default; the value lives on the instance, see ``Payload``).
    invocation_context_key: ClassVar[str | None] = None

    id: str
    run_id: str | None = None
    session_id: str | None = None
    session_key: str | None = None
    agent_id: str | None = None
    tool: str
    tool_call_id: str | None = None
    action: dict[str, Any] | None = None
    rationale: str | None = None
    requested_at_ms: int | None = None
    expires_at_ms: int | None = None
