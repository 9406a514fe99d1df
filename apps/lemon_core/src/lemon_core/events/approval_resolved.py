"""``approval_resolved`` on ``exec_approvals``, and the :class:`ApprovalDecision` enum."""

from __future__ import annotations

import enum
from typing import ClassVar

from lemon_core.events._payload import Payload
from lemon_core.events.approval_pending import ApprovalPending

__all__ = ["ApprovalDecision", "ApprovalResolved"]


class ApprovalDecision(enum.StrEnum):
    """How an approval ended. ``EXPIRED``: its owning run or session ended (grants nothing);
    ``TIMEOUT``: the clock deadline passed; ``CANCELLED``: withdrawn by the requester."""

    APPROVE_ONCE = "approve_once"
    APPROVE_SESSION = "approve_session"
    APPROVE_AGENT = "approve_agent"
    APPROVE_GLOBAL = "approve_global"
    DENY = "deny"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class ApprovalResolved(Payload, frozen=True, kw_only=True):
    """An approval was decided, timed out, cancelled or expired."""

    event_type: ClassVar[str] = "approval_resolved"

    approval_id: str
    decision: ApprovalDecision
    pending: ApprovalPending | None = None
