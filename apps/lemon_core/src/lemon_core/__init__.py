"""Lemon's shared language and seams: events, bus, store, execution contracts, runtime."""

from __future__ import annotations

from lemon_core.bus import (
    Bus,
    BusStatistics,
    ConsumerClass,
    Delivery,
    DeliveryStatistics,
    Overflow,
    PayloadValidation,
    Subscription,
    Tagged,
    TerminalNotice,
    run_topic,
    session_topic,
)
from lemon_core.errors import (
    BusClosedError,
    BusError,
    DeliveryClosedError,
    EventPayloadError,
    LemonCoreError,
    UnencodableItemError,
)
from lemon_core.events import Event, Payload

__all__ = [
    "Bus",
    "BusClosedError",
    "BusError",
    "BusStatistics",
    "ConsumerClass",
    "Delivery",
    "DeliveryClosedError",
    "DeliveryStatistics",
    "Event",
    "EventPayloadError",
    "LemonCoreError",
    "Overflow",
    "Payload",
    "PayloadValidation",
    "Subscription",
    "Tagged",
    "TerminalNotice",
    "UnencodableItemError",
    "run_topic",
    "session_topic",
]
