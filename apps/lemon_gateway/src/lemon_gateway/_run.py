"""Run: the lifecycle of one accepted request, from slot to exactly one completion.

Order of a run (topic ``run:<run_id>``)::

    [slot] -> [engine lock] -> run_started -> launch (executor.prepare, bounded retries)
           -> delta (seq 1, 2, ... no gaps) / engine_action ... -> run_completed (exactly once)

Finalisation (exactly once, guarded by the state machine): release the engine lock, store
the native resume state in ChatStateStore, write the run history (and the session index),
forget the run's in-flight record, release the slot, publish ``run_completed``, resolve the
awaiters, let the worker advance.

Durability (a process that dies mid-run cannot finalise): on a local store with an owner lock
the run is recorded in flight (``gateway_in_flight``) as it starts, before it waits for a slot;
with a shared store, once it holds its session's lease. The native session an executor reports
(``started``) is mapped to the session key at once, not only at the end (``session_bound``
awaits that write), so a crash leaves the prompt in the session. Whoever completes a dead
process's runs: :meth:`Gateway.sweep_orphans`.

Runs that end before launching publish only ``run_completed``: a cancel while queued or
waiting, a non-native resume token (never executed), a lock timeout.

A run sees its gateway only through :class:`RunOwner`, a narrow port: never the gateway's
private state.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from lemon_core.backoff import Backoff
from lemon_core.bus import run_topic
from lemon_core.errors import BusClosedError, LemonCoreError
from lemon_core.events import (
    Action,
    ActionKind,
    Completion,
    Delta,
    EngineAction,
    EngineActionPhase,
    ErrorCode,
    Payload,
    RunCompleted,
    RunStarted,
    RunUsage,
    now_ms,
)
from lemon_core.execution import (
    NATIVE_ENGINE,
    ActionPhase,
    ExecutionCommand,
    ExecutionJob,
    ExecutionResult,
    Executor,
    PreparedExecution,
    ResumeToken,
    RunActionView,
    RunView,
)
from lemon_core.leases import Lease
from lemon_core.store import (
    ChatStateStore,
    RunStore,
    RunSummary,
    StaleLeaseError,
    Store,
    StoreError,
)
from lemon_gateway._bound import BoundExpiredError, bounded
from lemon_gateway._history import HistoryWriter
from lemon_gateway._lock import EngineLock, LockLease, LockTimeoutError
from lemon_gateway._request import ExecutionRequest
from lemon_gateway._scheduler import Scheduler, SlotGrant
from lemon_gateway._section import GatewayConfig
from lemon_gateway._session_locks import SessionFileLock
from lemon_gateway._shared import IN_FLIGHT, SharedLeases, lease_name, owner_lost

if TYPE_CHECKING:
    from pathlib import Path

    from lemon_gateway._worker import ThreadWorker

__all__ = ["Run", "RunState"]

_SEP: Final = "\x1f"
log = logging.getLogger("lemon_gateway.run")

_MAX_ERROR_CHARS: Final = 4096
_MAX_ACTIONS_KEPT: Final = 512  # per run, for run_view(); later actions still stream


class RunState(enum.Enum):
    """Where a run is. Transitions only move forward."""

    QUEUED = "queued"
    WAITING_SLOT = "waiting_slot"
    WAITING_LOCK = "waiting_lock"
    LAUNCHING = "launching"
    RUNNING = "running"
    COMPLETING = "completing"
    DONE = "done"


# Module constants: an enum member read costs far more than a global read on 3.11, and
# these are read several times per run on the hot path.
_QUEUED: Final = RunState.QUEUED
_WAITING_SLOT: Final = RunState.WAITING_SLOT
_WAITING_LOCK: Final = RunState.WAITING_LOCK
_LAUNCHING: Final = RunState.LAUNCHING
_RUNNING: Final = RunState.RUNNING
_COMPLETING: Final = RunState.COMPLETING
_DONE: Final = RunState.DONE

_CANCELLABLE: Final = frozenset(
    {
        _QUEUED,
        _WAITING_SLOT,
        _WAITING_LOCK,
        _LAUNCHING,
        _RUNNING,
    }
)


def _truncate(text: str) -> str:
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 1] + "…"


@dataclass(slots=True)
class _Outcome:
    ok: bool
    answer: str = ""
    error: str | None = None
    code: ErrorCode | None = None
    resume: ResumeToken | None = None
    usage: RunUsage | None = None
    synthetic: bool = False
    detail: dict[str, Any] | None = None


class RunOwner(Protocol):
    """What a run may use of its gateway: a narrow port, so a run never reaches into the
    gateway's private state. The gateway gives its runs one (``_RunServices``)."""

    @property
    def config(self) -> GatewayConfig: ...

    @property
    def store(self) -> Store: ...

    @property
    def chat_state(self) -> ChatStateStore | None: ...

    @property
    def run_store(self) -> RunStore | None: ...

    @property
    def scheduler(self) -> Scheduler: ...

    @property
    def history(self) -> HistoryWriter | None:
        """The group commit of run history into ``run_store`` (None: written one by one)."""
        ...

    @property
    def engine_lock(self) -> EngineLock: ...

    @property
    def shared(self) -> SharedLeases | None:
        """The shared leases when several daemons share the store, else ``None``."""
        ...

    @property
    def owner(self) -> str:
        """Who accepted the run (its in-flight record names it)."""
        ...

    @property
    def executor(self) -> Executor: ...

    @property
    def records_in_flight(self) -> bool:
        """Whether runs are recorded in flight on a local store from their start."""
        ...

    @property
    def session_locks(self) -> Path | None:
        """Where runs take their session's cross-process lock (a store the processes of one
        home share), or None (see :mod:`lemon_gateway._session_locks`)."""
        ...

    def cancel(self, run_id: str, reason: str) -> bool:
        """Cancel the live run ``run_id`` (loop-only; see :meth:`Gateway.cancel`)."""
        ...

    def next_generation(self) -> int:
        """A fresh slot generation (strictly increasing across the gateway)."""
        ...

    def resolve_cwd(self, cwd: str | None) -> str:
        """The absolute working directory for a command's ``cwd`` (the default when blank)."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
        """Start a task the gateway owns (awaited or cancelled by its stop)."""
        ...

    def publish(self, run: Run, type_: str, payload: Payload) -> None:
        """Publish on the run's topic; a refusal is logged and counted, never raised."""

    def try_publish(self, run: Run, type_: str, payload: Payload) -> LemonCoreError | None:
        """:meth:`publish`, returning the refusal (``None`` when published)."""
        ...

    async def complete_orphan(
        self, fenced: Store, key: str, record: dict[str, Any], *, why: str
    ) -> None:
        """Give a dead owner's in-flight run its one completion (see the gateway)."""

    async def latest_resume(self, command: ExecutionCommand) -> ResumeToken | None:
        """The token an automatic resume of ``command`` should use now, as the router's
        registered ``ResumeReadback`` answers (``None``: none registered, or run as
        submitted)."""
        ...

    def note_store_failure(self) -> None:
        """Count a store failure (the run goes on; the operator sees the count)."""

    def note_launch_failure(self) -> None:
        """Count a failed launch attempt."""

    def run_finished(self, run: Run, completion: Completion) -> None:
        """``run`` completed (exactly once): forget it and let its worker advance."""


