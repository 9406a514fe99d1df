"""lemon_router: RunRequest intake, session and conversation keys, queue modes, RunProcess."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lemon_core.facade import lazy_exports

if TYPE_CHECKING:
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

#: Where each facade name lives (the lazy loader reads it; the TYPE_CHECKING imports
#: repeat it for type checkers, ``__all__`` for the architecture gate).
_EXPORTS: Final[dict[str, tuple[str, str]]] = {
    "Clock": ("lemon_core.clock", "Clock"),
    "SystemClock": ("lemon_core.clock", "SystemClock"),
    "PEER_KINDS": ("lemon_core.sessions", "PEER_KINDS"),
    "InvalidSessionKeyError": ("lemon_core.sessions", "InvalidSessionKeyError"),
    "PeerKind": ("lemon_core.sessions", "PeerKind"),
    "SessionKey": ("lemon_core.sessions", "SessionKey"),
    "check_session_key": ("lemon_core.sessions", "check_session_key"),
    "RouterConfig": ("lemon_router._config", "RouterConfig"),
    "QUEUE_MODES": ("lemon_router._keys", "QUEUE_MODES"),
    "ConversationKey": ("lemon_router._keys", "ConversationKey"),
    "QueueMode": ("lemon_router._keys", "QueueMode"),
    "parse_queue_mode": ("lemon_router._keys", "parse_queue_mode"),
    "RouterSessionPort": ("lemon_router._port", "RouterSessionPort"),
    "redact_secrets": ("lemon_router._port", "redact_secrets"),
    "CancelActive": ("lemon_router._queue", "CancelActive"),
    "ConversationQueue": ("lemon_router._queue", "ConversationQueue"),
    "Effect": ("lemon_router._queue", "Effect"),
    "QueueStatistics": ("lemon_router._queue", "QueueStatistics"),
    "Requeued": ("lemon_router._queue", "Requeued"),
    "SendSteer": ("lemon_router._queue", "SendSteer"),
    "Settled": ("lemon_router._queue", "Settled"),
    "StartRun": ("lemon_router._queue", "StartRun"),
    "Submission": ("lemon_router._queue", "Submission"),
    "ChatStateReader": ("lemon_router._resume", "ChatStateReader"),
    "ResumeDecision": ("lemon_router._resume", "ResumeDecision"),
    "resolve_resume": ("lemon_router._resume", "resolve_resume"),
    "Router": ("lemon_router._router", "Router"),
    "RouterState": ("lemon_router._router", "RouterState"),
    "RouterStatistics": ("lemon_router._router", "RouterStatistics"),
    "ChatStateAccess": ("lemon_router._run_process", "ChatStateAccess"),
    "RouterSection": ("lemon_router._section", "RouterSection"),
    "InvalidRunRequestError": ("lemon_router.errors", "InvalidRunRequestError"),
    "ResumeError": ("lemon_router.errors", "ResumeError"),
    "RouterError": ("lemon_router.errors", "RouterError"),
    "RouterNotRunningError": ("lemon_router.errors", "RouterNotRunningError"),
    "RouterRuntimeError": ("lemon_router.errors", "RouterRuntimeError"),
    "RouterUsageError": ("lemon_router.errors", "RouterUsageError"),
}

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

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
