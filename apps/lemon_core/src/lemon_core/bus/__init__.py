"""The Bus and bounded delivery.

``Bus`` publishes to exact-match string topics; every subscriber reads through a bounded
``Delivery`` handle that admits before queueing and fences itself on overflow.
"""

from __future__ import annotations

from lemon_core.bus._measure import measure
from lemon_core.bus.backends import BusBackend, Fanout, LocalBackend
from lemon_core.bus.bus import (
    Bus,
    BusStatistics,
    PayloadValidation,
    Subscription,
    validation_from_env,
)
from lemon_core.bus.delivery import (
    CONTENTION_TIMEOUT_S,
    DELIVERY_DEFAULTS,
    TERMINAL_EVENT_TYPES,
    TERMINAL_NOTICE_MAX_BYTES,
    AdmissionLock,
    ConsumerClass,
    Delivery,
    DeliveryLimits,
    DeliveryStatistics,
    Overflow,
    OverflowReason,
    Tagged,
    TerminalNotice,
)
from lemon_core.bus.topics import (
    CHANNELS,
    CONTRACT_TOPICS,
    CRON,
    EXEC_APPROVALS,
    GOALS,
    ROUTING_FEEDBACK,
    SYSTEM,
    check_topic,
    run_topic,
    session_topic,
)

__all__ = [
    "CHANNELS",
    "CONTENTION_TIMEOUT_S",
    "CONTRACT_TOPICS",
    "CRON",
    "DELIVERY_DEFAULTS",
    "EXEC_APPROVALS",
    "GOALS",
    "ROUTING_FEEDBACK",
    "SYSTEM",
    "TERMINAL_EVENT_TYPES",
    "TERMINAL_NOTICE_MAX_BYTES",
    "AdmissionLock",
    "Bus",
    "BusBackend",
    "BusStatistics",
    "ConsumerClass",
    "Delivery",
    "DeliveryLimits",
    "DeliveryStatistics",
    "Fanout",
    "LocalBackend",
    "Overflow",
    "OverflowReason",
    "PayloadValidation",
    "Subscription",
    "Tagged",
    "TerminalNotice",
    "check_topic",
    "measure",
    "run_topic",
    "session_topic",
    "validation_from_env",
]
