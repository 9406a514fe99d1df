"""Lemon's shared language and seams: events, bus, store protocols, execution contracts, approvals.

The names below are imported on first use (PEP 562), so importing one submodule (say
``lemon_core.config`` for a command's ``--help``) does not load the bus, the store and the rest.

``_EXPORTS`` says which module holds each name (the lazy loader reads it); the
``TYPE_CHECKING`` imports repeat it for type checkers, ``__all__`` for the architecture gate (a
test keeps the three equal). The backends live in lemon_infra, the runtime in lemon_runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lemon_core.facade import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from lemon_core.approvals import (
        ApprovalCapacityError,
        ApprovalOutcome,
        ExecApprovals,
        UnknownApprovalError,
    )
    from lemon_core.backoff import Backoff, BackoffUsageError
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
    from lemon_core.clock import SYSTEM_CLOCK, Clock, SystemClock
    from lemon_core.errors import (
        BusClosedError,
        BusError,
        DeliveryClosedError,
        EventPayloadError,
        LemonCoreError,
        UnencodableItemError,
    )
    from lemon_core.events import Event, Payload
    from lemon_core.execution import (
        ENGINE_RUNTIME,
        ROUTER_BRIDGE,
        CapabilityRegistry,
        ConversationKey,
        EngineRuntime,
        ExecutionCommand,
        ExecutionContext,
        ExecutionJob,
        ExecutionResult,
        ExecutionSink,
        Executor,
        Receipt,
        ResumeToken,
        RouterBridge,
        RunRequest,
        RuntimeContext,
        ToolPolicy,
        Unavailable,
        submit_via_bridge,
    )
    from lemon_core.home import Home
    from lemon_core.store import ChatStateStore, RunStore, Store

_EXPORTS: Final[dict[str, tuple[str, ...]]] = {
    "lemon_core.approvals": (
        "ApprovalCapacityError",
        "ApprovalOutcome",
        "ExecApprovals",
        "UnknownApprovalError",
    ),
    "lemon_core.backoff": (
        "Backoff",
        "BackoffUsageError",
    ),
    "lemon_core.bus": (
        "Bus",
        "BusStatistics",
        "ConsumerClass",
        "Delivery",
        "DeliveryStatistics",
        "Overflow",
        "PayloadValidation",
        "Subscription",
        "Tagged",
        "TerminalNotice",
        "run_topic",
        "session_topic",
    ),
    "lemon_core.clock": (
        "SYSTEM_CLOCK",
        "Clock",
        "SystemClock",
    ),
    "lemon_core.errors": (
        "BusClosedError",
        "BusError",
        "DeliveryClosedError",
        "EventPayloadError",
        "LemonCoreError",
        "UnencodableItemError",
    ),
    "lemon_core.events": (
        "Event",
        "Payload",
    ),
    "lemon_core.execution": (
        "ENGINE_RUNTIME",
        "ROUTER_BRIDGE",
        "CapabilityRegistry",
        "ConversationKey",
        "EngineRuntime",
        "ExecutionCommand",
        "ExecutionContext",
        "ExecutionJob",
        "ExecutionResult",
        "ExecutionSink",
        "Executor",
        "Receipt",
        "ResumeToken",
        "RouterBridge",
        "RunRequest",
        "RuntimeContext",
        "ToolPolicy",
        "Unavailable",
        "submit_via_bridge",
    ),
    "lemon_core.home": ("Home",),
    "lemon_core.store": (
        "ChatStateStore",
        "RunStore",
        "Store",
    ),
}
_LAZY: Final[dict[str, str]] = {
    name: module for module, names in _EXPORTS.items() for name in names
}


__all__ = [
    "ENGINE_RUNTIME",
    "ROUTER_BRIDGE",
    "SYSTEM_CLOCK",
    "ApprovalCapacityError",
    "ApprovalOutcome",
    "Backoff",
    "BackoffUsageError",
    "Bus",
    "BusClosedError",
    "BusError",
    "BusStatistics",
    "CapabilityRegistry",
    "ChatStateStore",
    "Clock",
    "ConsumerClass",
    "ConversationKey",
    "Delivery",
    "DeliveryClosedError",
    "DeliveryStatistics",
    "EngineRuntime",
    "Event",
    "EventPayloadError",
    "ExecApprovals",
    "ExecutionCommand",
    "ExecutionContext",
    "ExecutionJob",
    "ExecutionResult",
    "ExecutionSink",
    "Executor",
    "Home",
    "LemonCoreError",
    "Overflow",
    "Payload",
    "PayloadValidation",
    "Receipt",
    "ResumeToken",
    "RouterBridge",
    "RunRequest",
    "RunStore",
    "RuntimeContext",
    "Store",
    "Subscription",
    "SystemClock",
    "Tagged",
    "TerminalNotice",
    "ToolPolicy",
    "Unavailable",
    "UnencodableItemError",
    "UnknownApprovalError",
    "run_topic",
    "session_topic",
    "submit_via_bridge",
]

__getattr__, __dir__ = _lazy_exports(
    __name__, {name: (module, name) for name, module in _LAZY.items()}, __all__
)
