"""``channel_delivery`` on ``channels``: the observation of one outbound dispatch."""

from __future__ import annotations

from typing import ClassVar

from lemon_core.events._payload import Payload

__all__ = ["ChannelDelivery"]


class ChannelDelivery(Payload, frozen=True, kw_only=True):
    """An outbound dispatch and its result. ``text_preview`` is a bounded excerpt, never the
    full body; ``error`` is a bounded description of the failure."""

    event_type: ClassVar[str] = "channel_delivery"

    intent_id: str
    run_id: str | None = None
    session_key: str | None = None
    channel_id: str
    account_id: str | None = None
    peer_kind: str | None = None
    peer_id: str | None = None
    thread_id: str | None = None
    kind: str
    text_preview: str | None = None
    ok: bool
    error: str | None = None
    duration_ms: int | None = None
    ts_ms: int | None = None
