"""lemon_router: RunRequest intake, session and conversation keys, queue modes, RunProcess."""

from __future__ import annotations

from lemon_core.clock import Clock, SystemClock
from lemon_core.sessions import (
    PEER_KINDS,
    InvalidSessionKeyError,
    PeerKind,
    SessionKey,
    check_session_key,
)
from lemon_router._config import RouterConfig
from lemon_router._keys import QUEUE_MODES, ConversationKey, QueueMode, parse_queue_mode
from lemon_router._port import RouterSessionPort, redact_secrets
from lemon_router._queue import (
    CancelActive,
    ConversationQueue,
    Effect,
    QueueStatistics,
    Requeued,
    SendSteer,
    Settled,
    StartRun,
    Submission,
)
from lemon_router._resume import ChatStateReader, ResumeDecision, resolve_resume
from lemon_router._router import Router, RouterState, RouterStatistics
from lemon_router._run_process import (
    ChatStateAccess,
)
from lemon_router._section import RouterSection
from lemon_router.errors import (
    InvalidRunRequestError,
    ResumeError,
    RouterError,
    RouterNotRunningError,
    RouterRuntimeError,
    RouterUsageError,
)

__all__ = [
    "PEER_KINDS",
    "QUEUE_MODES",
    "CancelActive",
    "ChatStateAccess",
    "ChatStateReader",
    "Clock",
    "ConversationKey",
    "ConversationQueue",
    "Effect",
    "InvalidRunRequestError",
    "InvalidSessionKeyError",
    "PeerKind",
    "QueueMode",
    "QueueStatistics",
    "Requeued",
    "ResumeDecision",
    "ResumeError",
    "Router",
    "RouterConfig",
    "RouterError",
    "RouterNotRunningError",
    "RouterRuntimeError",
    "RouterSection",
    "RouterSessionPort",
    "RouterState",
    "RouterStatistics",
    "RouterUsageError",
    "SendSteer",
    "SessionKey",
    "Settled",
    "StartRun",
    "Submission",
    "SystemClock",
    "check_session_key",
    "parse_queue_mode",
    "redact_secrets",
    "resolve_resume",
]
