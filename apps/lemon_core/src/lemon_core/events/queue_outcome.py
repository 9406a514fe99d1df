"""``queue_outcome`` on ``session:<session_key>``: what the router did with a message that did
not (or not yet) become its own run, and the :class:`QueueOutcomeKind` enum."""

from __future__ import annotations

import enum
from typing import ClassVar

from lemon_core.events._payload import Payload

__all__ = ["QueueOutcome", "QueueOutcomeKind"]


class QueueOutcomeKind(enum.StrEnum):
    """How a submission was settled or moved by the router's queue."""

    MERGED = "merged"
    """Merged into another message (``into_run_id`` carries its prompt now)."""
    STEERED = "steered"
    """Taken by the live run ``into_run_id`` as a steering message."""
    CANCELLED = "cancelled"
    """Cancelled by an explicit abort before it ran."""
    REJECTED = "rejected"
    """Refused after admission (``reason`` says why)."""
    FALLBACK_QUEUED = "fallback_queued"
    """A steer or redirect the live run did not take, queued as ``mode`` at ``position``."""


class QueueOutcome(Payload, frozen=True, kw_only=True):
    """Run ``run_id``'s message was settled (``merged``, ``steered``, ``cancelled``,
    ``rejected``) or re-queued (``fallback_queued``)."""

    event_type: ClassVar[str] = "queue_outcome"

    run_id: str
    session_key: str | None = None
    outcome: QueueOutcomeKind
    into_run_id: str | None = None
    mode: str | None = None
    position: int | None = None
    reason: str | None = None
