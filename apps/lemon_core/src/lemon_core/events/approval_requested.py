"""``approval_requested`` on ``exec_approvals``."""

from __future__ import annotations

from typing import ClassVar

from lemon_core.events._payload import Payload
from lemon_core.events.approval_pending import ApprovalPending

__all__ = ["ApprovalRequested"]


class ApprovalRequested(Payload, frozen=True, kw_only=True):
    """An approval was requested for ``pending``."""

    event_type: ClassVar[str] = "approval_requested"

    approval_id: str
    pending: ApprovalPending
