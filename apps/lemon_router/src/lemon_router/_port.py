"""The in-process :class:`~lemon_core.sessions.SessionPort`, over a running :class:`Router`.

The router owns session state, so it answers for sessions: submissions, steering and
cancellation go to the router; :meth:`RouterSessionPort.watch` is one bounded stream on
``session:<key>`` (the router forwards each run's events there, approvals included, in order);
:meth:`RouterSessionPort.snapshot` composes the router's view (active run identity, phase,
queue) with the owners of the rest: the engine runtime (the active attempt's text and actions),
the approvals (pending ones of this session), the session index and the agent's transcript
reader (history, todos). The owner identity (the session's revision and active attempt) is read
before and after the parts that wait; on drift the snapshot says ``retry``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any, Final

import msgspec

from lemon_core.approvals import ExecApprovals, UnknownApprovalError
from lemon_core.capabilities import APPROVALS, MODEL_CATALOG
from lemon_core.cwd import CwdError, resolve_cwd
from lemon_core.events import (
    ActionKind,
    ApprovalDecision,
    ErrorCode,
    QueueOutcome,
    QueueOutcomeKind,
    RunPhase,
)
from lemon_core.execution import ENGINE_RUNTIME, Receipt, RunIntrospection, RunRequest
from lemon_core.sessions import (
    SESSION_COMPACTOR,
    THINKING_LEVELS,
    TRANSCRIPT_READER,
    ActionState,
    ActiveRun,
    ApprovalResult,
    BusAllSessionsStream,
    BusSessionStream,
    CancelResult,
    CompactResult,
    NativeHistory,
    PendingApproval,
    RunRecord,
    SessionChange,
    SessionPortStatistics,
    SessionSettings,
    SessionSnapshot,
    SessionSummary,
    SteerResult,
    TaskState,
    TranscriptEntry,
    TranscriptPage,
    check_session_key,
)
from lemon_core.store import (
    ChatStateStore,
    RunGraphStore,
    RunStore,
    SessionIndexEntry,
    SessionIndexStore,
    SessionSettingsRecord,
    SessionSettingsStore,
    Store,
    StoreError,
)
from lemon_router._router import Router
from lemon_router.errors import RouterUsageError

__all__ = ["RouterSessionPort", "redact_secrets"]

_SNAPSHOT_MESSAGES: Final = 50
_SNAPSHOT_TASKS: Final = 200  # the active run's delegated tasks a snapshot shows at most
#: The durable table of accepted receipts by run id (what makes ``submit`` idempotent across a
#: restart or another daemon on the same store), and how long a receipt is kept there.
RECEIPTS_TABLE: Final = "port_receipts"
_RECEIPT_TTL_MS: Final = 7 * 86_400_000
#: Accepted receipts remembered in memory (the store answers for older ones).
_RECEIPT_MEMORY: Final = 4096
_STEER_ANSWER_S: Final = 30.0
_SECRET_PATTERNS: Final = re.compile(
    r"(sk-[A-Za-z0-9_\-]{16,}|sk-ant-[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{35}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----)"
)


def redact_secrets(text: str) -> str:
    """``text`` with credential-shaped values (API keys, tokens, private keys) replaced by
    ``[redacted]``: what a snapshot or transcript page hands to a client."""
    return _SECRET_PATTERNS.sub("[redacted]", text)


class RouterSessionPort:
    """See the module docstring. ``store`` holds the session index and chat state; the
    approvals and the transcript reader are found on the router's runtime context unless
    given. ``default_workspace`` is the daemon's workspace: where a run starts when neither
    its request (``cwd``) nor its session (``patch(workspace=...)``) names one, whatever its
    ingress (``None``: the gateway's ``default_cwd``)."""

    def __init__(
        self,
        router: Router,
        *,
        store: Store | None = None,
        approvals: ExecApprovals | None = None,
        redact: Callable[[str], str] = redact_secrets,
        stream_max_entries: int | None = None,
        default_workspace: str | None = None,
    ) -> None:
        self._router = router
        self.default_workspace = default_workspace
        self._store = store
        self._approvals = approvals
        self._redact = redact
        self._stream_max_entries = stream_max_entries
        self._watchers: set[BusSessionStream] = set()
        self._all_listeners: dict[BusSessionStream, Callable[[], None]] = {}
        self._opened = 0
        self._overflowed = 0
        self._snapshots = 0
        self._retries = 0
        self._accepted: OrderedDict[str, Receipt] = OrderedDict()
        self._submitting: dict[str, asyncio.Future[Receipt]] = {}
        self.resubmissions = 0

    # -- commands ---------------------------------------------------------------------------

    async def submit(self, request: RunRequest) -> Receipt:
        """Admit ``request``. Idempotent by ``run_id``: a request whose ``run_id`` was already
        accepted (any status but ``rejected``) answers the receipt of the first acceptance and
        starts nothing, whether the first submission is still being admitted (concurrent
        callers wait for its answer), queued, running or finished, and after a restart or on
        another daemon on the same store (the accepted receipts are kept in the store)."""
        run_id = request.run_id
        if run_id is None:
            return await self._admit(request)
        known = self._known_receipt(run_id)
        if known is not None:
            self.resubmissions += 1
            return known
        pending = self._submitting.get(run_id)
        if pending is not None:
            self.resubmissions += 1
            receipt = await asyncio.shield(pending)
            if receipt.status != "rejected":
                return receipt
            return await self.submit(request)
        future: asyncio.Future[Receipt] = asyncio.get_running_loop().create_future()
        self._submitting[run_id] = future
        try:
            known = await self._stored_receipt(run_id)
            if known is not None:
                self.resubmissions += 1
                receipt = known
            else:
                receipt = await self._admit(request)
                if receipt.status != "rejected":
                    await self._remember(receipt)
            future.set_result(receipt)
            return receipt
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a waiter re-raises it, nobody else must log it
            raise
        finally:
            del self._submitting[run_id]

    def _known_receipt(self, run_id: str) -> Receipt | None:
        found = self._accepted.get(run_id)
        if found is not None:
            self._accepted.move_to_end(run_id)
        return found

    async def _stored_receipt(self, run_id: str) -> Receipt | None:
        if self._store is None:
            return None
        with contextlib.suppress(StoreError):
            raw = await self._store.get(RECEIPTS_TABLE, run_id)
            if isinstance(raw, dict):
                with contextlib.suppress(TypeError, ValueError):
                    receipt = Receipt(**raw)
                    self._keep(receipt)
                    return receipt
        return None

    def _keep(self, receipt: Receipt) -> None:
        self._accepted[receipt.run_id] = receipt
        self._accepted.move_to_end(receipt.run_id)
        while len(self._accepted) > _RECEIPT_MEMORY:
            self._accepted.popitem(last=False)

    async def _remember(self, receipt: Receipt) -> None:
        self._keep(receipt)
        if self._store is not None:
            with contextlib.suppress(StoreError):
                await self._store.put(
                    RECEIPTS_TABLE, receipt.run_id, asdict(receipt), ttl_ms=_RECEIPT_TTL_MS
                )

    async def _admit(self, request: RunRequest) -> Receipt:
        if (request.model is None or request.cwd is None) and self._store is not None:
            # The session's model and workspace (sessions.patch) unless the request names them.
            check_session_key(request.session_key)
            with contextlib.suppress(StoreError):
                found = await SessionSettingsStore(self._store).get(request.session_key)
                if found is not None and found.model is not None and request.model is None:
                    request = replace(request, model=found.model)
                if found is not None and found.workspace is not None and request.cwd is None:
                    request = replace(request, cwd=found.workspace)
        if request.cwd is None and self.default_workspace is not None:
            request = replace(request, cwd=self.default_workspace)
        return await self._router.submit(request)

    async def steer(self, session_key: str, text: str) -> SteerResult:
        router = self._router
        prepared = router.active_prepared(session_key)
        if prepared is None:
            return SteerResult(status="refused", reason="nothing is running in this session")
        request = RunRequest(
            origin=prepared.origin,
            session_key=session_key,
            prompt=text,
            agent_id=prepared.agent_id,
            queue_mode="steer",
            model=prepared.model,
            cwd=prepared.cwd,
            tool_policy=prepared.tool_policy,
            preapproved=prepared.preapproved,
        )
        # The router answers the outcome itself (no subscription that could overflow).
        run_id = f"run_{uuid.uuid4()}"
        expected = router.expect_outcome(run_id)
        try:
            receipt = await router.submit(replace(request, run_id=run_id))
            if receipt.status == "rejected":
                return SteerResult(status="refused", run_id=receipt.run_id, reason=receipt.reason)
            if receipt.status != "dispatched_to_active":
                return SteerResult(status="queued", run_id=receipt.run_id, reason=receipt.reason)
            try:
                outcome: QueueOutcome | None = await asyncio.wait_for(
                    asyncio.shield(expected), _STEER_ANSWER_S
                )
            except TimeoutError:
                outcome = None
        finally:
            expected.cancel()
        kind = None if outcome is None else outcome.outcome
        if kind is QueueOutcomeKind.STEERED:
            return SteerResult(status="accepted", run_id=receipt.run_id)
        if kind in (QueueOutcomeKind.CANCELLED, QueueOutcomeKind.REJECTED):
            assert outcome is not None
            return SteerResult(
                status="refused",
                run_id=receipt.run_id,
                reason=outcome.reason or f"the steer was {kind.value} before the answer took it",
            )
        if kind is QueueOutcomeKind.MERGED:
            assert outcome is not None
            return SteerResult(
                status="queued",
                run_id=receipt.run_id,
                reason=f"merged into the queued message {outcome.into_run_id}",
            )
        return SteerResult(
            status="queued",
            run_id=receipt.run_id,
            reason="the running answer could not take it; it runs as the next message",
        )

    async def cancel(
        self,
        *,
        run_id: str | None = None,
        session_key: str | None = None,
        include_queued: bool = True,
    ) -> CancelResult:
        if (run_id is None) == (session_key is None):
            raise RouterUsageError("cancel takes exactly one of run_id= or session_key=")
        router = self._router
        reason = "cancelled by the user"
        if run_id is not None:
            done = router.abort_run(run_id, reason=reason)
            return CancelResult(cancelled=int(done), run_ids=(run_id,) if done else ())
        assert session_key is not None
        _check_key(session_key)
        active = router.active_attempt(session_key)
        if include_queued:
            ids = router.cancel_session(session_key, reason=reason)
            return CancelResult(cancelled=len(ids), run_ids=ids)
        if active is None:
            return CancelResult(cancelled=0)
        done = router.abort_run(active[0], reason=reason)
        return CancelResult(cancelled=int(done), run_ids=(active[0],) if done else ())

    async def resolve_approval(
        self, approval_id: str, decision: ApprovalDecision | str
    ) -> ApprovalResult:
        approvals = self._approvals_or_none()
        if approvals is None:
            return ApprovalResult(resolved=False, reason="no approvals run in this runtime")
        try:
            approvals.resolve(approval_id, decision)
        except UnknownApprovalError as exc:
            return ApprovalResult(resolved=False, reason=str(exc))
        return ApprovalResult(resolved=True)

    # -- reading ----------------------------------------------------------------------------

    def watch(self, session_key: str) -> BusSessionStream:
        _check_key(session_key)
        self._router.note_session(session_key)  # watchers follow it (its runs may be elsewhere)
        stream = BusSessionStream(
            self._router.bus,
            session_key,
            max_entries=self._stream_max_entries,
            on_close=self._closed,
        )
        self._watchers.add(stream)
        self._opened += 1
        return stream

    def watch_all(self) -> BusAllSessionsStream:
        router = self._router
        stream = BusAllSessionsStream(
            router.bus, max_entries=self._stream_max_entries, on_close=self._closed
        )
        for session_key in router.known_sessions():
            stream.add(session_key)
        remove = router.on_new_session(stream.add)
        self._all_listeners[stream] = remove
        self._watchers.add(stream)
        self._opened += 1
        return stream

    def _closed(self, stream: BusSessionStream) -> None:
        remove = self._all_listeners.pop(stream, None)
        if remove is not None:
            remove()
        self._watchers.discard(stream)
        if stream.overflowed:
            self._overflowed += 1

    async def snapshot(self, session_key: str) -> SessionSnapshot:
        _check_key(session_key)
        self._snapshots += 1
        router = self._router
        router.note_session(session_key)  # its watchers follow what they read (shared runs)
        before = (router.revision(session_key), router.active_attempt(session_key))
        native_id, last = await self._native(session_key)
        history = await self._history(native_id, limit=_SNAPSHOT_MESSAGES)
        tasks = await self._tasks(before[1][0] if before[1] is not None else None)
        after_active = router.active_attempt(session_key)
        if (router.revision(session_key), after_active) != before:
            self._retries += 1
            return SessionSnapshot(
                session_key=session_key, status="retry", revision=router.revision(session_key)
            )
        # From here on nothing awaits: the rest is read in one step of the loop.
        active = self._active(after_active)
        approvals = self._approvals_or_none()
        pending = tuple(
            PendingApproval(
                approval_id=p.id,
                run_id=p.run_id,
                tool=p.tool,
                action=None if p.action is None else dict(p.action),
                rationale=p.rationale,
                requested_at_ms=p.requested_at_ms or 0,
                expires_at_ms=p.expires_at_ms,
            )
            for p in (approvals.pending() if approvals is not None else ())
            if p.session_key == session_key
        )
        return SessionSnapshot(
            session_key=session_key,
            revision=router.revision(session_key),
            native_session_id=native_id,
            active=active,
            queued=router.queued(session_key),
            pending_approvals=pending,
            messages=history.entries,
            messages_truncated=history.more,
            last_run_id=last.last_run_id if last else None,
            last_ok=last.last_ok if last else None,
            last_error_code=last.last_error_code if last else None,
            todos=history.todos,
            tasks=tasks,
        )

    async def _tasks(self, run_id: str | None) -> tuple[TaskState, ...]:
        """The run graph under the active run (none when idle, or without a store); a store
        that fails here leaves them out (the snapshot still answers)."""
        if run_id is None or self._store is None:
            return ()
        try:
            nodes = await RunGraphStore(self._store).tree(run_id, limit=_SNAPSHOT_TASKS)
        except StoreError:
            return ()
        return tuple(
            TaskState(
                task_id=n.task_id, parent_run_id=n.parent_run_id, child_run_id=n.child_run_id,
                session_key=n.session_key, depth=n.depth, status=n.status, agent=n.agent,
                description=n.description, reason=n.reason,
                tokens=None if n.usage is None else n.usage.total_tokens,
            )
            for n in nodes
        )  # fmt: skip

    def _active(self, attempt: tuple[str, str, int, Any] | None) -> ActiveRun | None:
        if attempt is None:
            return None
        run_id, attempt_id, number, phase = attempt
        runtime = self._router.context.capabilities.get(ENGINE_RUNTIME)
        engine: object = runtime
        view = engine.run_view(attempt_id) if isinstance(engine, RunIntrospection) else None
        return ActiveRun(
            run_id=run_id,
            attempt_id=attempt_id,
            attempt=number,
            phase=phase or RunPhase.ACCEPTED,
            text=self._redact(view.text) if view else "",
            text_seq=view.text_seq if view else 0,
            text_truncated=view.text_truncated if view else False,
            actions=tuple(
                ActionState(
                    action_id=a.id,
                    kind=ActionKind(a.kind),
                    title=a.title,
                    phase=a.phase,
                    ok=a.ok,
                    message=a.message,
                )
                for a in (view.actions if view else ())
                if a.kind != "approval"
            ),
        )

    async def _native(self, session_key: str) -> tuple[str | None, Any]:
        """The session's native id (chat state first, then the session index) and its
        index entry."""
        if self._store is None:
            return None, None
        native: str | None = None
        entry = None
        with contextlib.suppress(StoreError):
            token = await ChatStateStore(self._store).resume_token(session_key)
            native = token.value if token is not None and token.is_native else None
        with contextlib.suppress(StoreError):
            entry = await SessionIndexStore(self._store).get(session_key)
        if native is None and entry is not None:
            native = entry.native_session_id
        return native, entry

    async def _history(
        self, native_id: str | None, *, limit: int, before: int | None = None
    ) -> NativeHistory:
        reader = self._router.context.capabilities.get(TRANSCRIPT_READER)
        if native_id is None:
            return NativeHistory()
        if reader is None:
            return NativeHistory(notice="no transcript reader runs in this runtime")
        try:
            found = await reader.read(native_id, limit=limit, before=before)
        except LookupError:
            return NativeHistory(notice="the transcript of this session is gone")
        return NativeHistory(
            entries=tuple(_redacted(e, self._redact) for e in found.entries),
            more=found.more,
            notice=found.notice,
            todos=found.todos,
        )

    async def sessions(self, *, limit: int = 50) -> list[SessionSummary]:
        if self._store is None:
            return []
        entries = await SessionIndexStore(self._store).recent(limit=max(0, limit))
        settings = SessionSettingsStore(self._store)
        found = []
        for e in entries:
            own: SessionSettingsRecord | SessionIndexEntry | None = e
            if not e.settings_mirrored:  # an entry from before the mirror: read the settings
                own = None
                with contextlib.suppress(StoreError):
                    own = await settings.get(e.session_key)
            found.append(
                SessionSummary(
                    session_key=e.session_key,
                    runs=e.runs,
                    last_run_id=e.last_run_id,
                    last_ok=e.last_ok,
                    last_error_code=e.last_error_code,
                    last_answer_preview=self._redact(e.last_answer_preview),
                    updated_at_ms=e.updated_at_ms,
                    active=self._router.is_busy(e.session_key),
                    model=own.model if own else None,
                    label=own.label if own else None,
                )
            )
        return found

    async def runs(self, *, limit: int = 50, since_ms: int | None = None) -> list[RunRecord]:
        if self._store is None:
            return []
        limit = max(1, limit)
        found = await RunStore(self._store).recent(limit=limit + 16, since_ms=since_ms)
        records: list[RunRecord] = []
        seen: set[str] = set()
        for r in found:  # newest first: a run's last attempt comes before its earlier ones
            run_id = r.retry_of or r.run_id
            if run_id in seen:
                continue
            seen.add(run_id)
            records.append(
                RunRecord(
                    run_id=run_id,
                    session_key=r.session_key,
                    ok=r.ok,
                    attempt_id=r.run_id if r.retry_of else None,
                    error_code=r.error_code,
                    started_at_ms=r.started_at_ms,
                    finished_at_ms=r.finished_at_ms,
                    duration_ms=r.duration_ms,
                    usage=r.usage,
                )
            )
        return records[:limit]

    async def transcript(
        self, session_key: str, *, limit: int = 50, before: int | None = None
    ) -> TranscriptPage:
        self._router.note_session(session_key)  # watchers follow it (its runs may be elsewhere)
        native_id, _ = await self._native(session_key)
        if native_id is None:
            return TranscriptPage(
                session_key=session_key, entries=(), notice="no transcript is kept for it yet"
            )
        history = await self._history(native_id, limit=limit, before=before)
        return TranscriptPage(
            session_key=session_key,
            entries=history.entries,
            more=history.more,
            notice=history.notice,
        )

    async def compact(self, session_key: str, *, instructions: str | None = None) -> CompactResult:
        router = self._router
        if router.is_busy(session_key) or router.queued(session_key):
            return CompactResult(
                session_key=session_key,
                compacted=False,
                error="the session is busy; compact it when its runs have ended",
                error_code=ErrorCode.BAD_REQUEST,
            )
        compactor = router.context.capabilities.get(SESSION_COMPACTOR)
        if compactor is None:
            return CompactResult(
                session_key=session_key,
                compacted=False,
                error="this runtime's agent cannot compact sessions",
                error_code=ErrorCode.ENGINE_UNAVAILABLE,
            )
        native_id, _ = await self._native(session_key)
        if native_id is None:
            return CompactResult(
                session_key=session_key,
                compacted=False,
                note="nothing to compact: the session has no history yet",
            )
        found = await compactor.compact(native_id, cwd=None, instructions=instructions)
        return msgspec.structs.replace(found, session_key=session_key)

    # -- settings and lifecycle -------------------------------------------------------------

    async def settings(self, session_key: str) -> SessionSettings:
        _check_key(session_key)
        if self._store is None:
            return SessionSettings(session_key=session_key)
        found = await SessionSettingsStore(self._store).get(session_key)
        return _settings(session_key, found)

    async def patch(
        self,
        session_key: str,
        *,
        model: str | msgspec.UnsetType | None = msgspec.UNSET,
        label: str | msgspec.UnsetType | None = msgspec.UNSET,
        thinking_level: str | msgspec.UnsetType | None = msgspec.UNSET,
        workspace: str | msgspec.UnsetType | None = msgspec.UNSET,
    ) -> SessionSettings:
        _check_key(session_key)
        changes: dict[str, str | None] = {}
        if not isinstance(model, msgspec.UnsetType):
            changes["model"] = self._checked_model(model)
        if not isinstance(label, msgspec.UnsetType):
            text: object = label
            if text is not None and (not isinstance(text, str) or len(text) > 200):
                raise RouterUsageError("a session label is a string of at most 200 characters")
            changes["label"] = None if label is None else (label.strip() or None)
        if not isinstance(thinking_level, msgspec.UnsetType):
            if thinking_level is not None and thinking_level not in THINKING_LEVELS:
                raise RouterUsageError(
                    f"unknown thinking level {thinking_level!r}: use one of "
                    + ", ".join(THINKING_LEVELS)
                )
            changes["thinking_level"] = thinking_level
        if not isinstance(workspace, msgspec.UnsetType):
            changes["workspace"] = _checked_workspace(workspace)
        if self._store is None:
            raise RouterUsageError("this runtime keeps no sessions (it has no store)")
        store = SessionSettingsStore(self._store)
        found = (
            await store.update(session_key, **changes) if changes else await store.get(session_key)
        )
        return _settings(session_key, found)

    def _checked_model(self, model: object) -> str | None:
        if model is None:
            return None
        if not isinstance(model, str) or not model.strip():
            raise RouterUsageError("a model is a non-blank '<provider>:<model>' reference")
        model = model.strip()
        catalog = self._router.context.capabilities.get(MODEL_CATALOG)
        if catalog is not None:
            known = {m.ref for m in catalog.models()}
            if known and model not in known:
                raise RouterUsageError(
                    f"unknown model {model!r}: pick one models.list names (e.g. "
                    f"{sorted(known)[0]!r})"
                )
        elif ":" not in model:
            raise RouterUsageError(f"a model is '<provider>:<model>', got {model!r}")
        return model

    def _busy_reason(self, session_key: str) -> str | None:
        if self._router.is_busy(session_key) or self._router.queued(session_key):
            return "the session is busy; try again when its runs have ended (or abort them)"
        if self._store is None:
            return "this runtime keeps no sessions (it has no store)"
        return None

    async def reset(self, session_key: str) -> SessionChange:
        _check_key(session_key)
        reason = self._busy_reason(session_key)
        if reason is not None:
            return SessionChange(session_key=session_key, done=False, reason=reason)
        assert self._store is not None
        await ChatStateStore(self._store).delete(session_key)
        await SessionIndexStore(self._store).forget_conversation(session_key)
        self._router.forget_session(session_key)
        return SessionChange(session_key=session_key, done=True)

    async def delete(self, session_key: str) -> SessionChange:
        _check_key(session_key)
        reason = self._busy_reason(session_key)
        if reason is not None:
            return SessionChange(session_key=session_key, done=False, reason=reason)
        assert self._store is not None
        await ChatStateStore(self._store).delete(session_key)
        await SessionSettingsStore(self._store).delete(session_key)
        await RunStore(self._store).forget_session(session_key)
        await SessionIndexStore(self._store).delete(session_key)
        self._router.forget_session(session_key)
        return SessionChange(session_key=session_key, done=True)

    def statistics(self) -> SessionPortStatistics:
        stats = self._router.statistics()
        return SessionPortStatistics(
            watchers=len(self._watchers),
            streams_opened=self._opened,
            streams_overflowed=self._overflowed,
            snapshots=self._snapshots,
            snapshot_retries=self._retries,
            active_runs=stats.active_runs,
            conversations=stats.conversations,
            submitted=stats.submitted,
        )

    def _approvals_or_none(self) -> ExecApprovals | None:
        if self._approvals is not None:
            return self._approvals
        return self._router.context.capabilities.get(APPROVALS)


def _check_key(session_key: str) -> None:
    """A malformed session key is the caller's mistake: say so (``InvalidSessionKeyError``,
    a ``ValueError``) instead of watching a topic nobody publishes on."""
    check_session_key(session_key)


def _settings(session_key: str, found: Any) -> SessionSettings:
    if found is None:
        return SessionSettings(session_key=session_key)
    level = found.thinking_level if found.thinking_level in THINKING_LEVELS else None
    return SessionSettings(
        session_key=session_key,
        model=found.model,
        label=found.label,
        thinking_level=level,
        workspace=found.workspace,
        updated_at_ms=found.updated_at_ms,
    )


def _checked_workspace(workspace: object) -> str | None:
    """The real path of an absolute path to an existing directory (``None`` clears)."""
    if workspace is None:
        return None
    if not isinstance(workspace, str) or not workspace.strip():
        raise RouterUsageError("a workspace is the absolute path of an existing directory")
    if not os.path.isabs(os.path.expanduser(workspace.strip())):
        raise RouterUsageError(
            f"a workspace is an absolute path (the daemon's current directory is not the "
            f"client's), got {workspace!r}"
        )
    try:
        return resolve_cwd(workspace.strip())
    except CwdError as exc:
        raise RouterUsageError(f"workspace {exc.path} {exc.problem}") from None


def _redacted(entry: TranscriptEntry, redact: Callable[[str], str]) -> TranscriptEntry:
    text = redact(entry.text)
    if text == entry.text:
        return entry
    return msgspec.structs.replace(entry, text=text)
