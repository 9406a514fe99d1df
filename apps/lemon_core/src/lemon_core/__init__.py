"""Lemon's shared language and seams: events, bus, store, execution contracts, approvals.

The names below are imported on first use (PEP 562), so importing one submodule (say
``lemon_core.config`` for a command's ``--help``) does not load the bus, the store and the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
    from lemon_core.store import (
        ChatStateStore,
        MemoryStore,
        RunStore,
        SQLiteStore,
        Store,
    )

_LAZY: dict[str, str] = {
    "ApprovalCapacityError": "lemon_core.approvals",
    "ApprovalOutcome": "lemon_core.approvals",
    "Backoff": "lemon_core.backoff",
    "BackoffUsageError": "lemon_core.backoff",
    "Bus": "lemon_core.bus",
    "BusClosedError": "lemon_core.errors",
    "BusError": "lemon_core.errors",
    "BusStatistics": "lemon_core.bus",
    "CapabilityRegistry": "lemon_core.execution",
    "ChatStateStore": "lemon_core.store",
    "Clock": "lemon_core.clock",
    "ConsumerClass": "lemon_core.bus",
    "ConversationKey": "lemon_core.execution",
    "Delivery": "lemon_core.bus",
    "DeliveryClosedError": "lemon_core.errors",
    "DeliveryStatistics": "lemon_core.bus",
    "ENGINE_RUNTIME": "lemon_core.execution",
    "EngineRuntime": "lemon_core.execution",
    "Event": "lemon_core.events",
    "EventPayloadError": "lemon_core.errors",
    "ExecApprovals": "lemon_core.approvals",
    "ExecutionCommand": "lemon_core.execution",
    "ExecutionContext": "lemon_core.execution",
    "ExecutionJob": "lemon_core.execution",
    "ExecutionResult": "lemon_core.execution",
    "ExecutionSink": "lemon_core.execution",
    "Executor": "lemon_core.execution",
    "Home": "lemon_core.home",
    "LemonCoreError": "lemon_core.errors",
    "MemoryStore": "lemon_core.store",
    "Overflow": "lemon_core.bus",
    "Payload": "lemon_core.events",
    "PayloadValidation": "lemon_core.bus",
    "ROUTER_BRIDGE": "lemon_core.execution",
    "Receipt": "lemon_core.execution",
    "ResumeToken": "lemon_core.execution",
    "RouterBridge": "lemon_core.execution",
    "RunRequest": "lemon_core.execution",
    "RunStore": "lemon_core.store",
    "RuntimeContext": "lemon_core.execution",
    "SQLiteStore": "lemon_core.store",
    "SYSTEM_CLOCK": "lemon_core.clock",
    "Store": "lemon_core.store",
    "Subscription": "lemon_core.bus",
    "SystemClock": "lemon_core.clock",
    "Tagged": "lemon_core.bus",
    "TerminalNotice": "lemon_core.bus",
    "ToolPolicy": "lemon_core.execution",
    "Unavailable": "lemon_core.execution",
    "UnencodableItemError": "lemon_core.errors",
    "UnknownApprovalError": "lemon_core.approvals",
    "run_topic": "lemon_core.bus",
    "session_topic": "lemon_core.bus",
    "submit_via_bridge": "lemon_core.execution",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lemon_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
    "MemoryStore",
    "Overflow",
    "Payload",
    "PayloadValidation",
    "Receipt",
    "ResumeToken",
    "RouterBridge",
    "RunRequest",
    "RunStore",
    "RuntimeContext",
    "SQLiteStore",
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
