"""RunProcess: one task per active run, from hand-off to the engine runtime to completion.

It submits the ExecutionCommand to the EngineRuntime capability (retrying with backoff while
the runtime is unavailable), forwards every event of ``run:<id>`` unchanged to
``session:<key>``, publishes ``run_phase_changed``, retries once a failed run that produced no
answer when its typed error code says a retry may help (same prompt, ``retry_of`` set), and
guarantees that the run ends with exactly one ``run_completed`` on the session topic (a retried
attempt's completion is not forwarded): a synthetic one (``Completion.synthetic``) when the
runtime never bound the run, lost it, failed it without a completion, or did not confirm a
cancellation in time.

After an overflow of the run's own delivery the router tells the session
(``run_events_overflow``), takes a fresh handle and goes on forwarding; a completion that could
not ride in the terminal notice is re-read from its owner (the runtime's completion future),
never invented. The native resume state is written by its owner, the gateway, not here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from lemon_core.bus import Delivery, Overflow, TerminalNotice, run_topic, session_topic
from lemon_core.clock import SystemClock
from lemon_core.cwd import resolve_cwd
from lemon_core.errors import DeliveryClosedError
from lemon_core.events import (
    Completion,
    ErrorCode,
    Event,
    RunCompleted,
    RunEventsOverflow,
    RunFailed,
    RunPhase,
    now_ms,
)
from lemon_core.events import RunPhaseChanged as _RunPhaseChanged
from lemon_core.execution import (
    ConversationKey,
    EditorHandle,
    EngineRuntime,
    ExecutionCommand,
    ExecutionContext,
    ExecutionContractError,
    McpServerSpec,
    Principal,
    ResumeToken,
    RunIntrospection,
    RunLiveness,
    ToolPolicy,
)
from lemon_router._resume import ChatStateReader, auto_resume_disabled

if TYPE_CHECKING:
    from lemon_core.bus import Bus
    from lemon_core.clock import Clock
    from lemon_router._config import RouterConfig

log = logging.getLogger("lemon_router")


@dataclass(frozen=True, kw_only=True, slots=True)
class Prepared:
    """What intake resolved for one submission (everything but the final prompt and run id)."""

    origin: str
    agent_id: str
    session_key: str
    conversation_key: str
    conversation: ConversationKey
    explicit_resume: ResumeToken | None
    resume_at_submit: ResumeToken | None
    cwd: str | None
    model: str | None
    images: tuple[Mapping[str, Any], ...]
    tool_policy: ToolPolicy | None
    preapproved: frozenset[str] = frozenset()
    meta: Mapping[str, Any] = field(default_factory=dict)
    parent_run_id: str | None = None
    """Lineage of a delegated run (see :class:`~lemon_core.execution.RunRequest`)."""
    root_run_id: str | None = None
    depth: int = 0
    mcp_servers: tuple[McpServerSpec, ...] = ()
    """The session's own MCP servers, from the request (handed to the executor as is)."""
    editor: EditorHandle | None = None
    """The session's editor file system and terminal, from the request."""


@dataclass(slots=True)
class _Outcome:
    event: Event
    completion: Completion
    synthetic: bool


class RunOwner(Protocol):
    """What a run process may use of its owner (the router): a narrow port, so the process
    never reaches into the router's private state."""

    @property
    def bus(self) -> Bus: ...

    @property
    def config(self) -> RouterConfig: ...

    @property
    def clock(self) -> Clock: ...

    def engine(self) -> EngineRuntime | None:
        """The engine runtime registered now (None while there is none)."""
        ...

    def phase(self, run_id: str, prepared: Prepared | None, phase: RunPhase) -> None:
        """Publish the run's phase (the router drops repeats after a terminal phase)."""

    async def read_resume(self, session_key: str) -> ResumeToken | None:
        """The session's resume token as chat state has it now (None when unreadable)."""
        ...

    def retry_started(self, process: RunProcess, previous_run_id: str) -> None:
        """``process`` starts a retry attempt (its ``current_run_id`` is the new attempt)."""

    def note_synthetic(self) -> None:
        """Count a synthetic completion."""

    def run_finished(self, process: RunProcess) -> None:
        """``process`` ended (exactly once): the queue may move on."""


