"""``routing_feedback`` on ``routing_feedback``."""

from __future__ import annotations

from typing import ClassVar

from lemon_core.events._payload import Payload

__all__ = ["RoutingFeedback"]


class RoutingFeedback(Payload, frozen=True, kw_only=True):
    """The outcome of a routed run, keyed by the routing fingerprint."""

    event_type: ClassVar[str] = "routing_feedback"

    fingerprint_key: str
    outcome: str
    duration_ms: int | None = None
