"""The Router: RunRequest intake, per-conversation queues, and one RunProcess per active run.

Intake (:meth:`Router.submit`) validates the request, resolves resume (chat-state readback),
picks the conversation key, and feeds the conversation's :class:`ConversationQueue`; the
queue's effects are carried out here (start a RunProcess, offer a steer to the live run,
cancel, report outcomes). Every submission gets a :class:`Receipt`; every submission that
never becomes its own run ends with a terminal ``run_phase_changed`` and a ``queue_outcome``
event on ``session:<key>``.

Conversation choice: while a session has anything active or queued, new submissions of that
session join the same conversation (so a resume token written by a finishing run cannot split
one session's messages over two queues); otherwise the conversation is the resumed native
session when one resolves, else the session key.

Chat-state readback under a shared lease: with several daemons on one store, the engine asks
the router again for an automatic resume's token once it holds the session's shared lease
(:meth:`Router.latest_resume`, the :data:`~lemon_core.execution.RESUME_READBACK` capability): a
run of the session on another daemon may have written a newer native session id since the
router looked it up. The router decides and reads; the engine only applies the answer.

Lifecycle: ``async with Router(...) as router``; entering registers the router as the
RouterBridge and ResumeReadback capabilities of the runtime context, leaving unregisters them,
cancels every run (each still ends with one completion) and reports every queued submission as
cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, Literal, Self

from lemon_core.bus import Bus, run_topic, session_topic
from lemon_core.clock import Clock, SystemClock
from lemon_core.events import QueueOutcome, QueueOutcomeKind, RunPhase, RunPhaseChanged
from lemon_core.execution import (
    ENGINE_RUNTIME,
    RESUME_READBACK,
    ROUTER_BRIDGE,
    EngineRuntime,
    ExecutionCommand,
    Receipt,
    ResumeReadback,
    ResumeToken,
    RouterBridge,
    RunRequest,
    RuntimeContext,
    SteerableRuntime,
)
from lemon_core.leases import Leases
from lemon_core.sessions import check_session_key
from lemon_core.store import Store, StoreError
from lemon_core.tasks import Supervisor
from lemon_router._config import RouterConfig
from lemon_router._inbox import SharedSessions
from lemon_router._keys import ConversationKey
from lemon_router._queue import (
    CancelActive,
    ConversationQueue,
    Effect,
    Requeued,
    SendSteer,
    Settled,
    StartRun,
    Submission,
)
from lemon_router._resume import (
    ChatStateReader,
    auto_resume_disabled,
    check_explicit,
    resolve_resume,
)
from lemon_router._run_process import ChatStateAccess, Prepared, RunProcess
from lemon_router.errors import InvalidRunRequestError, RouterNotRunningError

log = logging.getLogger("lemon_router")

_MAX_REVISIONS = 65_536  # sessions whose revision is remembered


class RouterState(enum.StrEnum):
    NEW = "new"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


@dataclass(frozen=True, kw_only=True, slots=True)
class RouterStatistics:
    """A snapshot of the router: conversations, runs, queue totals and outcome counters."""

    state: str
    conversations: int
    max_conversations: int
    active_runs: int
    queued: int
    pending_steers: int
    submitted: int
    started: int
    merged: int
    steered: int
    rejected: int
    cancelled: int
    synthetic_completions: int
    zero_answer_retries: int
    task_crashes: int = 0


class Router:
    """See the module docstring."""

    def __init__(
        self,
        *,
        bus: Bus,
        context: RuntimeContext,
        chat_state: ChatStateAccess | ChatStateReader | None = None,
        config: RouterConfig | None = None,
        clock: Clock | None = None,
        leases: Leases | None = None,
        store: Store | None = None,
    ) -> None:
        self.bus = bus
        self.context = context
        self.chat_state = chat_state
        self.config = config or RouterConfig()
        self.clock: Clock = clock or SystemClock()
        self._state = RouterState.NEW
        self._services = _RunServices(self)
        self._queues: dict[ConversationKey, ConversationQueue] = {}
        self._conv_sessions: dict[ConversationKey, set[str]] = {}
        self._session_conv: dict[str, ConversationKey] = {}
        # waiting / in-flight / active run ids -> (conversation, what intake resolved)
        self._where: dict[str, tuple[ConversationKey, Prepared]] = {}
        self._runs: dict[str, RunProcess] = {}  # original run id -> process
        self._engine_ids: dict[str, str] = {}  # current engine run id -> original run id
        self._phases: dict[str, RunPhase] = {}
        self._intake_locks: dict[str, asyncio.Lock] = {}
        self._intake_waiters: dict[str, int] = {}
        self._retired: dict[str, int] = {"submitted": 0, "started": 0, "merged": 0}
        self._retired.update(steered=0, rejected=0, cancelled=0)
        self._synthetic = 0
        self._retries = 0
        # Every task of the router (run processes, steers) is the supervisor's: a crash of one
        # is logged and counted, and never cancels another session's runs.
        self._tasks = Supervisor("lemon_router", logger=log)
        # per session: the change counter at its last phase / outcome (bounded, LRU)
        self._revisions: OrderedDict[str, int] = OrderedDict()
        self._session_listeners: list[Callable[[str], None]] = []
        # callers waiting for a submission's queue outcome (SessionPort.steer), by run id
        self._outcome_waiters: dict[str, list[asyncio.Future[QueueOutcome]]] = {}
        self._changes = 0
        # steer calls still waiting for the runtime's answer, per target (original) run id
        self._steering: dict[str, set[asyncio.Task[None]]] = {}
        # Sessions shared with other daemons (a shared store's leases): one owner per session.
        self.shared: SharedSessions | None = None
        self._stop_unrecord: list[str] = []
        if leases is not None and store is not None:
            self.shared = SharedSessions(
                bus=bus,
                store=store,
                leases=leases,
                tasks=self._tasks,
                admit=self._submit_here,
                known=lambda run_id: run_id in self._where or run_id in self._engine_ids,
                busy=lambda session_key: session_key in self._session_conv,
                noted=self.note_session,
                ttl_ms=self.config.lease_ttl_ms,
                handoff_timeout_ms=self.config.handoff_timeout_ms,
                sweep=self.config.inbox_sweep,
            )

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._state is not RouterState.NEW:
            raise RouterNotRunningError(f"a Router starts once; this one is {self._state}")
        self._state = RouterState.RUNNING
        bridge: RouterBridge = self
        self.context.capabilities.register(ROUTER_BRIDGE, bridge)
        readback: ResumeReadback = self
        self.context.capabilities.register(RESUME_READBACK, readback)
        if self.shared is not None:
            self.shared.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._state = RouterState.STOPPING
        self.context.capabilities.unregister(ROUTER_BRIDGE, self)
        self.context.capabilities.unregister(RESUME_READBACK, self)
        for key, queue in list(self._queues.items()):
            for session_key in list(self._conv_sessions.get(key, ())):
                self._apply(key, queue.abort_session(session_key, reason="router stopped"))
        if self.shared is not None and self._stop_unrecord:
            # Handed-off messages reported cancelled leave the shared inbox too (no other
            # daemon runs them later); a store that does not answer leaves them recorded.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await self.shared.unrecord(self._stop_unrecord)
        try:
            # Every run ends with one completion: cancelled processes publish theirs.
            await self._tasks.close(grace_s=0)
            if self.shared is not None:
                await self.shared.close()
        finally:
            self._state = RouterState.STOPPED

    def running(self) -> bool:
        """True while submissions are accepted."""
        return self._state is RouterState.RUNNING

    @property
    def state(self) -> RouterState:
        return self._state

    # -- intake ------------------------------------------------------------------------------

    async def submit(self, request: RunRequest) -> Receipt:
        """Admit ``request``. Bad input raises a :class:`RouterUsageError`; else a receipt.

        With sessions shared across daemons, a message for a session another daemon owns is
        handed to that owner and admitted by its queue (the receipt is the owner's)."""
        if self.shared is None:
            return await self._submit_here(request)
        if not self.running():
            raise RouterNotRunningError(f"the router is {self._state}; start it with 'async with'")
        if not isinstance(request, RunRequest):
            raise InvalidRunRequestError("request", f"expected a RunRequest, got {request!r}")
        check_session_key(request.session_key)
        if request.run_id is not None and (
            request.run_id in self._where or request.run_id in self._engine_ids
        ):
            raise InvalidRunRequestError(
                "run_id", f"{request.run_id!r} is already queued or running"
            )
        check_explicit(request.resume)
        _model_and_images(request)
        return await self.shared.submit(request)

    async def _submit_here(self, request: RunRequest) -> Receipt:
        """Admit ``request`` into this router's queue of its session."""
        if not self.running():
            raise RouterNotRunningError(f"the router is {self._state}; start it with 'async with'")
        if not isinstance(request, RunRequest):
            raise InvalidRunRequestError("request", f"expected a RunRequest, got {request!r}")
        session_key = request.session_key
        parsed = check_session_key(session_key)
        agent_id = request.agent_id
        if parsed is not None and parsed.agent_id != agent_id:
            if agent_id != "default":
                raise InvalidRunRequestError(
                    "agent_id",
                    f"{agent_id!r} does not match the session key's agent {parsed.agent_id!r}",
                )
            agent_id = parsed.agent_id
        run_id = request.run_id or f"run_{uuid.uuid4()}"
        if run_id in self._where or run_id in self._engine_ids:
            raise InvalidRunRequestError("run_id", f"{run_id!r} is already queued or running")
        explicit = check_explicit(request.resume)
        model, images = _model_and_images(request)
        async with self._intake_lock(session_key):
            if not self.running():
                raise RouterNotRunningError(f"the router is {self._state}")
            decision = await resolve_resume(
                session_key=session_key,
                explicit=explicit,
                meta=request.meta,
                chat_state=_FailSoftReader(self.chat_state),
            )
            key = self._session_conv.get(session_key) or decision.conversation_key(session_key)
            queue = self._queues.get(key)
            now = self.clock.monotonic_ms()
            if queue is None:
                if len(self._queues) >= self.config.max_conversations:
                    self._retired["submitted"] += 1
                    self._retired["rejected"] += 1
                    return Receipt(
                        run_id=run_id,
                        session_key=session_key,
                        requested_mode=request.queue_mode,
                        actual_mode=request.queue_mode,
                        status="rejected",
                        at_ms=now,
                        conversation_key=str(key),
                        reason=(
                            f"router_full: {self.config.max_conversations} conversations are "
                            "busy; try again when one finishes"
                        ),
                    )
                queue = ConversationQueue(
                    str(key),
                    max_pending=self.config.max_pending_per_conversation,
                    followup_window_ms=self.config.followup_window_ms,
                    max_merged_parts=self.config.max_merged_parts,
                    max_merged_chars=self.config.max_merged_chars,
                )
                self._queues[key] = queue
            prepared = Prepared(
                origin=request.origin,
                agent_id=agent_id,
                session_key=session_key,
                conversation_key=str(key),
                conversation=key,
                explicit_resume=explicit,
                resume_at_submit=decision.token,
                cwd=request.cwd,
                model=model,
                images=images,
                tool_policy=request.tool_policy,
                preapproved=request.preapproved,
                meta=dict(request.meta),
                parent_run_id=request.parent_run_id,
                root_run_id=request.root_run_id,
                depth=request.depth,
                mcp_servers=request.mcp_servers,
                editor=request.editor,
            )
            submission = Submission(
                run_id=run_id,
                session_key=session_key,
                prompt=request.prompt,
                queue_mode=request.queue_mode,
                origin=request.origin,
                auto_kind=_auto_kind(request.meta),
                context=prepared,
            )
            receipt, effects = queue.submit(submission, now)
            receipt = replace(receipt, conversation_key=str(key))
            if receipt.status == "rejected":
                if queue.idle:
                    self._drop_queue(key)
                return receipt
            self._where[run_id] = (key, prepared)
            self._conv_sessions.setdefault(key, set()).add(session_key)
            self._session_conv[session_key] = key
            self._phase(run_id, prepared, RunPhase.ACCEPTED)
            if receipt.status in ("queued", "fallback_queued"):
                self._phase(run_id, prepared, RunPhase.QUEUED_IN_SESSION)
            self._apply(key, effects)
            return receipt

    @contextlib.asynccontextmanager
    async def _intake_lock(self, session_key: str) -> AsyncIterator[None]:
        # Serialises intake per session (the store read awaits) so a session's messages are
        # admitted in the order they arrived; the lock table only holds sessions mid-intake.
        lock = self._intake_locks.setdefault(session_key, asyncio.Lock())
        self._intake_waiters[session_key] = self._intake_waiters.get(session_key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            left = self._intake_waiters[session_key] - 1
            if left:
                self._intake_waiters[session_key] = left
            else:
                del self._intake_waiters[session_key]
                del self._intake_locks[session_key]

    # -- cancellation ------------------------------------------------------------------------

    def abort_run(self, run_id: str, *, reason: str = "user_requested") -> bool:
        """Cancel ``run_id`` if active, drop it if waiting; False when unknown."""
        original = self._engine_ids.get(run_id, run_id)
        tracked = self._where.get(original)
        if tracked is None:
            return False
        key = tracked[0]
        self._apply(key, self._queues[key].abort_run(original, reason=reason))
        return True

    def abort_session(self, session_key: str, *, reason: str = "user_requested") -> int:
        """Drop everything ``session_key`` has waiting and cancel its active run.

        Returns how many submissions (queued, in flight or active) were affected.
        """
        return len(self.cancel_session(session_key, reason=reason))

    def cancel_session(
        self, session_key: str, *, reason: str = "user_requested"
    ) -> tuple[str, ...]:
        """:meth:`abort_session`, returning the run ids it reached (active, queued and
        pending steers), in the order the queue reported them."""
        key = self._session_conv.get(session_key)
        if key is None:
            return ()
        effects = self._queues[key].abort_session(session_key, reason=reason)
        ids = tuple(
            dict.fromkeys(e.run_id for e in effects if isinstance(e, CancelActive | Settled))
        )
        self._apply(key, effects)
        return ids

    # -- read side ---------------------------------------------------------------------------

    def active_run(self, session_key: str) -> str | None:
        """The engine run id of the session's active run, or None when the session is idle."""
        key = self._session_conv.get(session_key)
        if key is None:
            return None
        active = self._queues[key].active
        if active is None or active.session_key != session_key:
            return None
        process = self._runs.get(active.run_id)
        return process.current_run_id if process else active.run_id

    def active_attempt(self, session_key: str) -> tuple[str, str, int, RunPhase | None] | None:
        """``(run id as submitted, current attempt id, attempt number, phase)`` of the
        session's active run, or None when the session is idle."""
        key = self._session_conv.get(session_key)
        if key is None:
            return None
        active = self._queues[key].active
        if active is None or active.session_key != session_key:
            return None
        process = self._runs.get(active.run_id)
        attempt = process.current_run_id if process else active.run_id
        number = 2 if process is not None and process.retried else 1
        return active.run_id, attempt, number, self._phases.get(attempt)

    def active_prepared(self, session_key: str) -> Prepared | None:
        """What intake resolved for the session's active run (cwd, model, policy...)."""
        active = self.active_attempt(session_key)
        tracked = None if active is None else self._where.get(active[0])
        return None if tracked is None else tracked[1]

    def revision(self, session_key: str) -> int:
        """A number that grows with every phase and queue outcome the router publishes for
        the session (0 when nothing happened in this process, or long ago)."""
        return self._revisions.get(session_key, 0)

    def is_busy(self, session_key: str) -> bool:
        return self.active_run(session_key) is not None

    def known_sessions(self) -> tuple[str, ...]:
        """The sessions this router has seen change (most recent last; bounded)."""
        return tuple(self._revisions)

    def on_new_session(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call ``listener(session_key)`` whenever a session changes (a run accepted, a phase,
        a queue outcome), before the change is published, so a listener that follows each
        session it hears of sees everything of it; returns the function that removes it."""
        self._session_listeners.append(listener)

        def remove() -> None:
            with contextlib.suppress(ValueError):
                self._session_listeners.remove(listener)

        return remove

    def note_session(self, session_key: str) -> None:
        """Tell the session listeners about ``session_key`` without counting a change: with
        sessions shared across daemons its runs may be another daemon's, whose events arrive
        through the bus (a client reading the session, a message handed to its owner, an
        owner announcing it took the session)."""
        for listener in tuple(self._session_listeners):
            listener(session_key)

    def forget_session(self, session_key: str) -> None:
        """The session's stored state was reset or deleted (by the session port): count the
        change in its revision, so a snapshot composed across it says ``retry``."""
        self._touch(session_key)

    def queued(self, session_key: str) -> tuple[str, ...]:
        """Run ids waiting behind the session's active run, in start order."""
        key = self._session_conv.get(session_key)
        if key is None:
            return ()
        return self._queues[key].queued_run_ids()

    def statistics(self) -> RouterStatistics:
        totals = dict(self._retired)
        queued = pending = 0
        for queue in self._queues.values():
            s = queue.statistics()
            queued += s.queued
            pending += s.pending_steers
            for name in totals:
                totals[name] += getattr(s, name)
        return RouterStatistics(
            state=self._state.value,
            conversations=len(self._queues),
            max_conversations=self.config.max_conversations,
            active_runs=len(self._runs),
            queued=queued,
            pending_steers=pending,
            synthetic_completions=self._synthetic,
            zero_answer_retries=self._retries,
            task_crashes=self._tasks.statistics().crashed,
            **totals,
        )

    # -- effects -----------------------------------------------------------------------------

    def _apply(self, key: ConversationKey, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, StartRun):
                self._start(key, effect.submission)
            elif isinstance(effect, SendSteer):
                task = self._spawn(self._steer(key, effect), f"steer:{effect.submission.run_id}")
                in_flight = self._steering.setdefault(effect.active_run_id, set())
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
            elif isinstance(effect, CancelActive):
                process = self._runs.get(effect.run_id)
                if process is not None:
                    process.cancel(effect.reason)
            elif isinstance(effect, Settled):
                self._settled(effect)
            elif isinstance(effect, Requeued):
                tracked = self._where.get(effect.run_id)
                prepared = tracked[1] if tracked else None
                self._phase(effect.run_id, prepared, RunPhase.QUEUED_IN_SESSION)
                self._outcome(
                    QueueOutcome(
                        run_id=effect.run_id,
                        session_key=effect.session_key,
                        outcome=QueueOutcomeKind.FALLBACK_QUEUED,
                        mode=effect.mode,
                        position=effect.position,
                        reason=effect.reason,
                    )
                )

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        return self._tasks.spawn(coro, name=name)

    def _start(self, key: ConversationKey, sub: Submission) -> None:
        prepared = sub.context
        assert isinstance(prepared, Prepared)
        process = RunProcess(
            self._services,
            run_id=sub.run_id,
            prompt=sub.prompt,
            prepared=prepared,
            merged_run_ids=sub.merged_run_ids,
        )
        self._runs[sub.run_id] = process
        self._engine_ids[sub.run_id] = sub.run_id
        handed = [sub.run_id, *sub.merged_run_ids]
        if self.shared is not None and self.shared.recorded(handed):
            self._spawn(self._run_unrecorded(handed, process), f"run:{sub.run_id}")
        else:
            self._spawn(process.run(), f"run:{sub.run_id}")

    async def _run_unrecorded(self, handed: list[str], process: RunProcess) -> None:
        # A handed-off message leaves the shared inbox just before it is executed: from here
        # on the gateway's in-flight record accounts for it (never run twice).
        assert self.shared is not None
        await self.shared.unrecord(handed)
        await process.run()

    async def _steer(self, key: ConversationKey, effect: SendSteer) -> None:
        process = self._runs.get(effect.active_run_id)
        engine: object = self._engine()
        accepted = False
        if (
            process is not None
            and process.submitted
            and process.cancel_reason is None
            and isinstance(engine, SteerableRuntime)
        ):
            # No runtime redirects yet: a redirect is offered as a steer (its documented
            # fallback), and a refused steer falls back to a follow-up.
            target = process.current_run_id
            try:
                accepted = engine.steer(target, effect.submission.prompt) is True
            except Exception:
                log.exception("steer of %s into %s failed", effect.submission.run_id, target)
                accepted = False
        queue = self._queues.get(key)
        if queue is not None:
            now = self.clock.monotonic_ms()
            self._apply(
                key, queue.steer_result(effect.submission.run_id, accepted=accepted, now_ms=now)
            )
            self._maybe_drop(key)

    def _settled(self, effect: Settled) -> None:
        tracked = self._where.pop(effect.run_id, None)
        prepared = tracked[1] if tracked else None
        phase = RunPhase.COMPLETED if effect.outcome == "steered" else RunPhase.ABORTED
        self._phase(effect.run_id, prepared, phase)
        self._outcome(
            QueueOutcome(
                run_id=effect.run_id,
                session_key=effect.session_key,
                outcome=QueueOutcomeKind(effect.outcome),
                into_run_id=effect.into_run_id,
                reason=effect.reason,
            )
        )
        if self.shared is not None:
            if effect.outcome == "merged" and effect.into_run_id is not None:
                self.shared.merged(effect.run_id, effect.into_run_id)
            elif self.shared.recorded([effect.run_id]):
                if self._state is RouterState.RUNNING:
                    self._spawn(self.shared.unrecord([effect.run_id]), f"unrecord:{effect.run_id}")
                else:  # stopping: deleted before the router's tasks end (see __aexit__)
                    self._stop_unrecord.append(effect.run_id)
        if tracked is not None:
            self._maybe_drop(tracked[0])

    def _touch(self, session_key: str) -> None:
        self._changes += 1
        revisions = self._revisions
        if self._session_listeners:
            # Before the change is published: a listener subscribing now sees all of it.
            for listener in tuple(self._session_listeners):
                listener(session_key)
        revisions[session_key] = self._changes
        revisions.move_to_end(session_key)
        if len(revisions) > _MAX_REVISIONS:
            revisions.popitem(last=False)

    def expect_outcome(self, run_id: str) -> asyncio.Future[QueueOutcome]:
        """A future of the next queue outcome of ``run_id`` (steered, fallback queued,
        merged, cancelled, rejected), registered before the run is submitted so nothing is
        missed. Cancel or await it; a done or cancelled future is dropped at once."""
        future: asyncio.Future[QueueOutcome] = asyncio.get_running_loop().create_future()
        self._outcome_waiters.setdefault(run_id, []).append(future)

        def forget(done: asyncio.Future[QueueOutcome]) -> None:
            waiters = self._outcome_waiters.get(run_id)
            if waiters is not None and done in waiters:
                waiters.remove(done)
                if not waiters:
                    del self._outcome_waiters[run_id]

        future.add_done_callback(forget)
        return future

    def _outcome(self, payload: QueueOutcome) -> None:
        session_key = payload.session_key
        assert session_key is not None
        self._touch(session_key)
        for waiter in list(self._outcome_waiters.get(payload.run_id, ())):
            if not waiter.done():
                waiter.set_result(payload)
        if not self.bus.running():  # the same guard as phase publication
            return
        self.bus.broadcast_event(
            session_topic(session_key),
            "queue_outcome",
            payload,
            {"run_id": payload.run_id, "session_key": session_key},
        )

    def _phase(
        self,
        run_id: str,
        prepared: Prepared | None,
        phase: RunPhase,
        *,
        retry_of: str | None = None,
    ) -> None:
        previous = self._phases.get(run_id)
        if previous is not None and previous.terminal:
            return
        if phase.terminal:
            self._phases.pop(run_id, None)
        else:
            self._phases[run_id] = phase
        session_key = prepared.session_key if prepared else None
        if session_key is not None:
            self._touch(session_key)
        payload = RunPhaseChanged.build(
            run_id=run_id,
            session_key=session_key,
            conversation_key=prepared.conversation_key if prepared else None,
            phase=phase,
            previous_phase=previous,
            source="router",
        )
        meta = {"run_id": run_id, "session_key": session_key}
        if retry_of is not None:
            meta["retry_of"] = retry_of  # the run as submitted, of which this is a retry
        if not self.bus.running():
            return
        event = self.bus.broadcast_event(run_topic(run_id), "run_phase_changed", payload, meta)
        if session_key is not None:
            self.bus.broadcast(session_topic(session_key), event)

    # -- callbacks from RunProcess -----------------------------------------------------------

    def _run_finished(self, process: RunProcess) -> None:
        self._runs.pop(process.run_id, None)
        self._engine_ids.pop(process.current_run_id, None)
        self._engine_ids.pop(process.run_id, None)
        in_flight = self._steering.pop(process.run_id, set())
        if in_flight and self._state is RouterState.RUNNING:
            # A steer the runtime is still answering must not also fall back (the text would
            # run twice): hear its answer first, then let the queue move on.
            self._spawn(self._end_after_steers(process.run_id, in_flight), f"end:{process.run_id}")
            return
        self._end_run(process.run_id)

    async def _end_after_steers(self, run_id: str, in_flight: set[asyncio.Task[None]]) -> None:
        await asyncio.gather(*in_flight, return_exceptions=True)
        self._end_run(run_id)

    def _end_run(self, run_id: str) -> None:
        tracked = self._where.pop(run_id, None)
        if tracked is None:
            return
        key = tracked[0]
        queue = self._queues.get(key)
        if queue is None:
            return
        if self._state is RouterState.RUNNING:
            self._apply(key, queue.run_ended(run_id, self.clock.monotonic_ms()))
        else:
            queue.run_ended(run_id, self.clock.monotonic_ms())
        self._maybe_drop(key)

    def _retry_started(self, process: RunProcess, previous_run_id: str) -> None:
        self._retries += 1
        self._engine_ids.pop(previous_run_id, None)
        self._engine_ids[process.current_run_id] = process.run_id
        self._phase(
            process.current_run_id, process.prepared, RunPhase.ACCEPTED, retry_of=process.run_id
        )

    def _note_synthetic(self) -> None:
        self._synthetic += 1

    def _engine(self) -> EngineRuntime | None:
        return self.context.capabilities.get(ENGINE_RUNTIME)

    async def _read_resume(self, session_key: str) -> ResumeToken | None:
        return await _FailSoftReader(self.chat_state).resume_token(session_key)

    async def latest_resume(self, command: ExecutionCommand) -> ResumeToken | None:
        """ResumeReadback: the session's native token in chat state now, for a command whose
        resume is automatic (looked up: ``resume_mode="auto"``, or no token and auto-resume
        not disabled) when it differs from the command's; ``None`` otherwise (an explicit
        token is left as asked; an unreadable chat state keeps what was looked up)."""
        automatic = command.resume_mode == "auto" or (
            command.resume is None and not auto_resume_disabled(command.meta)
        )
        if not automatic or self.chat_state is None:
            return None
        try:
            latest = await self.chat_state.resume_token(command.session_key)
        except Exception as exc:  # unreadable: keep what was looked up
            log.warning("run %s: reading the latest resume state failed: %r", command.run_id, exc)
            return None
        if latest is not None and latest != command.resume:
            return latest
        return None

    def _maybe_drop(self, key: ConversationKey) -> None:
        queue = self._queues.get(key)
        if queue is not None and queue.idle:
            self._drop_queue(key)

    def _drop_queue(self, key: ConversationKey) -> None:
        queue = self._queues.pop(key)
        stats = queue.statistics()
        for name in self._retired:
            self._retired[name] += getattr(stats, name)
        for session_key in self._conv_sessions.pop(key, set()):
            if self._session_conv.get(session_key) == key:
                del self._session_conv[session_key]
                if self.shared is not None and self._state is RouterState.RUNNING:
                    self.shared.session_idle(session_key)


class _FailSoftReader:
    """Chat-state reads that degrade to "no resume" when the store is unavailable."""

    def __init__(self, inner: ChatStateReader | None) -> None:
        self._inner = inner

    async def resume_token(self, session_key: str) -> ResumeToken | None:
        if self._inner is None:
            return None
        try:
            return await self._inner.resume_token(session_key)
        except StoreError as exc:
            log.warning("chat state of %s unreadable, starting fresh: %s", session_key, exc)
            return None


def _auto_kind(meta: Mapping[str, Any]) -> Literal["task", "delegated", "goal"] | None:
    value = meta.get("auto_followup")
    if value in ("task", "delegated", "goal"):
        return value  # type: ignore[no-any-return]  # narrowed by the membership test
    return None


def _model_and_images(
    request: RunRequest,
) -> tuple[str | None, tuple[Mapping[str, Any], ...]]:
    """The request's typed ``model`` and ``images`` (lemon_core validated their shape)."""
    for key in ("model", "images"):
        if key in request.meta:
            raise InvalidRunRequestError(
                f"meta.{key}",
                f"pass it as RunRequest.{key}, not in meta (meta is opaque context)",
            )
    return request.model, request.images


class _RunServices:
    """The :class:`~lemon_router._run_process.RunOwner` port the router gives its run
    processes (they see this, not the router)."""

    __slots__ = ("_router",)

    def __init__(self, router: Router) -> None:
        self._router = router

    @property
    def bus(self) -> Bus:
        return self._router.bus

    @property
    def config(self) -> RouterConfig:
        return self._router.config

    @property
    def clock(self) -> Clock:
        return self._router.clock

    def engine(self) -> EngineRuntime | None:
        return self._router._engine()

    def phase(self, run_id: str, prepared: Prepared | None, phase: RunPhase) -> None:
        self._router._phase(run_id, prepared, phase)

    async def read_resume(self, session_key: str) -> ResumeToken | None:
        return await self._router._read_resume(session_key)

    def retry_started(self, process: RunProcess, previous_run_id: str) -> None:
        self._router._retry_started(process, previous_run_id)

    def note_synthetic(self) -> None:
        self._router._note_synthetic()

    def run_finished(self, process: RunProcess) -> None:
        self._router._run_finished(process)