class RunProcess:
    """Drives one run (see the module docstring). Owned and awaited by the Router."""

    def __init__(
        self,
        owner: RunOwner,
        *,
        run_id: str,
        prompt: str,
        prepared: Prepared,
        merged_run_ids: tuple[str, ...] = (),
    ) -> None:
        self._owner = owner
        self.run_id = run_id
        self.current_run_id = run_id
        self.prompt = prompt
        self.prepared = prepared
        self.merged_run_ids = merged_run_ids
        self.submitted = False
        self.cancel_reason: str | None = None
        self._wake = asyncio.Event()
        # The wait ``_next`` is parked in (None while it is not waiting): a cancel expires it.
        self._parked: asyncio.Timeout | None = None
        # Items ``_next`` took from the queue in a row without waiting or yielding.
        self._streak = 0
        self.retried = False
        self._delivery: Delivery | None = None
        # A tool, command or file change was started: a retry could repeat its effects.
        self._acted = False
        self._completion: asyncio.Future[Completion] | None = None

    @property
    def session_key(self) -> str:
        return self.prepared.session_key

    # -- control ---------------------------------------------------------------------------

    def cancel(self, reason: str) -> None:
        """Ask the run to stop; it still ends with exactly one completion."""
        if self.cancel_reason is not None:
            return
        self.cancel_reason = reason
        if self.submitted:
            engine = self._owner.engine()
            if engine is not None:
                engine.cancel(self.current_run_id, reason)
        self._wake.set()
        self._expire(self._parked)

    # -- the run ---------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            await self._run()
        except asyncio.CancelledError:
            # Router shutdown: make sure the runtime lets go and subscribers hear the end.
            engine = self._owner.engine()
            if self.submitted and engine is not None:
                engine.cancel(self.current_run_id, "shutdown")
            with contextlib.suppress(Exception):
                self._finish_synthetic(
                    self.current_run_id, "aborted: the router stopped", ErrorCode.CANCELLED
                )
                self._owner.phase(self.current_run_id, self.prepared, RunPhase.ABORTED)
            raise
        except Exception as exc:
            log.exception("run %s failed inside the router", self.current_run_id)
            with contextlib.suppress(Exception):
                bus = self._owner.bus
                payload = RunFailed.new(
                    run_id=self.current_run_id,
                    session_key=self.session_key,
                    reason=f"router error: {type(exc).__name__}",
                )
                meta = {"run_id": self.current_run_id, "session_key": self.session_key}
                bus.broadcast_event(run_topic(self.current_run_id), "run_failed", payload, meta)
                bus.broadcast_event(session_topic(self.session_key), "run_failed", payload, meta)
                self._finish_synthetic(
                    self.current_run_id, f"router error: {exc}", ErrorCode.INTERNAL
                )
        finally:
            self._owner.run_finished(self)

    async def _run(self) -> None:
        while True:
            run_id = self.current_run_id
            outcome = await self._attempt(run_id, self.prompt)
            completion = outcome.completion
            code = completion.error_code
            if (
                not outcome.synthetic
                and not completion.ok
                and not (completion.answer or "").strip()
                and (code is None or (code.retryable and code not in _NOT_RETRIED_HERE))
                and not self._acted
                and self.cancel_reason is None
                and not self.retried
                and self._owner.config.retry_zero_answer
            ):
                # The attempt's completion stays on the run topic; the session hears the
                # retry's one completion (``retry_of`` names this run).
                self.retried = True
                self._owner.phase(run_id, self.prepared, RunPhase.FAILED)
                self.current_run_id = f"run_{uuid.uuid4()}"
                self._owner.retry_started(self, run_id)
                continue
            if not outcome.synthetic:
                self._owner.bus.broadcast(session_topic(self.session_key), outcome.event)
            if completion.ok:
                phase = RunPhase.COMPLETED
            elif self.cancel_reason is not None:
                phase = RunPhase.ABORTED
            else:
                phase = RunPhase.FAILED
            self._owner.phase(run_id, self.prepared, phase)
            return

    async def _attempt(self, run_id: str, prompt: str) -> _Outcome:
        config = self._owner.config
        bus = self._owner.bus
        # Only this attempt reads the handle and its ``finally`` closes it: reading it in the
        # run's own task (``_next``) must not make that task its owner.
        delivery = self._delivery = Delivery(
            max_entries=config.run_event_buffer, claim_on_get=False
        )
        subscription = bus.subscribe(run_topic(run_id), delivery=delivery)
        try:
            self._owner.phase(run_id, self.prepared, RunPhase.WAITING_FOR_SLOT)
            command = await self._command(run_id, prompt)
            refused = await self._submit(command)
            if refused is not None:
                reason, code = refused
                return self._finish_synthetic(run_id, reason, code)
            self._owner.phase(run_id, self.prepared, RunPhase.DISPATCHED_TO_GATEWAY)
            return await self._pump(run_id, delivery)
        finally:
            subscription.cancel()
            self._delivery.close()
            delivery.close()

    async def _command(self, run_id: str, prompt: str) -> ExecutionCommand:
        p = self.prepared
        resume = p.explicit_resume
        automatic = False
        if resume is None and not auto_resume_disabled(p.meta):
            # Chat-state readback at start time: an earlier run of this session may have
            # written the native session id while this message waited.
            resume = await self._owner.read_resume(p.session_key) or p.resume_at_submit
            automatic = resume is not None
        return ExecutionCommand(
            run_id=run_id,
            session_key=p.session_key,
            prompt=prompt,
            conversation_key=p.conversation,
            images=p.images,
            cwd=p.cwd,
            resume=resume,
            tool_policy=p.tool_policy,
            preapproved=p.preapproved,
            mcp_servers=p.mcp_servers,
            editor=p.editor,
            origin=p.origin,
            agent_id=p.agent_id,
            model=p.model,
            # The token was looked up, not asked for: a missing or corrupt transcript then
            # starts a fresh session with a notice instead of failing forever.
            resume_mode="auto" if automatic else "explicit",
            retry_of=None if run_id == self.run_id else self.run_id,
            merged_run_ids=self.merged_run_ids,
            lane="subagent" if p.parent_run_id is not None else "main",
            # The run's authority, bound by the router: child runs may only narrow it.
            context=ExecutionContext(
                run_id=run_id,
                parent_run_id=p.parent_run_id,
                root_run_id=p.root_run_id or "",
                depth=p.depth,
                principal=Principal(
                    kind="automation" if p.origin in _AUTOMATION_ORIGINS else "user",
                    id=p.session_key,
                ),
                origin=p.origin,
                workspace=_workspace(p.cwd),
                tool_policy=p.tool_policy or ToolPolicy(),
            ),
            meta=p.meta,
        )

    async def _submit(self, command: ExecutionCommand) -> tuple[str, ErrorCode] | None:
        """Hand ``command`` to the runtime; None when accepted, else why it never started."""
        owner = self._owner
        config = owner.config
        clock = owner.clock
        backoff = config.submit_backoff
        retries = 0
        deadline = clock.monotonic_ms() + config.submit_timeout_ms
        last_problem = "no EngineRuntime is registered"
        while True:
            if self.cancel_reason is not None:
                return (
                    f"aborted before the runtime bound the run: {self.cancel_reason}",
                    ErrorCode.CANCELLED,
                )
            engine = owner.engine()
            if engine is not None and engine.available():
                try:
                    engine.submit_execution(command)
                except (ExecutionContractError, TypeError, ValueError) as exc:
                    return (
                        f"the engine runtime refused the command: {exc}",
                        ErrorCode.ENGINE_UNAVAILABLE,
                    )
                except Exception as exc:
                    # A foreign runtime failure: treated as "unavailable right now".
                    last_problem = f"{type(exc).__name__}: {exc}"
                    log.warning("engine runtime refused %s: %s", command.run_id, last_problem)
                else:
                    self.submitted = True
                    candidate: object = engine
                    if isinstance(candidate, RunIntrospection):
                        self._completion = candidate.completion_future(command.run_id)
                    return None
            elif engine is not None:
                last_problem = "the EngineRuntime is not available"
            remaining = deadline - clock.monotonic_ms()
            if remaining <= 0:
                return (
                    f"the engine runtime stayed unavailable for {config.submit_timeout_ms} ms "
                    f"({last_problem})",
                    ErrorCode.ENGINE_UNAVAILABLE,
                )
            retries += 1
            await self._wait_or_wake(min(round(backoff.delay(retries) * 1000), remaining))

    async def _wait_or_wake(self, ms: int) -> None:
        sleeper = asyncio.ensure_future(self._owner.clock.sleep_ms(ms))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, waker):
                task.cancel()
            await asyncio.gather(sleeper, waker, return_exceptions=True)

    async def _pump(self, run_id: str, delivery: Delivery) -> _Outcome:
        """Forward events until the run's completion; synthesise one when it cannot come.

        The attempt's own ``run_completed`` is returned, not forwarded (``_run`` forwards the
        final one)."""
        owner = self._owner
        config = owner.config
        clock = owner.clock
        bus = owner.bus
        session = session_topic(self.session_key)
        engine = owner.engine()
        candidate: object = engine  # a runtime may also implement the optional probe
        probe = candidate if isinstance(candidate, RunLiveness) else None
        last_event_at = clock.monotonic_ms()
        failed_at: int | None = None
        failed_reason = ""
        vanished_at: int | None = None
        next_probe = clock.monotonic_ms()
        cancel_seen_at: int | None = None
        while True:
            now = clock.monotonic_ms()
            if self.cancel_reason is not None and cancel_seen_at is None:
                cancel_seen_at = now
            if probe is not None and config.liveness_interval_ms is not None and now >= next_probe:
                next_probe = now + config.liveness_interval_ms
                if probe.is_live(run_id):
                    vanished_at = None
                elif vanished_at is None:
                    vanished_at = now
            deadlines: list[tuple[int, str, ErrorCode]] = []
            if failed_at is not None:
                deadlines.append(
                    (
                        failed_at + config.run_failed_grace_ms,
                        failed_reason,
                        ErrorCode.EXECUTOR_FAILED,
                    )
                )
            if vanished_at is not None:
                deadlines.append(
                    (
                        vanished_at + config.vanish_grace_ms,
                        "the gateway run vanished without a completion",
                        ErrorCode.CANCELLED
                        if self.cancel_reason is not None
                        else ErrorCode.VANISHED,
                    )
                )
            if cancel_seen_at is not None:
                deadlines.append(
                    (
                        cancel_seen_at + config.cancel_grace_ms,
                        f"aborted: {self.cancel_reason}",
                        ErrorCode.CANCELLED,
                    )
                )
            if config.idle_timeout_ms is not None and cancel_seen_at is None:
                deadlines.append(
                    (
                        last_event_at + config.idle_timeout_ms,
                        f"no event for {config.idle_timeout_ms} ms (watchdog)",
                        ErrorCode.TIMEOUT,
                    )
                )
            due = [d for d in deadlines if d[0] <= now]
            if due and (owned := self._owner_outcome(run_id)) is not None:
                return owned  # the owner completed the run: never invent an outcome
            if due:
                _, reason, code = min(due)
                if engine is not None:
                    engine.cancel(run_id, "watchdog" if code is ErrorCode.TIMEOUT else reason)
                return self._finish_synthetic(run_id, reason, code)
            wake_at = min([d[0] for d in deadlines], default=None)
            if probe is not None and config.liveness_interval_ms is not None:
                wake_at = next_probe if wake_at is None else min(wake_at, next_probe)
            item = await self._next(delivery, None if wake_at is None else wake_at - now)
            if item is None:
                continue
            last_event_at = clock.monotonic_ms()
            if isinstance(item, Overflow):
                # Tell the session (its clients recover from a snapshot), take a fresh
                # handle and keep forwarding; the terminal notice may still follow on the
                # old handle, so read that one until it comes or closes.
                bus.broadcast_event(
                    session,
                    "run_events_overflow",
                    RunEventsOverflow(run_id=run_id, session_key=self.session_key),
                    {"run_id": run_id, "session_key": self.session_key},
                )
                terminal = self._resubscribe(run_id, delivery)
                assert self._delivery is not None
                delivery = self._delivery
                if terminal is None:
                    continue
                item = terminal
            if isinstance(item, TerminalNotice):
                if item.event is None:
                    return await self._from_owner(run_id)
                item = item.event
            if not isinstance(item, Event):
                continue
            if _is_own_phase(item):
                continue
            if item.type == "run_completed":
                return _Outcome(event=item, completion=_completion(item), synthetic=False)
            if item.type == "engine_action" and _has_effects(item):
                self._acted = True
            bus.broadcast(session, item)
            if item.type == "run_started":
                owner.phase(run_id, self.prepared, RunPhase.STREAMING)
            elif item.type == "run_failed" and failed_at is None:
                failed_at = clock.monotonic_ms()
                failed_reason = f"run failed: {_field(item.payload, 'reason') or 'unknown'}"

    def _resubscribe(self, run_id: str, fenced: Delivery) -> TerminalNotice | None:
        """Replace a fenced handle by a fresh subscription to the run's topic. In the same
        step (nothing is published in between) the fenced handle is drained: a terminal
        notice already queued there is returned; anything published later reaches the new
        handle."""
        fresh = Delivery(max_entries=self._owner.config.run_event_buffer, claim_on_get=False)
        self._owner.bus.subscribe(run_topic(run_id), delivery=fresh)
        self._delivery = fresh
        terminal: TerminalNotice | None = None
        while True:
            try:
                item = fenced.get_nowait()
            except (asyncio.QueueEmpty, DeliveryClosedError):
                break
            if isinstance(item, TerminalNotice):
                terminal = item
        fenced.close()
        return terminal

    def _owner_outcome(self, run_id: str) -> _Outcome | None:
        """The run's real completion when its owner already has it (else None)."""
        future = self._completion
        if future is None or not future.done() or future.cancelled():
            return None
        if future.exception() is not None:
            return None
        return self._outcome_of(run_id, future.result())

    def _outcome_of(self, run_id: str, completion: Completion) -> _Outcome:
        event = Event(
            type="run_completed",
            ts_ms=now_ms(),
            meta={"run_id": run_id, "session_key": self.session_key},
            payload=RunCompleted(completed=completion),
        )
        return _Outcome(event=event, completion=completion, synthetic=False)

    async def _from_owner(self, run_id: str) -> _Outcome:
        """The completion re-read from its owner after it could not be delivered here."""
        future = self._completion
        if future is not None:
            with contextlib.suppress(Exception):
                return self._outcome_of(run_id, await asyncio.shield(future))
        return self._finish_synthetic(
            run_id,
            "the completion could not be delivered after overflow and its runtime cannot be "
            "asked for it",
            ErrorCode.VANISHED,
        )

    async def _next(self, delivery: Delivery, timeout_ms: int | None) -> Any:
        """The next delivered item, or None when the timeout passed or a cancel woke us.

        No task per event: an item already queued is taken at once; otherwise this task waits
        in ``delivery.get()`` itself, inside an ``asyncio.timeout`` scope that the deadline or
        :meth:`cancel` expires (the scope tells its own expiry from a cancellation of the task,
        so a router shutdown still propagates). An item that arrived by the time the wait
        ends is returned, never dropped: the expiry interrupts ``get()`` before it takes
        anything, and the queue is read once more. A clock other than the system clock keeps
        its own ``sleep_ms`` as the timer (one helper task per wait, as before)."""
        if self._streak < _BURST:
            try:
                item = delivery.get_nowait()
            except asyncio.QueueEmpty:
                pass
            else:
                self._streak += 1
                return item
        else:
            # A backlog is forwarded in slices: the loop (session subscribers draining their
            # own bounded handles, the engine) runs between them, as it did between events.
            self._streak = 0
            await asyncio.sleep(0)
            return None
        self._streak = 0
        if self._wake.is_set():
            # A cancel came while we were not waiting: let the caller look at it first.
            self._wake.clear()
            return None
        clock = self._owner.clock
        system = type(clock) is SystemClock
        loop = asyncio.get_running_loop()
        when: float | None = None
        if timeout_ms is not None and system:
            when = loop.time() + max(timeout_ms, 0) / 1000
        sleeper: asyncio.Future[None] | None = None
        try:
            async with asyncio.timeout_at(when) as scope:
                self._parked = scope
                if timeout_ms is not None and not system:
                    sleeper = asyncio.ensure_future(clock.sleep_ms(max(timeout_ms, 0)))
                    sleeper.add_done_callback(lambda _done: self._expire(scope))
                return await delivery.get()
        except TimeoutError:
            pass
        finally:
            self._parked = None
            if sleeper is not None:
                sleeper.cancel()
                await asyncio.gather(sleeper, return_exceptions=True)
        self._wake.clear()
        try:
            return delivery.get_nowait()
        except asyncio.QueueEmpty:
            return None

    def _expire(self, scope: asyncio.Timeout | None) -> None:
        """End the wait of ``scope`` now, if ``_next`` is still parked in it."""
        if scope is not None and scope is self._parked and not scope.expired():
            scope.reschedule(asyncio.get_running_loop().time())

    def _finish_synthetic(self, run_id: str, reason: str, code: ErrorCode) -> _Outcome:
        """Publish a synthetic failed completion on the run and session topics."""
        completion = Completion(
            ok=False,
            answer=None,
            error=reason,
            error_code=code,
            run_id=run_id,
            session_key=self.session_key,
            synthetic=True,
            retry_of=None if run_id == self.run_id else self.run_id,
        )
        payload = RunCompleted(completed=completion)
        meta = {"run_id": run_id, "session_key": self.session_key}
        bus = self._owner.bus
        self._owner.note_synthetic()
        event = bus.broadcast_event(run_topic(run_id), "run_completed", payload, meta)
        bus.broadcast(session_topic(self.session_key), event)
        return _Outcome(event=event, completion=completion, synthetic=True)