class Run:
    """One accepted request. Implements the ExecutionSink its executor streams into."""

    __slots__ = (
        "_actions",
        "_binding",
        "_in_flight_key",
        "_keeper",
        "_parts",
        "_session_lock",
        "_shared",
        "_store_abandoned",
        "_store_cancel",
        "_store_deadline",
        "_store_task",
        "cancel_reason",
        "future",
        "gateway",
        "grant",
        "last_resume",
        "launch_attempts",
        "lease",
        "lease_lost",
        "orphaned",
        "prepared",
        "request",
        "seq",
        "shared_engine",
        "shared_resume",
        "slot_generation",
        "slot_retries",
        "started_ns",
        "state",
        "task",
        "topic",
        "worker",
    )

    def __init__(self, gateway: RunOwner, worker: ThreadWorker, request: ExecutionRequest) -> None:
        self.gateway = gateway
        self.worker = worker
        self.request = request
        self.topic = run_topic(request.run_id)
        self.state = _QUEUED
        self.task: asyncio.Task[None] | None = None
        self.future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self.cancel_reason: str | None = None
        self.grant: SlotGrant | None = None
        self.lease: LockLease | None = None
        # Shared leases (several daemons): the engine lease fences the run's durable writes.
        self.shared_engine: Lease | None = None
        self._shared: list[Lease] = []
        self._session_lock: SessionFileLock | None = None
        self._keeper: asyncio.Task[None] | None = None
        self.lease_lost: str | None = None
        self.shared_resume: ResumeToken | None = None
        self.orphaned = False
        self.prepared: PreparedExecution | None = None
        self.seq = 0
        self._parts: list[str] = []
        self._actions: dict[str, RunActionView] | None = None
        self._store_task: asyncio.Task[Any] | None = None
        self._store_cancel: str | None = None
        self._store_deadline = 0.0  # loop time when the resume write passes its bound
        self._store_abandoned = False
        self._binding: asyncio.Task[None] | None = None
        self._in_flight_key: str | None = None
        self.last_resume: ResumeToken | None = None
        self.launch_attempts = 0
        self.slot_generation = 0
        self.slot_retries = 0
        self.started_ns = 0

    @property
    def run_id(self) -> str:
        return self.request.run_id

    # -- cancellation -------------------------------------------------------------------

    def cancel(self, reason: str) -> bool:
        """Ask the run to end with ``reason``; the first reason wins.

        Idempotent: True while the run can still be cancelled (also for a repeat),
        False once it is completing or done.
        """
        if self.state not in _CANCELLABLE:
            return self._cancel_store_write(reason)
        if self.cancel_reason is None:
            self.cancel_reason = reason
            # A task that has not started yet must not be cancelled: its coroutine would
            # die before reaching the code that completes the run. It checks the reason
            # when it starts instead.
            task = self.task
            if task is not None and self.state is not _QUEUED:
                if asyncio.current_task() is task:
                    # Cancelled from inside its own (worker) task: the request would be
                    # delivered at the task's next suspension, which may be after this run
                    # has completed. Deliver it once the task is suspended, and only if
                    # this run is still the one running there.
                    asyncio.get_running_loop().call_soon(self._deliver_cancel, reason)
                else:
                    task.cancel(reason)
        return True

    def _cancel_store_write(self, reason: str) -> bool:
        # A completing run is still live until its run_completed is published; the only
        # thing it can wait on is its resume-state write. A cancel never cuts a healthy write
        # short (the session would lose its resume state): it is noted, and the write goes on
        # under its bound (store_timeout_s), which abandons it if it hangs. Only a write that
        # has already exceeded its bound (a store that ignored the bound) is abandoned at once.
        # The execution's outcome stands either way; a done run is not cancelled.
        task = self._store_task
        if task is None or self.state is not _COMPLETING:
            return False
        if self._store_cancel is None:
            self._store_cancel = reason
        if (
            not self._store_abandoned
            and task is not asyncio.current_task()
            and asyncio.get_running_loop().time() >= self._store_deadline
        ):
            self._store_abandoned = True
            task.cancel(self._store_cancel)
        return True

    def _deliver_cancel(self, reason: str) -> None:
        task = self.task
        if task is not None and self.state in _CANCELLABLE and self.worker.current is self:
            task.cancel(reason)

    # -- the run task -------------------------------------------------------------------

    async def main(self) -> None:
        """The run's body (in its worker's task, or its own task when cancelled while
        queued): never raises; always finalises exactly once."""
        interrupted = False
        try:
            outcome = await self._body()
        except asyncio.CancelledError:
            interrupted = True
            outcome = self._cancelled_outcome()
        except Exception as exc:  # any executor/gateway failure ends the run, reported
            log.exception("run %s failed inside the gateway", self.run_id)
            outcome = _Outcome(
                ok=False,
                error=_truncate(f"gateway_error: {type(exc).__name__}: {exc}"),
                code=ErrorCode.INTERNAL,
            )
        if self.cancel_reason is not None and outcome.code is not ErrorCode.CANCELLED:
            # Cancelled but the executor returned anyway (it swallowed the cancellation):
            # the cancel wins.
            outcome = self._cancelled_outcome()
        if interrupted or self.cancel_reason is not None:
            task = asyncio.current_task()
            if task is not None:
                # Every cancellation of this task is handled here (it becomes the
                # completion), so finalisation must not see a stale cancellation request.
                while task.cancelling():
                    task.uncancel()
        try:
            await self.finalize(outcome)
        finally:
            if self._session_lock is not None:  # finalisation itself was cut short
                self._session_lock.release()
                self._session_lock = None

    def _cancelled_outcome(self) -> _Outcome:
        reason = self.cancel_reason or "cancelled"
        return _Outcome(
            ok=False,
            error=reason,
            code=ErrorCode.CANCELLED,
            resume=self.last_resume or self.shared_resume or self.request.resume,
            synthetic=self.state is _QUEUED or reason == "gateway_shutdown",
            detail={"state": self.state.value},
        )

    async def _body(self) -> _Outcome:
        gw = self.gateway
        req = self.request
        if self.cancel_reason is not None:
            return self._cancelled_outcome()
        if req.resume is not None and not req.resume.is_native:
            return _Outcome(
                ok=False,
                error=(
                    f"unsupported_resume_engine: resume token engine {req.resume.engine!r} is "
                    f"not native; only {NATIVE_ENGINE!r} tokens can resume a run. Use "
                    "`lemon resume <id>` with a native id, or submit without a resume token."
                ),
                code=ErrorCode.RESUME_UNSUPPORTED,
                detail={"engine": req.resume.engine},
            )
        self.state = _WAITING_SLOT
        if gw.records_in_flight:
            # A local store: recorded from here on, so a crash of this process leaves the run
            # to be completed (once, as vanished) by the next gateway on the store.
            await self._record_in_flight(gw.store, complete_orphans=False)
        cfg = gw.config
        shared = gw.shared
        # A delegated child (lane ``subagent``) takes no slot: its parent holds one while it
        # waits for the child, so children sharing the slots would deadlock a tree deeper than
        # the slots and starve the person's runs. Children are bounded by the delegating
        # app's own cap ([subagents] max_concurrent) instead.
        delegated = req.command.lane == "subagent"
        if not delegated:
            await self._acquire_slot()
        if shared is not None and cfg.shared_slots and not delegated:
            try:
                slot = await shared.acquire_slot(
                    cfg.max_concurrent_runs, store_wait_s=cfg.engine_lock_timeout_s
                )
            except StoreError as exc:
                return _Outcome(
                    ok=False,
                    error=_truncate(
                        "store_failed: the shared store cannot be reached, so no shared run "
                        f"slot can be taken ({exc}); nothing was executed"
                    ),
                    code=ErrorCode.STORE_FAILED,
                )
            self._shared.append(slot)
        if cfg.require_engine_lock:
            self.state = _WAITING_LOCK
            resume = req.resume
            lock_key = ("session", req.session_key) if resume is None else ("resume", resume.value)
            engine_lock = gw.engine_lock
            try:
                self.lease = engine_lock.try_acquire(lock_key) or (
                    await engine_lock.acquire(lock_key, wait_s=cfg.engine_lock_timeout_s)
                )
            except LockTimeoutError:
                return _lock_timed_out(cfg)
            if shared is None and gw.session_locks is not None:
                # Another process on this home may run this session: one at a time, and
                # this run continues what the previous one wrote (its resume state).
                self._session_lock = await SessionFileLock.acquire(
                    gw.session_locks, req.session_key
                )
                if self._session_lock is not None:
                    await self._refresh_resume()
            if shared is not None:
                # Keyed by the session (whatever resume token the run carries), so runs of
                # one session exclude each other on every daemon.
                try:
                    # As long as a live run of the session on another daemon holds it: the
                    # session's messages wait for each other, as in one daemon's queue.
                    engine = await shared.acquire(
                        lease_name("engine", ("session", req.session_key)),
                        wait_s=None,
                        store_wait_s=cfg.engine_lock_timeout_s,
                    )
                except StoreError as exc:
                    return _Outcome(
                        ok=False,
                        error=_truncate(
                            "store_failed: the shared store cannot be reached, so the "
                            f"session's lease cannot be taken ({exc}); nothing was executed"
                        ),
                        code=ErrorCode.STORE_FAILED,
                    )
                if engine is None:
                    return _lock_timed_out(cfg)
                self.shared_engine = engine
                self._shared.insert(0, engine)
                await self._refresh_resume()
                await self._record_in_flight(shared.leases.fenced(engine), complete_orphans=True)
        if shared is not None and self._shared:
            self._keeper = gw.spawn(
                shared.keep(self._shared, self._on_lease_lost), name=f"lease:{self.run_id}"
            )
        self.state = _LAUNCHING
        self.started_ns = time.perf_counter_ns()
        model = req.command.model
        gw.publish(
            self,
            "run_started",
            RunStarted(
                run_id=req.run_id,
                session_key=req.session_key,
                engine=NATIVE_ENGINE,
                model=model,
                provider=model.split(":", 1)[0] if model and ":" in model else None,
            ),
        )
        prepared = await self._launch()
        if isinstance(prepared, _Outcome):
            return prepared
        self.state = _RUNNING
        self.prepared = prepared
        try:
            result = await prepared.execute(self)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the executor's failure becomes the run's completion
            return _Outcome(
                ok=False,
                error=_truncate(f"executor_exception: {type(exc).__name__}: {exc}"),
                code=ErrorCode.EXECUTOR_FAILED,
                resume=self.last_resume,
            )
        return self._from_result(result)

    async def _record_in_flight(self, fenced: Store, *, complete_orphans: bool) -> None:
        # Shared store, under the session's lease (``complete_orphans``): a run of the session
        # still recorded in flight belonged to a daemon that lost the lease without finalising
        # it (killed, or paused past the ttl). It gets its one completion here, typed
        # ``vanished``, and is never executed again. Then this run records itself until its
        # own finalisation (on a local store, from before it waits for a slot).
        gw = self.gateway
        req = self.request
        prefix = f"{req.session_key}{_SEP}"
        try:
            if complete_orphans:
                found = await bounded(
                    fenced.scan(IN_FLIGHT, prefix=prefix, limit=100), gw.config.store_timeout_s
                )
                for key, record in found:
                    if isinstance(record, dict) and record.get("run_id") != req.run_id:
                        await gw.complete_orphan(fenced, key, record, why=owner_lost(record))
            self._in_flight_key = f"{prefix}{req.run_id}"  # before the write: finalize clears
            await bounded(
                fenced.put(
                    IN_FLIGHT,
                    self._in_flight_key,
                    {
                        "run_id": req.run_id,
                        "session_key": req.session_key,
                        "owner": gw.owner,
                        "origin": req.command.origin,
                        "retry_of": req.command.retry_of,
                        "started_at_ms": now_ms(),
                    },
                ),
                gw.config.store_timeout_s,
            )
        except Exception as exc:  # the run goes on; only orphan recovery is weakened
            log.warning("run %s: recording the run in flight failed: %r", self.run_id, exc)

    async def _refresh_resume(self) -> None:
        # Under the session's shared lease: a run of this session on another daemon may have
        # written the native session id since the router looked it up. The router owns that
        # readback (seed 000): it is asked through the ResumeReadback it registered, decides
        # (an explicit resume token is left as asked) and reads; the run applies the answer.
        gw = self.gateway
        cmd = self.request.command
        try:
            latest = await bounded(gw.latest_resume(cmd), gw.config.store_timeout_s)
        except Exception as exc:  # unreadable: keep what the router looked up
            log.warning("run %s: reading the latest resume state failed: %r", self.run_id, exc)
            return
        if latest is not None and latest != cmd.resume:
            self.shared_resume = latest

    def _on_lease_lost(self, name: str) -> None:
        # Another daemon took the lease over (this one was paused or cut off past the ttl):
        # stop the run; its durable writes would be refused by the fencing token anyway.
        log.warning("run %s lost its shared lease %s; cancelling it", self.run_id, name)
        self.lease_lost = name
        self.gateway.cancel(self.run_id, "lease_lost")

    async def _release_shared(self) -> None:
        keeper, self._keeper = self._keeper, None
        if keeper is not None and not keeper.done():
            keeper.cancel()
        shared = self.gateway.shared
        if shared is not None and self._shared:
            await shared.release(self._shared, self.gateway.config.store_timeout_s)

    async def _acquire_slot(self) -> None:
        gw = self.gateway
        sched = gw.scheduler
        key = self.request.conversation_key
        gen = gw.next_generation()
        self.slot_generation = gen
        grant = sched.try_acquire(key, gen)
        if grant is None:
            ticket = sched.new_ticket()
            while True:
                self.slot_generation = gen
                future = sched.request(key, gen, ticket=ticket)
                try:
                    grant = await future
                except asyncio.CancelledError:
                    # Withdraw this generation; a grant that raced with the cancel is
                    # returned to the pool.
                    sched.cancel(key, gen)
                    raise
                if grant is not None:
                    break
                # Timed out: cancel the prior generation before asking again with a new
                # one, keeping the FIFO ticket.
                sched.cancel(key, gen)
                self.slot_retries += 1
                gen = gw.next_generation()
        self.grant = grant

    def _job(self) -> ExecutionJob:
        cmd = self.request.command
        return ExecutionJob(
            run_id=cmd.run_id,
            session_key=cmd.session_key,
            prompt=cmd.prompt,
            cwd=self.gateway.resolve_cwd(cmd.cwd),
            images=cmd.images,
            resume=self.shared_resume or cmd.resume,
            lane=cmd.lane,
            tool_policy=cmd.tool_policy,
            preapproved=cmd.preapproved,
            context=cmd.context,
            origin=cmd.origin,
            agent_id=cmd.agent_id,
            model=cmd.model,
            resume_mode="auto" if self.shared_resume is not None else cmd.resume_mode,
            retry_of=cmd.retry_of,
            meta=cmd.meta,
            mcp_servers=cmd.mcp_servers,
            editor=cmd.editor,
        )

    async def _launch(self) -> PreparedExecution | _Outcome:
        gw = self.gateway
        cfg = gw.config
        job = self._job()
        executor = gw.executor
        last: Exception | None = None
        backoff: Backoff | None = None  # made on the first failure (most launches succeed)
        for attempt in range(1, cfg.max_launch_attempts + 1):
            self.launch_attempts = attempt
            try:
                return await bounded(executor.prepare(job), cfg.prepare_timeout_s)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a failed launch attempt; retried, then reported
                last = exc
                self.gateway.note_launch_failure()
                if isinstance(exc, BoundExpiredError):
                    # A hung launch is not retried: each attempt would hang as long again.
                    log.warning("run %s launch attempt %d timed out", self.run_id, attempt)
                    return _Outcome(
                        ok=False,
                        error=f"prepare_timeout: executor.prepare did not return within "
                        f"{cfg.prepare_timeout_s} s (gateway.prepare_timeout_s)",
                        code=ErrorCode.TIMEOUT,
                        synthetic=True,
                        detail={"timeout_s": cfg.prepare_timeout_s, "attempt": attempt},
                    )
                log.warning("run %s launch attempt %d failed: %r", self.run_id, attempt, exc)
                if backoff is None:
                    # Doubling from launch_retry_backoff_s, capped and jittered by Backoff's
                    # defaults.
                    backoff = Backoff(
                        initial=cfg.launch_retry_backoff_s, max_attempts=cfg.max_launch_attempts
                    )
                if not backoff.exhausted(attempt) and cfg.launch_retry_backoff_s > 0:
                    await asyncio.sleep(backoff.delay(attempt))
        message = f"{type(last).__name__}: {last}" if last is not None else "unknown"
        return _Outcome(
            ok=False,
            error=_truncate(f"launch_failed: {cfg.max_launch_attempts} attempts, last: {message}"),
            code=ErrorCode.LAUNCH_FAILED,
            synthetic=True,
            detail={"attempts": cfg.max_launch_attempts, "last_error": _truncate(message)},
        )

    def _from_result(self, result: ExecutionResult) -> _Outcome:
        # The edge: an executor may build its result with the unchecked constructor, so
        # every field is checked here before it reaches a record that must encode.
        checked: object = result
        problem = None if isinstance(checked, ExecutionResult) else "not an ExecutionResult"
        if problem is None:
            problem = _result_problem(result)
        if problem is not None:
            return _Outcome(
                ok=False,
                error=_truncate(f"invalid_executor_result: {problem}: {_safe_repr(result)}"),
                code=ErrorCode.EXECUTOR_FAILED,
                resume=self.last_resume,
            )
        resume = result.resume if result.resume is not None else self.last_resume
        return _Outcome(
            ok=result.ok,
            answer=result.answer,
            error=None if result.error is None else _truncate(result.error),
            code=None if result.ok else (result.error_code or ErrorCode.EXECUTOR_FAILED),
            resume=resume,
            usage=_usage(result.usage),
        )

    # -- finalisation ---------------------------------------------------------------------

    async def finalize(self, outcome: _Outcome) -> None:
        """Exactly once: lock, resume state, history, slot, run_completed, awaiters, worker."""
        if self.state in (_COMPLETING, _DONE):
            return
        self.state = _COMPLETING
        self.prepared = None
        gw = self.gateway
        req = self.request
        if self.lease is not None:
            self.lease.release()
        binding = self._binding
        if binding is not None and not binding.done():
            # The session's mapping written at the start lands before the final resume state.
            await asyncio.wait({binding}, timeout=gw.config.store_timeout_s)
        answer = outcome.answer
        if answer == "" and self._parts:
            answer = "".join(self._parts)
        ok, error, code = outcome.ok, outcome.error, outcome.code
        meta: dict[str, Any] = {} if outcome.detail is None else dict(outcome.detail)
        resume = outcome.resume
        interrupted = False
        warning: str | None = None
        chat_state, run_store = gw.chat_state, gw.run_store
        if self.shared_engine is not None and gw.shared is not None:
            # Every durable write of the run checks its engine lease's fencing token.
            fenced = gw.shared.leases.fenced(self.shared_engine)
            if chat_state is not None:
                chat_state = ChatStateStore(fenced, ttl_ms=chat_state.ttl_ms)
            if run_store is not None:
                run_store = RunStore(fenced)
        if resume is not None and resume.is_native and chat_state is not None:
            # The gateway is the one writer of the native resume state. A failed write after
            # the execution is not an execution failure: the run keeps its outcome and answer
            # and says that the next message may not resume this session.
            # A cancel (cancel(run_id), a graceful stop) does not interrupt this write while it
            # is within its bound; the stop's forced cancel after its grace does.
            self._store_task = asyncio.current_task()
            timeout_s = gw.config.store_timeout_s
            self._store_deadline = asyncio.get_running_loop().time() + timeout_s
            try:
                await bounded(chat_state.put(req.session_key, resume), timeout_s)
            except asyncio.CancelledError:
                gw.note_store_failure()
                if self._store_abandoned:
                    # cancel(run_id) after the write had exceeded its bound: the write is
                    # abandoned, the execution's outcome stands.
                    task = asyncio.current_task()
                    if task is not None:
                        task.uncancel()
                    warning = (
                        "store_failed: the resume state was not saved (the write was "
                        f"abandoned by cancel: {self._store_cancel})"
                    )
                else:
                    interrupted = True
                    warning = (
                        "store_failed: the resume state was not saved (interrupted by shutdown)"
                    )
            except Exception as exc:
                gw.note_store_failure()
                log.error("run %s: storing resume state failed: %r", self.run_id, exc)
                why = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, StaleLeaseError) and gw.shared is not None:
                    gw.shared.fenced_refusals += 1
                    why = "fenced: this daemon lost the session's lease to another daemon"
                if isinstance(exc, BoundExpiredError):
                    why = f"no answer within {gw.config.store_timeout_s} s, gateway.store_timeout_s"
                warning = _truncate(
                    f"store_failed: the resume state was not saved ({why}); the next message "
                    "starts a new native session"
                )
                if self._store_cancel is not None and isinstance(exc, BoundExpiredError):
                    # Cancelled while the write hung: it was abandoned once past its bound.
                    warning = (
                        "store_failed: the resume state was not saved (the write was "
                        f"abandoned by cancel: {self._store_cancel})"
                    )
            finally:
                self._store_task = None
        completion = Completion(
            ok=ok,
            answer=answer,
            error=error,
            error_code=None if ok else (code or ErrorCode.EXECUTOR_FAILED),
            engine=NATIVE_ENGINE,
            resume=None if resume is None else resume.to_dict(),
            usage=outcome.usage,
            run_id=req.run_id,
            session_key=req.session_key,
            synthetic=outcome.synthetic,
            retry_of=req.command.retry_of,
            warning=warning,
            meta=meta,
        )
        duration_ms = (time.perf_counter_ns() - req.accepted_at_ns) // 1_000_000
        if run_store is not None and gw.config.record_run_history and not interrupted:
            # Before the completion is published: a client that hears the run end and then
            # lists its sessions or snapshots one sees this run.
            finished = now_ms()
            summary = RunSummary(
                run_id=req.run_id,
                session_key=req.session_key,
                ok=ok,
                error=error,
                answer=answer,
                resume=resume,
                started_at_ms=finished - duration_ms,
                finished_at_ms=finished,
                duration_ms=duration_ms,
                error_code=completion.error_code,
                meta=meta,
                usage=outcome.usage,
                retry_of=req.command.retry_of,
            )
            if self.grant is not None:
                # The execution is over: its slot goes to the next run now, not after the
                # history write (a batched write would otherwise hold every slot).
                gw.scheduler.release(self.grant)
                self.grant = None
            history = gw.history
            try:
                if history is not None and run_store is gw.run_store:
                    # The gateway's own store (not fenced): group commit with the runs that
                    # end in the same loop turns; this run still waits for its own write.
                    await history.write(summary)
                else:
                    await bounded(run_store.finalize(summary), gw.config.store_timeout_s)
            except asyncio.CancelledError:
                gw.note_store_failure()
            except Exception as exc:  # any store failure or the bound: counted, never fatal
                gw.note_store_failure()
                if isinstance(exc, StaleLeaseError) and gw.shared is not None:
                    gw.shared.fenced_refusals += 1
                log.error("run %s: recording run history failed: %r", self.run_id, exc)
        if self.shared_engine is not None and gw.shared is not None:
            try:
                await bounded(
                    gw.shared.leases.fenced(self.shared_engine).delete(
                        IN_FLIGHT, f"{req.session_key}{_SEP}{req.run_id}"
                    ),
                    gw.config.store_timeout_s,
                )
            except StaleLeaseError:
                # Another daemon took the session over. If it already completed this run as
                # vanished (its in-flight record is gone), that was its one completion.
                self.orphaned = await self._completed_elsewhere()
            except Exception as exc:
                log.warning("run %s: clearing the in-flight record failed: %r", self.run_id, exc)
        elif self._in_flight_key is not None:
            try:
                await bounded(
                    gw.store.delete(IN_FLIGHT, self._in_flight_key), gw.config.store_timeout_s
                )
            except Exception as exc:  # its history has it: a later sweep only forgets it
                gw.note_store_failure()
                log.warning("run %s: clearing the in-flight record failed: %r", self.run_id, exc)
        if self._shared:
            await self._release_shared()
        if self._session_lock is not None:
            # After the resume state and the history: the next run of the session reads them.
            self._session_lock.release()
            self._session_lock = None
        if self.grant is not None:
            gw.scheduler.release(self.grant)
        completion = self._publish_completion(completion, duration_ms)
        self.state = _DONE
        if not self.future.done():
            self.future.set_result(completion)
        gw.run_finished(self, completion)

    async def _completed_elsewhere(self) -> bool:
        gw = self.gateway
        req = self.request
        try:
            record = await bounded(
                gw.store.get(IN_FLIGHT, f"{req.session_key}{_SEP}{req.run_id}"),
                gw.config.store_timeout_s,
            )
        except Exception:
            return False
        return record is None

    def _publish_completion(self, completion: Completion, duration_ms: int) -> Completion:
        """Publish exactly one ``run_completed`` and return the completion published.

        A completion the bus refuses (a value in it cannot be encoded) is not dropped: it is
        published again without its usage and meta (the answer kept, with a warning), and if
        that is refused too, as a typed ``executor_failed`` failure. Every refusal is logged
        and counted in ``publish_errors``.
        """
        gw = self.gateway
        req = self.request
        if self.orphaned:
            # Its one run_completed came from the daemon that took the session over.
            return completion
        error = gw.try_publish(
            self, "run_completed", RunCompleted(completed=completion, duration_ms=duration_ms)
        )
        if error is None:
            return completion
        reason = _truncate(f"{type(error).__name__}: {error}")
        lean = Completion(
            ok=completion.ok,
            answer=completion.answer,
            error=completion.error,
            error_code=completion.error_code,
            engine=NATIVE_ENGINE,
            resume=completion.resume,
            run_id=req.run_id,
            session_key=req.session_key,
            synthetic=completion.synthetic,
            retry_of=req.command.retry_of,
            warning=_join(completion.warning, f"usage_dropped: not encodable ({reason})"),
        )
        failed = Completion(
            ok=False,
            error=_truncate(
                f"completion_unencodable: the run's result cannot be encoded ({reason})"
            ),
            error_code=ErrorCode.EXECUTOR_FAILED,
            engine=NATIVE_ENGINE,
            run_id=req.run_id,
            session_key=req.session_key,
            synthetic=True,
            retry_of=req.command.retry_of,
        )
        for candidate in (lean, failed):
            if isinstance(error, BusClosedError):
                break
            error = gw.try_publish(
                self, "run_completed", RunCompleted(completed=candidate, duration_ms=duration_ms)
            )
            if error is None:
                return candidate
        return failed

    # -- ExecutionSink ----------------------------------------------------------------------

    def started(self, *, resume: ResumeToken | None = None) -> None:
        given: object = resume
        if self.state is _RUNNING and isinstance(given, ResumeToken):
            self.last_resume = given
            gw = self.gateway
            mapped = self.shared_resume or self.request.resume
            if (
                given.is_native
                and given != mapped
                and self._binding is None
                and gw.chat_state is not None
            ):
                # A new native session (a cold session, or a fresh one after a lost
                # transcript): the session key points at it from now on, not only at the end.
                self._binding = gw.spawn(self._bind(given), name=f"bind:{self.run_id}")

    async def _bind(self, resume: ResumeToken) -> None:
        gw = self.gateway
        chat_state = gw.chat_state
        if chat_state is None:
            return
        if self.shared_engine is not None and gw.shared is not None:
            chat_state = ChatStateStore(
                gw.shared.leases.fenced(self.shared_engine), ttl_ms=chat_state.ttl_ms
            )
        try:
            await bounded(
                chat_state.put(self.request.session_key, resume), gw.config.store_timeout_s
            )
        except Exception as exc:  # the final write tries again; the run goes on
            gw.note_store_failure()
            log.warning("run %s: mapping the session to %s failed: %r", self.run_id, resume, exc)

    async def session_bound(self) -> None:
        """SessionBindingSink: once the session reported by :meth:`started` is mapped to the
        session key (at once when nothing had to be written). Cancelled with the run."""
        binding = self._binding
        if binding is not None and not binding.done():
            await asyncio.wait({binding})

    def delta(self, text: str) -> None:
        if self.state is not _RUNNING:
            return
        if not isinstance(text, str):
            raise TypeError(f"delta text must be a string, got {type(text).__name__}")
        self.seq += 1
        self._parts.append(text)
        self.gateway.publish(
            self,
            "delta",
            Delta(
                run_id=self.request.run_id,
                seq=self.seq,
                text=text,
                ts_ms=now_ms(),
                meta={"session_key": self.request.session_key},
            ),
        )

    def action(
        self,
        *,
        id: str,
        kind: str,
        title: str,
        detail: Mapping[str, Any] | None = None,
        phase: ActionPhase = "updated",
        ok: bool | None = None,
        message: str | None = None,
        level: str | None = None,
    ) -> None:
        if self.state is not _RUNNING:
            return
        actions = self._actions
        if actions is None:
            actions = self._actions = {}
        if id in actions or len(actions) < _MAX_ACTIONS_KEPT:
            actions[id] = RunActionView(
                id=id, kind=kind, title=title, phase=phase, ok=ok, message=message
            )
        self.gateway.publish(
            self,
            "engine_action",
            EngineAction(
                action=Action(id=id, kind=ActionKind(kind), title=title, detail=dict(detail or {})),
                engine=NATIVE_ENGINE,
                phase=EngineActionPhase(phase),
                ok=ok,
                message=message,
                level=level,
            ),
        )

    def view(self, max_text_chars: int) -> RunView:
        """This run's text so far and its actions (the owner's view, for snapshots)."""
        text = "".join(self._parts)
        truncated = len(text) > max_text_chars
        if truncated:
            text = text[len(text) - max_text_chars :]
        return RunView(
            run_id=self.run_id,
            state=self.state.value,
            text=text,
            text_seq=self.seq,
            text_truncated=truncated,
            actions=tuple(self._actions.values()) if self._actions else (),
        )

    def snapshot(self) -> dict[str, Any]:
        """Debug view of this run."""
        return {
            "run_id": self.run_id,
            "state": self.state.value,
            "conversation_key": self.request.conversation_key,
            "session_key": self.request.session_key,
            "slot_generation": self.slot_generation,
            "slot_retries": self.slot_retries,
            "launch_attempts": self.launch_attempts,
            "deltas": self.seq,
            "cancel_reason": self.cancel_reason,
        }


