"""Execution slots, engine lock, thread workers and the run lifecycle.

The only submission boundary is :meth:`Gateway.submit_execution` with a
``lemon_core.execution.ExecutionCommand``; see the README.
"""

from __future__ import annotations

from lemon_gateway._config import GatewayConfig
from lemon_gateway._executor import ExecutorStatus, check_executor, load_executor, validate_executor
from lemon_gateway._gateway import Gateway, GatewayState, IngressFactory
from lemon_gateway._ingress import (
    REPLAY_WINDOW_MS,
    WEBHOOK_ID_GUARD_SUFFIX,
    FaultPoint,
    SessionPortSubmitter,
    Submitter,
    Webhook,
    WebhookIngress,
)
from lemon_gateway._ingress_boot import (
    FAULT_ENV,
    WEBHOOK_PREFIX,
    idempotency_store_path,
    resolve_webhooks,
    webhook_ingress,
)
from lemon_gateway._lock import EngineLock, LockLease, LockTimeoutError
from lemon_gateway._openapi import webhook_openapi
from lemon_gateway._recovery import VanishedHook, VanishedRun
from lemon_gateway._request import RunHandle
from lemon_gateway._run import RunState
from lemon_gateway._scheduler import Scheduler, SlotGrant
from lemon_gateway._signature import TOLERANCE_S, WebhookSecret, sign_webhook, verify_webhook
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
    "FAULT_ENV",
    "REPLAY_WINDOW_MS",
    "TOLERANCE_S",
    "WEBHOOK_ID_GUARD_SUFFIX",
    "WEBHOOK_PREFIX",
    "DuplicateRunError",
    "EngineLock",
    "ExecutorNotReadyError",
    "ExecutorStatus",
    "FaultPoint",
    "Gateway",
    "GatewayConfig",
    "GatewayConfigError",
    "GatewayError",
    "GatewayNotRunningError",
    "GatewayOverloadedError",
    "GatewayState",
    "IngressFactory",
    "InvalidSubmissionError",
    "LockLease",
    "LockTimeoutError",
    "MissingConversationKeyError",
    "RunHandle",
    "RunState",
    "Scheduler",
    "SessionPortSubmitter",
    "SlotGrant",
    "Submitter",
    "ThreadWorker",
    "VanishedHook",
    "VanishedRun",
    "Webhook",
    "WebhookIngress",
    "WebhookSecret",
    "WrongThreadError",
    "check_executor",
    "idempotency_store_path",
    "load_executor",
    "resolve_webhooks",
    "sign_webhook",
    "validate_executor",
    "verify_webhook",
    "webhook_ingress",
    "webhook_openapi",
]