#: Retryable codes the router still does not retry itself: the provider layer already retried
#: a rate limit honouring its Retry-After hint; retrying again at once would hammer it.
_NOT_RETRIED_HERE = frozenset({ErrorCode.RATE_LIMITED})
#: At most this many queued events are forwarded in a row before the run yields to the loop.
_BURST = 16
_AUTOMATION_ORIGINS = frozenset({"cron", "heartbeat", "automation", "webhook"})
#: Action kinds whose start means the world may have changed: a retry could repeat them. A
#: ``fetch`` counts: a URL can carry data out or change something on the server.
_EFFECT_KINDS = frozenset({"tool", "command", "file_change", "subagent", "web_search", "fetch"})


def _workspace(cwd: str | None) -> str | None:
    # lemon_core's one rule (a real path); the engine checks the directory when it runs.
    return resolve_cwd(cwd, check=False) if cwd else None


def _has_effects(event: Event) -> bool:
    payload = event.payload
    action = getattr(payload, "action", None)
    kind = getattr(action, "kind", None)
    return getattr(payload, "phase", None) == "started" and kind in _EFFECT_KINDS


def _is_own_phase(event: Event) -> bool:
    payload = event.payload
    return (
        event.type == "run_phase_changed"
        and isinstance(payload, _RunPhaseChanged)
        and payload.source == "router"
    )


def _field(payload: Any, name: str) -> Any:
    if isinstance(payload, Mapping):
        return payload.get(name)
    return getattr(payload, name, None)


def _completion(event: Event) -> Completion:
    payload = event.payload
    if isinstance(payload, RunCompleted):
        return payload.completed
    try:
        return RunCompleted.from_map(payload).completed
    except Exception:
        return Completion(
            ok=False, error="malformed run_completed payload", error_code=ErrorCode.INTERNAL
        )


class ChatStateAccess(ChatStateReader, Protocol):
    """Read and write access to chat state (``lemon_core.store.ChatStateStore`` fits)."""

    async def put(self, session_key: str, token: ResumeToken) -> Any:
        """Record ``token`` as the session's latest resume state."""
        ...


__all__ = [
    "ChatStateAccess",
    "EngineRuntime",
    "Prepared",
    "RunOwner",
    "RunProcess",
]
