"""Execution slots, engine lock, thread workers and the run lifecycle.

The only submission boundary is :meth:`Gateway.submit_execution` with a
``lemon_core.execution.ExecutionCommand``; see the README.
"""

from __future__ import annotations

from lemon_gateway._executor import ExecutorStatus, check_executor, load_executor, validate_executor
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
from lemon_gateway._scheduler import HeldSlot, Scheduler, SchedulerStatistics, SlotGrant, SlotWaiter
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
