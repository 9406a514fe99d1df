"""Sessions: the :class:`SessionPort` every client and ingress speaks, its typed session
events, snapshots and results, and the one session-key grammar.

See :mod:`lemon_core.sessions._port` for the recovery contract. The router registers the
in-process port under :data:`SESSION_PORT`; the agent app registers its
:class:`TranscriptReader` under :data:`TRANSCRIPT_READER`.
"""

from __future__ import annotations

from lemon_core.sessions._events import (
    ApprovalAsked,
    ApprovalEnded,
    QueueNotice,
    RunEnded,
    RunPhaseNotice,
    SessionEvent,
    StreamOverflow,
    TextDelta,
    ToolCard,
)
from lemon_core.sessions._key import (
    MAX_KEY_CHARS,
    PEER_KINDS,
    PeerKind,
    SessionKey,
    check_session_key,
)
from lemon_core.sessions._port import (
    ALL_SESSIONS,
    SESSION_COMPACTOR,
    SESSION_PORT,
    THINKING_LEVELS,
    TRANSCRIPT_READER,
    ActionState,
    ActiveRun,
    ApprovalResult,
    CancelResult,
    CompactResult,
    NativeHistory,
    PendingApproval,
    RunRecord,
    SessionChange,
    SessionCompactor,
    SessionPort,
    SessionPortStatistics,
    SessionSettings,
    SessionSnapshot,
    SessionStream,
    SessionSummary,
    SteerResult,
    ThinkingLevel,
    TodoItem,
    TranscriptEntry,
    TranscriptPage,
    TranscriptReader,
)
from lemon_core.sessions._stream import (
    BusAllSessionsStream,
    BusSessionStream,
    SessionStreamBase,
    project,
)
from lemon_core.sessions.errors import (
    InvalidSessionKeyError,
    SessionError,
    SessionStreamClosedError,
)

__all__ = [
    "ALL_SESSIONS",
    "MAX_KEY_CHARS",
    "PEER_KINDS",
    "SESSION_COMPACTOR",
    "SESSION_PORT",
    "THINKING_LEVELS",
    "TRANSCRIPT_READER",
    "ActionState",
    "ActiveRun",
    "ApprovalAsked",
    "ApprovalEnded",
    "ApprovalResult",
    "BusAllSessionsStream",
    "BusSessionStream",
    "CancelResult",
    "CompactResult",
    "InvalidSessionKeyError",
    "NativeHistory",
    "PeerKind",
    "PendingApproval",
    "QueueNotice",
    "RunEnded",
    "RunPhaseNotice",
    "RunRecord",
    "SessionChange",
    "SessionCompactor",
    "SessionError",
    "SessionEvent",
    "SessionKey",
    "SessionPort",
    "SessionPortStatistics",
    "SessionSettings",
    "SessionSnapshot",
    "SessionStream",
    "SessionStreamBase",
    "SessionStreamClosedError",
    "SessionSummary",
    "SteerResult",
    "StreamOverflow",
    "TextDelta",
    "ThinkingLevel",
    "TodoItem",
    "ToolCard",
    "TranscriptEntry",
    "TranscriptPage",
    "TranscriptReader",
    "check_session_key",
    "project",
]
