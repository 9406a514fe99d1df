"""lemon_router: RunRequest intake, session and conversation keys, queue modes, RunProcess."""

from __future__ import annotations

from lemon_router._keys import QUEUE_MODES, ConversationKey, QueueMode, parse_queue_mode
from lemon_router._queue import (
    CancelActive,
    ConversationQueue,
    Effect,
    QueueStatistics,
    Receipt,
    Requeued,
    SendSteer,
    Settled,
    StartRun,
    Submission,
)
from lemon_router._session_key import PEER_KINDS, PeerKind, SessionKey, check_session_key
from lemon_router.errors import (
    InvalidRunRequestError,
    InvalidSessionKeyError,
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
    "ConversationKey",
    "ConversationQueue",
    "Effect",
    "InvalidRunRequestError",
    "InvalidSessionKeyError",
    "PeerKind",
    "QueueMode",
    "QueueStatistics",
    "Receipt",
    "Requeued",
    "ResumeError",
    "RouterError",
    "RouterNotRunningError",
    "RouterRuntimeError",
    "RouterUsageError",
    "SendSteer",
    "SessionKey",
    "Settled",
    "StartRun",
    "Submission",
    "check_session_key",
    "parse_queue_mode",
]
