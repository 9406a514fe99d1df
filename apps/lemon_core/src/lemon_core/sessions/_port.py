"""The session port: the one API every client and ingress uses to talk to sessions.

The router registers the in-process implementation under :data:`SESSION_PORT` at boot; the
control plane serves the same API on its WebSocket. Clients (the terminal chat, the terminal
UI, the web page, channels, webhooks, cron) use only this: never the bus, the store, the router
or the executor.

Recovery: :meth:`SessionPort.watch` is one bounded delivery. When the client falls behind, the
stream ends with one :class:`~lemon_core.sessions.StreamOverflow`; the client then calls
:meth:`SessionPort.snapshot`, replaces what it shows with the snapshot (the active text is
replacement-only), and watches again, ignoring text deltas of the active attempt with
``seq <= snapshot.active.text_seq``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final, Literal, Protocol, TypeAlias, get_args, runtime_checkable

import msgspec

from lemon_core.events import ActionKind, ApprovalDecision, ErrorCode, RunPhase, RunUsage
from lemon_core.execution import Capability, Receipt, RunRequest
from lemon_core.sessions._events import SessionEvent

__all__ = [
    "ALL_SESSIONS",
    "SESSION_COMPACTOR",
    "SESSION_PORT",
    "THINKING_LEVELS",
    "TRANSCRIPT_READER",
    "ActionState",
    "ActiveRun",
    "ApprovalResult",
    "CancelResult",
    "CompactResult",
    "NativeHistory",
    "PendingApproval",
    "RunRecord",
    "SessionChange",
    "SessionCompactor",
    "SessionPort",
    "SessionPortStatistics",
    "SessionSettings",
    "SessionSnapshot",
    "SessionStream",
    "SessionSummary",
    "SteerResult",
    "TaskState",
    "ThinkingLevel",
    "TodoItem",
    "TranscriptEntry",
    "TranscriptPage",
    "TranscriptReader",
]


class SteerResult(msgspec.Struct, frozen=True, kw_only=True):
    """What became of a steer: ``accepted`` (the running answer took it), ``queued`` (it could
    not, so it runs as the next message), or ``refused`` (nothing runs in that session; nothing
    was queued)."""

    status: Literal["accepted", "queued", "refused"]
    run_id: str | None = None
    reason: str | None = None


class CancelResult(msgspec.Struct, frozen=True, kw_only=True):
    """How many submissions a cancel reached (0: nothing matched; nothing changed)."""

    cancelled: int
    run_ids: tuple[str, ...] = ()


class ApprovalResult(msgspec.Struct, frozen=True, kw_only=True):
    """``resolved`` true when the decision was taken; else ``reason`` says why not (it was no
    longer pending: decided elsewhere, timed out, expired)."""

    resolved: bool
    reason: str | None = None


class CompactResult(msgspec.Struct, frozen=True, kw_only=True):
    """What compacting a session did: ``compacted`` False with ``note`` when nothing changed
    (nothing older to summarise), or ``error`` (typed ``error_code``) when it could not."""

    session_key: str
    compacted: bool
    summary: str = ""
    messages_summarised: int = 0
    messages_kept: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    context_window: int = 0
    note: str | None = None
    error: str | None = None
    error_code: ErrorCode | None = None


class ActionState(msgspec.Struct, frozen=True, kw_only=True):
    """The last known state of one action of the active run."""

    action_id: str
    kind: ActionKind
    title: str
    phase: Literal["started", "updated", "completed"]
    ok: bool | None = None
    message: str | None = None


class ActiveRun(msgspec.Struct, frozen=True, kw_only=True):
    """The run in progress: its fixed identity, phase, answer so far and actions."""

    run_id: str
    """The run as submitted (fixed for its whole life)."""
    attempt_id: str
    """The attempt now running (differs from ``run_id`` after a retry)."""
    attempt: int
    phase: RunPhase
    text: str
    """The answer so far (replace what is shown with it; bounded: see ``text_truncated``)."""
    text_seq: int
    """The ``seq`` of the last text delta included in ``text``."""
    text_truncated: bool = False
    actions: tuple[ActionState, ...] = ()


class PendingApproval(msgspec.Struct, frozen=True, kw_only=True):
    """An approval of this session still waiting for a decision."""

    approval_id: str
    run_id: str | None
    tool: str
    action: dict[str, Any] | None = None
    rationale: str | None = None
    requested_at_ms: int = 0
    expires_at_ms: int | None = None


class TodoItem(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    status: str = "pending"


class TaskState(msgspec.Struct, frozen=True, kw_only=True):
    """A task the active run delegated (or one of its descendants), as the run graph holds it."""

    task_id: str
    parent_run_id: str
    child_run_id: str
    session_key: str
    """The child's own session."""
    depth: int
    status: str
    agent: str = "general"
    description: str = ""
    reason: str | None = None
    tokens: int | None = None


class TranscriptEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One message of a session's history (bounded and redacted for clients)."""

    index: int
    role: Literal["user", "assistant", "tool", "notice"]
    text: str
    truncated: bool = False
    timestamp_ms: int | None = None
    """When the message was written (wall-clock ms), where the transcript records it."""
    tool: str | None = None
    """Role ``tool``: the tool's name."""
    outcome: Literal["ok", "failed", "denied", "expired", "cancelled"] | None = None
    """Role ``tool``: how the call ended, as the transcript records it: ran ``ok`` or
    ``failed``, did not run (``denied``: by a person or the policy; ``expired``: no decision
    in time, or the run that asked ended), or stopped unfinished (``cancelled``)."""


ThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh"]
#: The thinking levels a session may be set to (the wire's ``sessions.patch``).
THINKING_LEVELS: Final[tuple[str, ...]] = get_args(ThinkingLevel)


class SessionSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What a client set on a session (:meth:`SessionPort.patch`); ``None``: not set (the
    runtime's default applies)."""

    session_key: str
    model: str | None = None
    """``"<provider>:<model>"``: the model the session's runs use unless a request names one."""
    label: str | None = None
    thinking_level: ThinkingLevel | None = None
    workspace: str | None = None
    """The real path of the session's own workspace: where its runs start (whatever their
    ingress) unless a request names a cwd; ``None``: the daemon's workspace."""
    updated_at_ms: int = 0


class SessionChange(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`SessionPort.reset` / :meth:`SessionPort.delete` did: ``done`` False with
    ``reason`` when nothing changed (the session is busy, or the runtime keeps no sessions)."""

    session_key: str
    done: bool
    reason: str | None = None


class TranscriptPage(msgspec.Struct, frozen=True, kw_only=True):
    """``entries`` oldest first; ``more`` when older entries exist before the first one."""

    session_key: str
    entries: tuple[TranscriptEntry, ...]
    more: bool = False
    notice: str | None = None
    """A plain-words note about the history (for example a recovered torn tail)."""


class SessionSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """Seed 003's ``sessions.snapshot``: the session as its authorities know it now.

    ``status == "retry"`` means the session changed while the snapshot was composed (a run
    started or ended): nothing else is filled in; ask again.
    """

    session_key: str
    status: Literal["ok", "retry"] = "ok"
    revision: int = 0
    """Counts what happened in the session while this process runs (monotonic)."""
    branch: str = "main"
    native_session_id: str | None = None
    active: ActiveRun | None = None
    queued: tuple[str, ...] = ()
    pending_approvals: tuple[PendingApproval, ...] = ()
    messages: tuple[TranscriptEntry, ...] = ()
    messages_truncated: bool = False
    last_run_id: str | None = None
    last_ok: bool | None = None
    last_error_code: ErrorCode | None = None
    todos: tuple[TodoItem, ...] = ()
    tasks: tuple[TaskState, ...] = ()
    """The active run's delegated tasks (its children, their children...), parents first."""


class SessionSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One line of the session list."""

    session_key: str
    runs: int
    last_run_id: str | None = None
    last_ok: bool | None = None
    last_error_code: ErrorCode | None = None
    last_answer_preview: str = ""
    updated_at_ms: int = 0
    active: bool = False
    model: str | None = None
    """The session's own model (:meth:`SessionPort.patch`), ``None`` when it has none."""
    label: str | None = None


class RunRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One finished run, as the run history keeps it (newest first in :meth:`SessionPort.runs`)."""

    run_id: str
    """The run as submitted."""
    session_key: str
    ok: bool
    attempt_id: str | None = None
    """The attempt that ended it, when the runtime retried (else ``None``)."""
    error_code: ErrorCode | None = None
    started_at_ms: int = 0
    finished_at_ms: int = 0
    duration_ms: int = 0
    usage: RunUsage | None = None
    """Tokens, dollars and model as the runtime reported them (``None``: not reported)."""


class SessionPortStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """Counters of a port."""

    watchers: int
    streams_opened: int
    streams_overflowed: int
    snapshots: int
    snapshot_retries: int
    active_runs: int
    conversations: int
    submitted: int


@runtime_checkable
class SessionStream(Protocol):
    """One bounded, ordered stream of a session's events (``async for`` or :meth:`get`).

    Ends after a :class:`~lemon_core.sessions.StreamOverflow` (then recover with a snapshot),
    or when closed. Closing is idempotent.
    """

    session_key: str

    async def get(self) -> SessionEvent:
        """The next event; raises :class:`~lemon_core.sessions.SessionStreamClosedError` once
        the stream has ended."""
        ...

    def __aiter__(self) -> AsyncIterator[SessionEvent]: ...

    def close(self) -> None: ...

    @property
    def closed(self) -> bool: ...


@runtime_checkable
class SessionPort(Protocol):
    """See the module docstring."""

    async def submit(self, request: RunRequest) -> Receipt:
        """Admit a run request (bad input raises ``ValueError``; a stopped runtime raises
        :class:`~lemon_core.execution.RouterUnavailableError`). Idempotent by
        ``request.run_id``: re-submitting a run id already accepted answers the existing
        receipt and never starts a second run (a retry or a takeover re-submits safely)."""
        ...

    async def steer(self, session_key: str, text: str) -> SteerResult:
        """Offer ``text`` to the session's running answer."""
        ...

    async def cancel(
        self,
        *,
        run_id: str | None = None,
        session_key: str | None = None,
        include_queued: bool = True,
    ) -> CancelResult:
        """Cancel one run (exact id), or a session's active run and, with ``include_queued``,
        everything it has waiting. Exactly one of ``run_id`` / ``session_key``."""
        ...

    async def resolve_approval(
        self, approval_id: str, decision: ApprovalDecision | str
    ) -> ApprovalResult:
        """Decide a pending approval (an unknown decision raises ``ValueError``)."""
        ...

    def watch(self, session_key: str) -> SessionStream:
        """Start following the session (events from now on)."""
        ...

    def watch_all(self) -> SessionStream:
        """Start following every session (events from now on, each naming its session in
        ``session_key``; the stream's own ``session_key`` is ``"*"``): one bounded delivery,
        ending with a :class:`~lemon_core.sessions.StreamOverflow` like :meth:`watch`."""
        ...

    async def snapshot(self, session_key: str) -> SessionSnapshot:
        """The session as its authorities know it (see :class:`SessionSnapshot`)."""
        ...

    async def sessions(self, *, limit: int = 50) -> list[SessionSummary]:
        """The most recently active sessions, newest first."""
        ...

    async def runs(self, *, limit: int = 50, since_ms: int | None = None) -> list[RunRecord]:
        """The most recently finished runs of every session, newest first, each once (its last
        attempt; at most ``limit``; with ``since_ms`` those finished at or after it)."""
        ...

    async def transcript(
        self, session_key: str, *, limit: int = 50, before: int | None = None
    ) -> TranscriptPage:
        """The session's messages, newest ``limit`` (before index ``before``), oldest first."""
        ...

    async def compact(self, session_key: str, *, instructions: str | None = None) -> CompactResult:
        """Summarise the session's older history so it fits the model again (``/compact``).
        Refused while a run of the session is active or queued."""
        ...

    async def settings(self, session_key: str) -> SessionSettings:
        """What is set on the session (all ``None`` when nothing is)."""
        ...

    async def patch(
        self,
        session_key: str,
        *,
        model: str | msgspec.UnsetType | None = msgspec.UNSET,
        label: str | msgspec.UnsetType | None = msgspec.UNSET,
        thinking_level: ThinkingLevel | msgspec.UnsetType | None = msgspec.UNSET,
        workspace: str | msgspec.UnsetType | None = msgspec.UNSET,
    ) -> SessionSettings:
        """Set (a value) or clear (``None``) the given settings; the others are kept. The
        session's later runs use the model and start in the workspace (an absolute path of an
        existing directory, stored as its real path). A model the runtime does not know, a
        thinking level outside :data:`THINKING_LEVELS`, a workspace that is not an existing
        directory or a blank value raises ``ValueError``."""
        ...

    async def reset(self, session_key: str) -> SessionChange:
        """Forget the session's conversation (its next message starts a fresh one); its
        settings and run history are kept. Refused while a run of it is active or queued."""
        ...

    async def delete(self, session_key: str) -> SessionChange:
        """Forget the session: its conversation, settings, list entry and run history.
        Refused while a run of it is active or queued."""
        ...

    def statistics(self) -> SessionPortStatistics: ...


#: The ``session_key`` of a :meth:`SessionPort.watch_all` stream.
ALL_SESSIONS: Final = "*"


@runtime_checkable
class SessionCompactor(Protocol):
    """Compacts a native session's history (registered by the agent app, coding_agent)."""

    async def compact(
        self, native_session_id: str, *, cwd: str | None, instructions: str | None
    ) -> CompactResult:
        """Compact; the port fills in the result's ``session_key``."""
        ...


class NativeHistory(msgspec.Struct, frozen=True, kw_only=True):
    """What a transcript reader found: a page of entries (oldest first), whether older ones
    exist, a plain-words notice (a recovered torn tail, say), and the last todo list."""

    entries: tuple[TranscriptEntry, ...] = ()
    more: bool = False
    notice: str | None = None
    todos: tuple[TodoItem, ...] = ()


@runtime_checkable
class TranscriptReader(Protocol):
    """Reads a native session's history (registered by the agent app, coding_agent)."""

    async def read(
        self, native_session_id: str, *, limit: int = 50, before: int | None = None
    ) -> NativeHistory:
        """The newest ``limit`` entries before index ``before``; raises ``LookupError`` when
        the session is unknown."""
        ...


#: The capability the router registers its in-process port under.
SESSION_PORT: Final[Capability[SessionPort]] = Capability("SessionPort", SessionPort)
#: The capability the agent app registers its session compactor under.
SESSION_COMPACTOR: Final[Capability[SessionCompactor]] = Capability(
    "SessionCompactor", SessionCompactor
)
#: The capability the agent app registers its transcript reader under.
TRANSCRIPT_READER: Final[Capability[TranscriptReader]] = Capability(
    "TranscriptReader", TranscriptReader
)
