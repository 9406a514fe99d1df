"""Execution slots, engine lock, thread workers and the run lifecycle.

The only submission boundary is :meth:`Gateway.submit_execution` with a
``lemon_core.execution.ExecutionCommand``; see the README.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lemon_core.facade import lazy_exports

if TYPE_CHECKING:
    from lemon_gateway._executor import (
        ExecutorStatus,
        check_executor,
        load_executor,
        validate_executor,
    )
    from lemon_gateway._gateway import Gateway, GatewayState
    from lemon_gateway._lock import (
        EngineLock,
        EngineLockStatistics,
        LockLease,
        LockOwner,
        LockTimeoutError,
    )
    from lemon_gateway._recovery import VanishedHook, VanishedRun
    from lemon_gateway._request import RunHandle
    from lemon_gateway._run import RunState
    from lemon_gateway._scheduler import (
        HeldSlot,
        Scheduler,
        SchedulerStatistics,
        SlotGrant,
        SlotWaiter,
    )
    from lemon_gateway._section import GatewayConfig
    from lemon_gateway._statistics import (
        GatewayInFlight,
        GatewayLocks,
        GatewayRuns,
        GatewaySlots,
        GatewayStatistics,
        GatewaySteers,
    )
    from lemon_gateway._worker import ThreadWorker
    from lemon_gateway.errors import (
        DuplicateRunError,
        ExecutorNotReadyError,
        GatewayConfigError,
        GatewayError,
        GatewayNotRunningError,
        GatewayOverloadedError,
        InvalidSubmissionError,
        MissingConversationKeyError,
        WrongThreadError,
    )

#: Where each facade name lives (the lazy loader reads it; the TYPE_CHECKING imports
#: repeat it for type checkers, ``__all__`` for the architecture gate).
_EXPORTS: Final[dict[str, tuple[str, str]]] = {
    "ExecutorStatus": ("lemon_gateway._executor", "ExecutorStatus"),
    "check_executor": ("lemon_gateway._executor", "check_executor"),
    "load_executor": ("lemon_gateway._executor", "load_executor"),
    "validate_executor": ("lemon_gateway._executor", "validate_executor"),
    "Gateway": ("lemon_gateway._gateway", "Gateway"),
    "GatewayState": ("lemon_gateway._gateway", "GatewayState"),
    "EngineLock": ("lemon_gateway._lock", "EngineLock"),
    "EngineLockStatistics": ("lemon_gateway._lock", "EngineLockStatistics"),
    "LockLease": ("lemon_gateway._lock", "LockLease"),
    "LockOwner": ("lemon_gateway._lock", "LockOwner"),
    "LockTimeoutError": ("lemon_gateway._lock", "LockTimeoutError"),
    "VanishedHook": ("lemon_gateway._recovery", "VanishedHook"),
    "VanishedRun": ("lemon_gateway._recovery", "VanishedRun"),
    "RunHandle": ("lemon_gateway._request", "RunHandle"),
    "RunState": ("lemon_gateway._run", "RunState"),
    "HeldSlot": ("lemon_gateway._scheduler", "HeldSlot"),
    "Scheduler": ("lemon_gateway._scheduler", "Scheduler"),
    "SchedulerStatistics": ("lemon_gateway._scheduler", "SchedulerStatistics"),
    "SlotGrant": ("lemon_gateway._scheduler", "SlotGrant"),
    "SlotWaiter": ("lemon_gateway._scheduler", "SlotWaiter"),
    "GatewayConfig": ("lemon_gateway._section", "GatewayConfig"),
    "GatewayInFlight": ("lemon_gateway._statistics", "GatewayInFlight"),
    "GatewayLocks": ("lemon_gateway._statistics", "GatewayLocks"),
    "GatewayRuns": ("lemon_gateway._statistics", "GatewayRuns"),
    "GatewaySlots": ("lemon_gateway._statistics", "GatewaySlots"),
    "GatewayStatistics": ("lemon_gateway._statistics", "GatewayStatistics"),
    "GatewaySteers": ("lemon_gateway._statistics", "GatewaySteers"),
    "ThreadWorker": ("lemon_gateway._worker", "ThreadWorker"),
    "DuplicateRunError": ("lemon_gateway.errors", "DuplicateRunError"),
    "ExecutorNotReadyError": ("lemon_gateway.errors", "ExecutorNotReadyError"),
    "GatewayConfigError": ("lemon_gateway.errors", "GatewayConfigError"),
    "GatewayError": ("lemon_gateway.errors", "GatewayError"),
    "GatewayNotRunningError": ("lemon_gateway.errors", "GatewayNotRunningError"),
    "GatewayOverloadedError": ("lemon_gateway.errors", "GatewayOverloadedError"),
    "InvalidSubmissionError": ("lemon_gateway.errors", "InvalidSubmissionError"),
    "MissingConversationKeyError": ("lemon_gateway.errors", "MissingConversationKeyError"),
    "WrongThreadError": ("lemon_gateway.errors", "WrongThreadError"),
}

__all__ = [
    "DuplicateRunError",
    "EngineLock",
    "EngineLockStatistics",
    "ExecutorNotReadyError",
    "ExecutorStatus",
    "Gateway",
    "GatewayConfig",
    "GatewayConfigError",
    "GatewayError",
    "GatewayInFlight",
    "GatewayLocks",
    "GatewayNotRunningError",
    "GatewayOverloadedError",
    "GatewayRuns",
    "GatewaySlots",
    "GatewayState",
    "GatewayStatistics",
    "GatewaySteers",
    "HeldSlot",
    "InvalidSubmissionError",
    "LockLease",
    "LockOwner",
    "LockTimeoutError",
    "MissingConversationKeyError",
    "RunHandle",
    "RunState",
    "Scheduler",
    "SchedulerStatistics",
    "SlotGrant",
    "SlotWaiter",
    "ThreadWorker",
    "VanishedHook",
    "VanishedRun",
    "WrongThreadError",
    "check_executor",
    "load_executor",
    "validate_executor",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