def _lock_timed_out(cfg: GatewayConfig) -> _Outcome:
    """The outcome of a run whose engine lock (or shared engine lease) was not granted in time
    (built only then: not on every run's hot path)."""
    return _Outcome(
        ok=False,
        error=f"lock_timeout: the engine lock was not free within {cfg.engine_lock_timeout_s} s",
        code=ErrorCode.TIMEOUT,
        detail={"timeout_s": cfg.engine_lock_timeout_s},
    )


def _result_problem(result: ExecutionResult) -> str | None:
    """What is wrong with an executor's result (built unchecked), or None."""
    ok: object = result.ok
    answer: object = result.answer
    error: object = result.error
    code: object = result.error_code
    resume: object = result.resume
    if not isinstance(ok, bool):
        return f"ok is a {type(ok).__name__}"
    if not isinstance(answer, str):
        return f"answer is a {type(answer).__name__}"
    if error is not None and not isinstance(error, str):
        return f"error is a {type(error).__name__}"
    if code is not None and not isinstance(code, ErrorCode):
        return f"error_code is a {type(code).__name__}"
    if resume is not None and not isinstance(resume, ResumeToken):
        return f"resume is a {type(resume).__name__}"
    return None


def _safe_repr(value: object) -> str:
    try:
        return repr(value)[:512]
    except Exception as exc:  # a hostile __repr__ must not lose the completion
        return f"<{type(value).__name__}: repr failed: {type(exc).__name__}>"


def _join(first: str | None, second: str) -> str:
    return second if not first else f"{first}; {second}"


def _usage(value: object) -> RunUsage | None:
    """The executor's usage as the typed record (a mapping is accepted from older executors);
    anything that does not fit is dropped with a log line, never a lost completion."""
    if value is None or isinstance(value, RunUsage):
        return value
    if isinstance(value, Mapping):
        try:
            return RunUsage.from_map(value)
        except Exception as exc:
            log.warning("dropping usage that does not fit RunUsage: %r", exc)
    return None
