"""Gateway: execution slots, the native run lifecycle, cancellation and resume state.

``async with Gateway(bus=bus, store=store) as gw`` starts it; the gateway owns every task
it creates (one per busy conversation) and on exit ends every accepted run with exactly one
``run_completed`` (queued and running runs complete with ``error="gateway_shutdown"``),
leaving no slot, lock, worker or task behind.

``submit_execution`` is the only submission boundary. It is loop-only and synchronous:
it validates, builds the private ExecutionRequest, hands it to the conversation's worker
and returns a :class:`RunHandle`. Acceptance is not completion: every later failure is
reported as the run's completion, never as an exception to the submitter.

A process that dies (``kill -9``, a crash) cannot complete its runs itself. With a shared store
the runs are recorded in flight under their session's lease and another daemon completes them
(``sweep_orphans``); with ``owners_dir`` (a local store, the default SQLite file) they are
recorded in flight from their start, and the next gateway to start or sweep on the store
completes each run of a dead owner once, as ``vanished`` (see :mod:`lemon_gateway._recovery`):
in the run history, on the bus, and through :meth:`Gateway.on_vanished` hooks (lemon_gateway's
boot forwards them to the runtime's ``VANISHED_RUN_LISTENER``: the webhook ingress turns the
key's receipt into ``outcome_unknown`` there). Never executed again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import enum
import itertools
import logging
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine, Hashable
from pathlib import Path
from typing import Any, Final, Self

from lemon_core.bus import Bus, run_topic, session_topic
from lemon_core.cwd import default_cwd, real_path, resolve_cwd
from lemon_core.errors import LemonCoreError
from lemon_core.events import Completion, ErrorCode, Payload, RunCompleted, now_ms
from lemon_core.execution import (
    ENGINE_RUNTIME,
    EXECUTOR_ENTRY_POINT_GROUP,
    NATIVE_ENGINE,
    RESUME_READBACK,
    ExecutionCommand,
    Executor,
    ResumeToken,
    RuntimeContext,
    RunView,
    SteerableExecution,
)
from lemon_core.leases import Leases
from lemon_core.store import ChatStateStore, RunStore, RunSummary, Store
from lemon_core.tasks import Supervisor
from lemon_gateway._executor import check_executor, validate_executor
from lemon_gateway._history import HistoryWriter
from lemon_gateway._lock import EngineLock, EngineLockStatistics
from lemon_gateway._recovery import OwnerLock, VanishedHook, VanishedRun, claim_dead_owner
from lemon_gateway._request import ExecutionRequest, RunHandle
from lemon_gateway._run import _COMPLETING, _DONE, _QUEUED, _RUNNING, Run, _Outcome
from lemon_gateway._scheduler import Scheduler, SchedulerStatistics
from lemon_gateway._section import GatewayConfig
from lemon_gateway._shared import IN_FLIGHT, SharedLeases, owner_lost
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
    GatewayNotRunningError,
    GatewayOverloadedError,
    InvalidSubmissionError,
    MissingConversationKeyError,
    WrongThreadError,
)
from lemon_infra import MemoryStore

__all__ = ["Gateway", "GatewayState"]

log = logging.getLogger("lemon_gateway")


class GatewayState(enum.Enum):
    """Lifecycle of a Gateway. It starts once and stops once."""

    NEW = "new"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


_GATEWAY_RUNNING: Final = GatewayState.RUNNING  # read per submission (a global is cheaper)


class Gateway:
    """The execution runtime. Implements the EngineRuntime capability and its optional
    SteerableRuntime (``steer``) and RunLiveness (``is_live``) extensions."""

    def __init__(
        self,
        *,
        bus: Bus,
        executor: Executor | None = None,
        store: Store | None = None,
        config: GatewayConfig | None = None,
        runtime: RuntimeContext | None = None,
        executor_group: str = EXECUTOR_ENTRY_POINT_GROUP,
        leases: Leases | None = None,
        owner: str | None = None,
        owners_dir: Path | None = None,
        session_locks_dir: Path | None = None,
    ) -> None:
        self.config = config or GatewayConfig()
        self.bus = bus
        self.runtime = runtime
        self._explicit_executor = executor
        self._executor_group = executor_group
        self._executor: Executor | None = None
        self._executor_name = "unresolved"
        self.store: Store = MemoryStore() if store is None else store
        self.chat_state: ChatStateStore | None = ChatStateStore(self.store)
        self.run_store: RunStore | None = RunStore(self.store)
        #: Run history by group commit (lemon_gateway._history); fenced runs write their own.
        self.history: HistoryWriter | None = HistoryWriter(
            self.run_store,
            timeout_s=self.config.store_timeout_s,
            spawn=lambda coro, name: self._spawn(coro, name=name),
        )
        self.scheduler = Scheduler(self.config.max_concurrent_runs)
        self.engine_lock = EngineLock()
        #: Who accepted this gateway's runs (the in-flight records name it).
        self.owner = owner or f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        #: Shared leases when several daemons share the store (None: one machine, the default).
        self.shared: SharedLeases | None = (
            None
            if leases is None
            else SharedLeases(leases, ttl_s=self.config.lease_ttl_s, owner=self.owner)
        )
        # A local store: runs are recorded in flight under this owner's lock (_recovery).
        self._owners_dir = owners_dir if leases is None else None
        #: A local store other processes of the home share: runs take their session's lock
        #: here (lemon_gateway._session_locks); shared leases do that job across daemons.
        self.session_locks: Path | None = session_locks_dir if leases is None else None
        self._owner_lock: OwnerLock | None = None
        self._vanished_hooks: list[VanishedHook] = []
        self._vanished_hook_errors = 0
        self.state = GatewayState.NEW
        self._stopping = False
        self._runs: dict[str, Run] = {}
        self._workers: dict[Hashable, ThreadWorker] = {}
        # Owns every run task (isolated crashes, logged and counted); stop() drains it.
        self._tasks = Supervisor("gateway", logger=log, on_crash=self._task_crashed)
        self._watchdog: asyncio.Task[None] | None = None
        self._orphan_watchdog: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._generations = itertools.count(1)
        self._default_cwd = real_path(os.getcwd())  # until start reads the configured one
        self._submitted = 0
        self._completed = 0
        self._failed = 0
        self._cancelled = 0
        self._synthetic = 0
        self._launch_failures = 0
        self._store_failures = 0
        self._publish_errors = 0
        self._task_crashes = 0
        self._swept = 0
        self._steers_accepted = 0
        self._steers_refused = 0
        self._orphans_completed = 0
        self._run_services = _RunServices(self)  # a RunOwner and a WorkerOwner

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def executor(self) -> Executor:
        if self._executor is None:
            raise GatewayNotRunningError("the gateway is not started; no executor resolved")
        return self._executor

    async def start(self) -> None:
        """Resolve and validate the executor, register EngineRuntime, complete a dead
        process's runs (local store)."""
        if self.state is not GatewayState.NEW:
            raise GatewayNotRunningError(f"a gateway starts once; this one is {self.state.value}")
        if self._explicit_executor is not None:
            status = check_executor(self._explicit_executor)
        else:
            status = validate_executor(self._executor_group)
        if status.executor is None:
            self.state = GatewayState.STOPPED
            raise ExecutorNotReadyError(status.reason or "unknown reason")
        self._executor = status.executor
        self._executor_name = type(status.executor).__name__
        self._default_cwd = default_cwd(self.config.default_cwd)
        if self._owners_dir is not None:
            try:
                self._owner_lock = await asyncio.to_thread(
                    OwnerLock.take, self._owners_dir, self.owner
                )
            except OSError as exc:
                log.error(
                    "cannot take the run-owner lock in %s (%r): runs are not recorded in "
                    "flight, so a crash of this process would leave them without a completion",
                    self._owners_dir,
                    exc,
                )
        if self.runtime is not None:
            self.runtime.capabilities.register(ENGINE_RUNTIME, self)
        self.state = GatewayState.RUNNING
        self._loop = asyncio.get_running_loop()
        self._watchdog = self._loop.create_task(self._slot_watchdog(), name="gateway:slot-watchdog")
        if self.shared is not None or self._owner_lock is not None:
            self._orphan_watchdog = self._loop.create_task(
                self._sweep_orphans_forever(), name="gateway:orphan-watchdog"
            )
        if self._owner_lock is not None:
            # At start-up, with the hooks given before start (boot forwards them to the
            # runtime's VANISHED_RUN_LISTENER): the runs a dead process left in flight get
            # their one completion before anything new is run.
            await self.sweep_orphans()

    async def stop(self) -> None:
        """Refuse new work, end every accepted run exactly once, await every task.

        Queued and running runs are cancelled (``gateway_shutdown``); a run already completing
        finishes its store writes within ``shutdown_grace_s``, and only the forced cancel after
        the grace interrupts them."""
        if self.state in (GatewayState.STOPPING, GatewayState.STOPPED):
            return
        self.state = GatewayState.STOPPING
        self._stopping = True
        try:
            for run in list(self._runs.values()):
                if run.state is _COMPLETING:
                    # It has its outcome: within the grace it finishes its resume-state and
                    # history writes; only the forced cancel after the grace abandons them.
                    continue
                self.cancel(run.run_id, "gateway_shutdown")
            await self._drain_tasks(self.config.shutdown_grace_s)
        finally:
            if self._watchdog is not None:
                self._watchdog.cancel()
                await asyncio.wait({self._watchdog})
            if self._orphan_watchdog is not None:
                self._orphan_watchdog.cancel()
                await asyncio.wait({self._orphan_watchdog})
            if self._owner_lock is not None:
                # Every run has completed (its record deleted): this owner's lock can go.
                await asyncio.to_thread(self._owner_lock.release)
            if self.runtime is not None:
                self.runtime.capabilities.unregister(ENGINE_RUNTIME, self)
            self.state = GatewayState.STOPPED

    async def _drain_tasks(self, grace: float) -> None:
        # ``grace`` bounds each wait; 0 waits one loop turn, never for an executor that
        # ignores cancellation.
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks.tasks(), timeout=grace)
            if pending:
                log.error("%d run tasks ignored shutdown for %ss; cancelling", len(pending), grace)
                for task in pending:
                    task.cancel("gateway_shutdown")
                _, pending = await asyncio.wait(pending, timeout=grace)
        # A run whose executor refuses to stop still gets its one completion.
        for run in list(self._runs.values()):
            if run.state is not _DONE:
                await run.finalize(
                    _Outcome(
                        ok=False,
                        error="gateway_shutdown: executor did not stop",
                        code=ErrorCode.CANCELLED,
                        synthetic=True,
                    )
                )
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks.tasks(), timeout=grace)
            if pending:
                # Their runs have completed; the tasks end when their executors return.
                log.error(
                    "%d run tasks ignore cancellation; stopped without them: %s",
                    len(pending),
                    sorted(t.get_name() for t in pending),
                )

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- EngineRuntime ----------------------------------------------------------------------

    def submit_execution(self, command: ExecutionCommand) -> RunHandle:
        """Accept ``command`` for execution and return its handle (loop-only).

        Raises InvalidSubmissionError (not an ExecutionCommand),
        MissingConversationKeyError, DuplicateRunError (run_id still live),
        GatewayOverloadedError (a pending bound is reached) or GatewayNotRunningError.
        Nothing raised means accepted: the run will complete exactly once.
        """
        given: object = command
        if not isinstance(given, ExecutionCommand):
            raise InvalidSubmissionError(
                f"submit_execution accepts only lemon_core.execution.ExecutionCommand, got "
                f"{type(command).__name__}; build an ExecutionCommand (the router does this)"
            )
        if self.state is not _GATEWAY_RUNNING:
            raise GatewayNotRunningError(
                f"the gateway is {self.state.value}; run {command.run_id} was not accepted"
            )
        key = command.conversation_key
        if key is None:
            raise MissingConversationKeyError(
                f"execution command {command.run_id} is missing router-owned conversation_key; "
                "the router must set it, e.g. ('session', session_key)"
            )
        run_id = command.run_id
        if run_id in self._runs:
            raise DuplicateRunError(
                f"run {run_id} is still queued or running; use a fresh run_id per command"
            )
        if len(self._runs) >= self.config.max_pending_runs:
            raise GatewayOverloadedError(
                f"{len(self._runs)} runs pending (gateway.max_pending_runs); retry later"
            )
        worker = self._workers.get(key)
        if worker is None:
            worker = ThreadWorker(self._run_services, key)
        elif worker.size >= self.config.max_pending_per_conversation:
            raise GatewayOverloadedError(
                f"conversation {key!r} has {worker.size} runs pending "
                "(gateway.max_pending_per_conversation); retry later"
            )
        run = Run(
            self._run_services, worker, ExecutionRequest(command, key, time.perf_counter_ns())
        )
        self._workers[key] = worker
        self._runs[run_id] = run
        self._submitted += 1
        worker.enqueue(run)
        return RunHandle(run_id, run.future)

    def cancel(self, run_id: str, reason: str = "user_requested") -> bool:
        """Cancel the queued or running run with exactly this id (loop-only).

        Total and idempotent on the gateway's loop. Returns whether a live run was found; the
        run then completes once, with ``ok=False`` and ``error=reason``. A run already
        completing keeps its outcome and answer, and its resume-state write is not cut short:
        a write within its bound (``store_timeout_s``) completes, one past it is abandoned
        (the completion then carries a ``store_failed`` warning).
        Called from another thread it raises :class:`WrongThreadError` and changes nothing:
        use :meth:`cancel_threadsafe` there.
        """
        loop = self._loop
        if loop is not None and _running_loop() is not loop:
            raise WrongThreadError(
                "Gateway.cancel is loop-only and was called from another thread; use "
                "Gateway.cancel_threadsafe(run_id, reason) there"
            )
        given: object = run_id
        run = self._runs.get(run_id) if isinstance(given, str) else None
        if run is None:
            return False
        if run.state is _QUEUED and run.task is None:
            asyncio.get_running_loop()  # loop-only: fail before changing anything
            if run.cancel_reason is None:
                run.cancel_reason = reason
                run.worker.remove_queued(run)
                run.task = self._spawn(run.main(), name=f"run:{run.run_id}")
            return True
        return run.cancel(reason)

    def cancel_threadsafe(
        self, run_id: str, reason: str = "user_requested"
    ) -> concurrent.futures.Future[bool]:
        """:meth:`cancel` from any thread: the answer arrives once the gateway's loop has run
        it (``False`` if the gateway never started or its loop is closed). Never raises."""
        answer: concurrent.futures.Future[bool] = concurrent.futures.Future()
        loop = self._loop
        if loop is None:
            answer.set_result(False)
            return answer

        def on_loop() -> None:
            if answer.set_running_or_notify_cancel():
                try:
                    answer.set_result(self.cancel(run_id, reason))
                except Exception as exc:  # handed to the caller's thread, never lost
                    answer.set_exception(exc)

        if _running_loop() is loop:
            on_loop()
            return answer
        try:
            loop.call_soon_threadsafe(on_loop)
        except RuntimeError:  # the loop is closed: nothing is live any more
            if not answer.done():
                answer.set_result(False)
        return answer

    def available(self) -> bool:
        """True while submissions are accepted."""
        return self.state is GatewayState.RUNNING

    def steer(self, run_id: str, text: str) -> bool:
        """Offer ``text`` to the running run with exactly this id (loop-only; SteerableRuntime).

        True only when that run is executing and its prepared execution implements
        :class:`~lemon_core.execution.SteerableExecution` and accepted the text. False, with
        nothing kept, for an unknown, queued, launching, completing or finished run, an
        execution that cannot be steered or refuses, and an execution whose ``steer`` raised
        (logged). Never raises.
        """
        given: object = run_id
        given_text: object = text
        run = self._runs.get(run_id) if isinstance(given, str) else None
        prepared: object = None
        if run is not None and run.state is _RUNNING and run.cancel_reason is None:
            prepared = run.prepared
        if not isinstance(prepared, SteerableExecution) or not isinstance(given_text, str):
            self._steers_refused += 1
            return False
        try:
            accepted = prepared.steer(text) is True
        except Exception as exc:  # an executor bug must not reach the router
            log.error("run %s: steer raised %r; counted as refused", run_id, exc)
            accepted = False
        if accepted:
            self._steers_accepted += 1
        else:
            self._steers_refused += 1
        return accepted

    def is_live(self, run_id: str) -> bool:
        """True from acceptance until the run's ``run_completed`` is published (RunLiveness)."""
        given: object = run_id
        return isinstance(given, str) and given in self._runs

    def run_view(self, run_id: str, *, max_text_chars: int = 262_144) -> RunView | None:
        """The live run's text and actions (RunIntrospection); ``None`` once completed."""
        run = self._runs.get(run_id)
        return None if run is None else run.view(max(0, max_text_chars))

    def completion_future(self, run_id: str) -> asyncio.Future[Completion] | None:
        """The live run's completion future (RunIntrospection); ``None`` once completed."""
        run = self._runs.get(run_id)
        return None if run is None else run.future

    def handle(self, run_id: str) -> RunHandle | None:
        """The handle of a live (queued or running) run."""
        run = self._runs.get(run_id)
        return None if run is None else RunHandle(run_id, run.future)

    def on_vanished(self, hook: VanishedHook) -> Callable[[], None]:
        """Await ``hook(run)`` for each run of a dead process this gateway completes as
        ``vanished`` (before its record is forgotten: a hook that raises leaves the run to the
        next sweep, which calls the hooks again, so a hook must be idempotent). Returns the
        function that removes the hook."""
        self._vanished_hooks.append(hook)

        def remove() -> None:
            if hook in self._vanished_hooks:
                self._vanished_hooks.remove(hook)

        return remove

    @property
    def records_in_flight(self) -> bool:
        """Whether runs are recorded in flight on this gateway's local store (``owners_dir``
        given and its lock taken), so a crash leaves them to be completed as vanished."""
        return self._owner_lock is not None

    # -- internals used through _RunServices (by Run and ThreadWorker) ----------------

    def _spawn(self, coro: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
        return self._tasks.spawn(coro, name=name)

    def _task_crashed(self, name: str, error: BaseException) -> None:
        # The supervisor has logged it with its traceback; its siblings go on.
        self._task_crashes += 1

    async def _slot_watchdog(self) -> None:
        """Expire slot waiters older than ``slot_request_timeout_s`` (they re-request), and
        sweep expired store entries every ``store_sweep_interval_s``."""
        timeout = self.config.slot_request_timeout_s
        sweep_every = self.config.store_sweep_interval_s
        period = max(min(timeout / 4, sweep_every or timeout), 0.001)
        next_sweep = time.monotonic() + sweep_every
        while True:
            await asyncio.sleep(period)
            self.scheduler.expire_waiters(timeout)
            if sweep_every and time.monotonic() >= next_sweep:
                next_sweep = time.monotonic() + sweep_every
                await self.sweep_store()

    async def _sweep_orphans_forever(self) -> None:
        while True:
            await asyncio.sleep(self.config.lease_ttl_s)
            await self.sweep_orphans()

    async def sweep_orphans(self) -> int:
        """Complete runs left in flight by processes that died with them (every
        ``lease_ttl_s``, and at start-up on a local store; tests call it). Shared store: the
        runs of daemons that lost their session's lease, for sessions no run of which took the
        lease since; a session whose lease a live owner holds is left alone. Local store: the
        runs of owners whose lock is free (see :mod:`lemon_gateway._recovery`); a live owner's
        are left alone. Failures are logged, never raised; returns how many were completed."""
        shared = self.shared
        if shared is None:
            return await self._sweep_local()
        before = self._orphans_completed
        try:
            async with asyncio.timeout(self.config.store_timeout_s):
                rows = await self.store.scan(IN_FLIGHT, limit=1000)
            sessions = {
                str(record["session_key"])
                for _, record in rows
                if isinstance(record, dict) and record.get("session_key")
            }
            for session_key in sorted(sessions):
                name = f"engine:session:{session_key}"
                lease = await shared.leases.acquire(name, shared.owner, ttl_ms=shared.ttl_ms)
                if lease is None:
                    continue  # held by a live owner (perhaps a run of ours)
                try:
                    fenced = shared.leases.fenced(lease)
                    async with asyncio.timeout(self.config.store_timeout_s):
                        found = await fenced.scan(IN_FLIGHT, prefix=f"{session_key}\x1f")
                        for key, record in found:
                            if isinstance(record, dict):
                                await self._complete_orphan(
                                    fenced, key, record, why=owner_lost(record)
                                )
                finally:
                    await shared.release([lease], self.config.store_timeout_s)
        except Exception as exc:  # a failing store must not stop the watchdog
            self._store_failures += 1
            log.error("orphan sweep failed: %r", exc)
        return self._orphans_completed - before

    async def _sweep_local(self) -> int:
        directory = self._owners_dir
        if directory is None or self._owner_lock is None:
            return 0
        before = self._orphans_completed
        try:
            async with asyncio.timeout(self.config.store_timeout_s):
                rows = await self.store.scan(IN_FLIGHT, limit=1000)
            owners = sorted({_owner_of(record) for _, record in rows} - {self.owner})
            for owner in owners:
                claim = await asyncio.to_thread(claim_dead_owner, directory, owner)
                if claim is None:
                    continue  # alive: it completes its runs itself
                try:
                    await self._complete_owner(owner)
                finally:
                    await asyncio.to_thread(claim.release)
        except Exception as exc:  # a failing store or hook must not stop the watchdog
            self._store_failures += 1
            log.error("in-flight recovery failed (retried by the next sweep): %r", exc)
        return self._orphans_completed - before

    async def _complete_owner(self, owner: str) -> None:
        # Under the dead owner's lock: read its records again (another process may have
        # completed them before we took the lock) and complete each one.
        store = self.store
        while True:
            async with asyncio.timeout(self.config.store_timeout_s):
                rows = await store.scan(IN_FLIGHT, limit=1000)
            mine = [(key, record) for key, record in rows if _owner_of(record) == owner]
            if not mine:
                return
            for key, record in mine:
                if not isinstance(record, dict):
                    await store.delete(IN_FLIGHT, key)
                    continue
                why = (
                    f"vanished: {owner or 'an earlier process'} stopped (killed or crashed) "
                    "with this run in flight; it was not executed again"
                )
                await self._complete_orphan(store, key, record, why=why)

    async def sweep_store(self) -> int:
        """Remove expired store entries now; failures are counted, never raised."""
        try:
            async with asyncio.timeout(self.config.store_timeout_s):
                removed = await self.store.sweep_expired()
        except Exception as exc:  # a failing or hung store must not stop the watchdog
            self._store_failures += 1
            log.error("store sweep failed: %r", exc)
            return 0
        self._swept += removed
        return removed

    def _next_generation(self) -> int:
        return next(self._generations)

    def _resolve_cwd(self, cwd: str | None) -> str:
        # lemon_core's one rule (real paths); unchecked here: the executor reports a missing
        # directory as the run's failure.
        if cwd is None or not cwd.strip():
            return self._default_cwd  # already a real path (resolved once, at construction)
        return resolve_cwd(cwd, workspace=self._default_cwd, check=False)

    async def _complete_orphan(
        self, fenced: Store, key: str, record: dict[str, Any], *, why: str
    ) -> None:
        """Give a run of a process that died with it in flight its one completion: typed
        ``vanished`` (``why`` the sentence), the vanished hooks awaited, recorded in the run
        history and published on its run topic and its session topic (its router is gone);
        then forget it. A run whose history already holds it (its process died after
        recording its end) is only forgotten. With a shared store every write is fenced.
        Raises on a store or hook failure, the record then left for the next sweep."""
        run_id = str(record.get("run_id", ""))
        session_key = str(record.get("session_key", ""))
        timeout = self.config.store_timeout_s
        if not run_id or not session_key:
            await fenced.delete(IN_FLIGHT, key)
            return
        owner = record.get("owner", "?")
        if self.config.record_run_history:
            async with asyncio.timeout(timeout):
                recorded = await RunStore(fenced).get(run_id)
            if recorded is not None:
                async with asyncio.timeout(timeout):
                    await fenced.delete(IN_FLIGHT, key)
                log.info("run %s had completed before its process stopped", run_id)
                return
        origin, retry_of = record.get("origin"), record.get("retry_of")
        vanished = VanishedRun(
            run_id=run_id,
            session_key=session_key,
            origin=origin if isinstance(origin, str) else None,
            retry_of=retry_of if isinstance(retry_of, str) else None,
        )
        for hook in list(self._vanished_hooks):
            try:
                await hook(vanished)
            except Exception:
                self._vanished_hook_errors += 1
                raise
        resume = None
        with contextlib.suppress(Exception):  # the session's mapping, for the session index
            async with asyncio.timeout(timeout):
                resume = await ChatStateStore(fenced).resume_token(session_key)
        completion = Completion(
            ok=False,
            error=why,
            error_code=ErrorCode.VANISHED,
            engine=NATIVE_ENGINE,
            run_id=run_id,
            session_key=session_key,
            synthetic=True,
        )
        finished = now_ms()
        started = int(record.get("started_at_ms", finished) or finished)
        if self.config.record_run_history:
            async with asyncio.timeout(timeout):
                await RunStore(fenced).finalize(
                    RunSummary(
                        run_id=run_id,
                        session_key=session_key,
                        ok=False,
                        error=completion.error,
                        resume=resume,
                        started_at_ms=started,
                        finished_at_ms=finished,
                        duration_ms=max(0, finished - started),
                        error_code=ErrorCode.VANISHED,
                        retry_of=vanished.retry_of,
                    )
                )
        async with asyncio.timeout(timeout):
            await fenced.delete(IN_FLIGHT, key)
        payload = RunCompleted(completed=completion, duration_ms=max(0, finished - started))
        meta = {"run_id": run_id, "session_key": session_key, "synthetic": True}
        for topic in (run_topic(run_id), session_topic(session_key)):
            try:
                self.bus.broadcast_event(topic, "run_completed", payload, meta)
            except LemonCoreError as exc:
                self._publish_errors += 1
                log.error("orphan run %s: publishing its completion failed: %r", run_id, exc)
        self._orphans_completed += 1
        log.warning("completed orphan run %s of session %s (owner %s)", run_id, session_key, owner)

    def _run_finished(self, run: Run, completion: Completion) -> None:
        if self._runs.get(run.run_id) is run:
            del self._runs[run.run_id]
        self._completed += 1
        if not completion.ok:
            self._failed += 1
        if run.cancel_reason is not None:
            self._cancelled += 1
        if completion.synthetic:
            self._synthetic += 1
        run.worker.run_finished(run)

    def _worker_idle(self, worker: ThreadWorker) -> None:
        if self._workers.get(worker.key) is worker:
            del self._workers[worker.key]

    # -- operations ---------------------------------------------------------------------------

    def statistics(self) -> GatewayStatistics:
        """Counters and bounds: runs, workers, slots, locks, tasks."""
        slots = self.scheduler.statistics()
        locks = self.engine_lock.statistics()
        return GatewayStatistics(
            state=self.state.value,
            executor=self._executor_name,
            runs=GatewayRuns(
                live=len(self._runs),
                max_pending_runs=self.config.max_pending_runs,
                by_state=dict(Counter(r.state.value for r in self._runs.values())),
                submitted=self._submitted,
                completed=self._completed,
                failed=self._failed,
                cancelled=self._cancelled,
                synthetic=self._synthetic,
            ),
            steers=GatewaySteers(accepted=self._steers_accepted, refused=self._steers_refused),
            workers=len(self._workers),
            max_pending_per_conversation=self.config.max_pending_per_conversation,
            tasks=len(self._tasks),
            slots=GatewaySlots(
                max=slots.max_concurrent_runs,
                in_flight=slots.in_flight,
                waiting=slots.waiting,
                generations_tracked=slots.generations_tracked,
                stale_releases=slots.stale_releases,
            ),
            locks=GatewayLocks(held=locks.held, waiting=locks.waiting),
            shared=None
            if self.shared is None
            else {**self.shared.statistics(), "orphans_completed": self._orphans_completed},
            in_flight=GatewayInFlight(
                recorded_locally=self._owner_lock is not None,
                orphans_completed=self._orphans_completed,
                vanished_hooks=len(self._vanished_hooks),
                vanished_hook_errors=self._vanished_hook_errors,
            ),
            launch_failures=self._launch_failures,
            store_failures=self._store_failures,
            store_swept=self._swept,
            publish_errors=self._publish_errors,
            task_crashes=self._task_crashes,
        )

    def debug_snapshot(self) -> dict[str, Any]:
        """Everything an operator needs for stuck execution: in-flight slots and their
        generations, lock owners and waiters, live workers and runs (plain data: the typed
        snapshots as dictionaries)."""
        return {
            "statistics": dataclasses.asdict(self.statistics()),
            "scheduler": _plain(self.scheduler.statistics()),
            "engine_lock": _plain(self.engine_lock.statistics()),
            "workers": [w.snapshot() for w in self._workers.values()],
            "runs": [r.snapshot() for r in self._runs.values()],
            "tasks": sorted(t.get_name() for t in self._tasks.tasks()),
        }


class _RunServices:
    """The :class:`~lemon_gateway._run.RunOwner` port the gateway gives its runs and the
    :class:`~lemon_gateway._worker.WorkerOwner` port it gives its workers (they see this, not
    the gateway)."""

    __slots__ = (
        "_gateway",
        "chat_state",
        "config",
        "engine_lock",
        "history",
        "owner",
        "run_store",
        "scheduler",
        "session_locks",
        "shared",
        "store",
    )

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        # Plain attributes, not properties: read several times per run, and none of them
        # changes after the gateway is built.
        self.config: GatewayConfig = gateway.config
        self.store: Store = gateway.store
        self.chat_state: ChatStateStore | None = gateway.chat_state
        self.run_store: RunStore | None = gateway.run_store
        self.scheduler: Scheduler = gateway.scheduler
        self.engine_lock: EngineLock = gateway.engine_lock
        self.history: HistoryWriter | None = gateway.history
        self.shared: SharedLeases | None = gateway.shared
        self.owner: str = gateway.owner
        self.session_locks: Path | None = gateway.session_locks

    @property
    def executor(self) -> Executor:
        return self._gateway.executor

    @property
    def records_in_flight(self) -> bool:
        return self._gateway.records_in_flight

    def cancel(self, run_id: str, reason: str) -> bool:
        return self._gateway.cancel(run_id, reason)

    def next_generation(self) -> int:
        return next(self._gateway._generations)

    def resolve_cwd(self, cwd: str | None) -> str:
        return self._gateway._resolve_cwd(cwd)

    def spawn(self, coro: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
        return self._gateway._spawn(coro, name=name)

    def publish(self, run: Run, type_: str, payload: Payload) -> None:
        # try_publish, inlined: this runs for every event of every run.
        req = run.request
        try:
            self._gateway.bus.broadcast_event(run.topic, type_, payload, req.event_meta)
        except LemonCoreError as exc:
            self._gateway._publish_errors += 1
            log.error("run %s: publishing %s failed: %r", req.run_id, type_, exc)

    def try_publish(self, run: Run, type_: str, payload: Payload) -> LemonCoreError | None:
        req = run.request
        try:
            self._gateway.bus.broadcast_event(run.topic, type_, payload, req.event_meta)
        except LemonCoreError as exc:
            self._gateway._publish_errors += 1
            log.error("run %s: publishing %s failed: %r", req.run_id, type_, exc)
            return exc
        return None

    async def complete_orphan(
        self, fenced: Store, key: str, record: dict[str, Any], *, why: str
    ) -> None:
        await self._gateway._complete_orphan(fenced, key, record, why=why)

    async def latest_resume(self, command: ExecutionCommand) -> ResumeToken | None:
        runtime = self._gateway.runtime
        readback = None if runtime is None else runtime.capabilities.get(RESUME_READBACK)
        if readback is None:
            return None
        return await readback.latest_resume(command)

    def note_store_failure(self) -> None:
        self._gateway._store_failures += 1

    def note_launch_failure(self) -> None:
        self._gateway._launch_failures += 1

    def run_finished(self, run: Run, completion: Completion) -> None:
        self._gateway._run_finished(run, completion)

    # -- WorkerOwner ----------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._gateway._stopping

    def worker_idle(self, worker: ThreadWorker) -> None:
        self._gateway._worker_idle(worker)


def _plain(snapshot: SchedulerStatistics | EngineLockStatistics) -> dict[str, Any]:
    """A snapshot as the dictionary it has always been shown as (its rows as lists)."""
    return {
        name: list(value) if isinstance(value, tuple) else value
        for name, value in dataclasses.asdict(snapshot).items()
    }


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, or ``None`` in a thread that runs none."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _owner_of(record: object) -> str:
    """The owner an in-flight record names (``""`` for one that names none)."""
    if isinstance(record, dict):
        owner = record.get("owner")
        if isinstance(owner, str):
            return owner
    return ""
