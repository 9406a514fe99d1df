"""RunProcess: one task per active run, from hand-off to the engine runtime to completion.

It submits the ExecutionCommand to the EngineRuntime capability (retrying with backoff while
the runtime is unavailable), forwards every event of ``run:<id>`` unchanged to
``session:<key>``, publishes ``run_phase_changed``, writes the session's chat state from the
completion, retries once a failed run that produced no answer, and guarantees that the run
ends with exactly one ``run_completed`` on the session topic: a synthetic one (event meta
``synthetic: True``) when the runtime never bound the run, lost it, failed it without a
completion, or did not confirm a cancellation in time.
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
from lemon_core.events import (
    Completion,
    Event,
    RunCompleted,
    RunEventsOverflow,
    RunFailed,
    RunPhase,
)
from lemon_core.events import RunPhaseChanged as _RunPhaseChanged
from lemon_core.execution import (
    EngineRuntime,
    ExecutionCommand,
    ExecutionContractError,
    ResumeToken,
    RunLiveness,
    ToolPolicy,
)
from lemon_router._resume import ChatStateReader, auto_resume_disabled

if TYPE_CHECKING:
    from lemon_router._router import Router

log = logging.getLogger("lemon_router")

RETRY_NOTICE = (
    "[retry notice] The previous attempt ended without an answer. Continue from the current "
    "state and answer the request below.\n\n"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Prepared:
    """What intake resolved for one submission (everything but the final prompt and run id)."""

    origin: str
    agent_id: str
    session_key: str
    conversation_key: str
    conversation_tuple: tuple[str, ...]
    explicit_resume: ResumeToken | None
    resume_at_submit: ResumeToken | None
    cwd: str | None
    model: str | None
    images: tuple[Mapping[str, Any], ...]
    tool_policy: ToolPolicy | None
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class _Outcome:
    event: Event
    completion: Completion
    synthetic: bool


class RunProcess:
    """Drives one run (see the module docstring). Owned and awaited by the Router."""

    def __init__(
        self,
        router: Router,
        *,
        run_id: str,
        prompt: str,
        prepared: Prepared,
        merged_run_ids: tuple[str, ...] = (),
    ) -> None:
        self._router = router
        self.run_id = run_id
        self.current_run_id = run_id
        self.prompt = prompt
        self.prepared = prepared
        self.merged_run_ids = merged_run_ids
        self.submitted = False
        self.cancel_reason: str | None = None
        self._wake = asyncio.Event()
        self.retried = False

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
            engine = self._router._engine()
            if engine is not None:
                engine.cancel(self.current_run_id, reason)
        self._wake.set()

    # -- the run ---------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            await self._run()
        except asyncio.CancelledError:
            # Router shutdown: make sure the runtime lets go and subscribers hear the end.
            engine = self._router._engine()
            if self.submitted and engine is not None:
                engine.cancel(self.current_run_id, "shutdown")
            with contextlib.suppress(Exception):
                self._finish_synthetic(self.current_run_id, "aborted: the router stopped", True)
                self._router._phase(self.current_run_id, self.prepared, RunPhase.ABORTED)
            raise
        except Exception as exc:
            log.exception("run %s failed inside the router", self.current_run_id)
            with contextlib.suppress(Exception):
                bus = self._router.bus
                payload = RunFailed.new(
                    run_id=self.current_run_id,
                    session_key=self.session_key,
                    reason=f"router error: {type(exc).__name__}",
                )
                meta = {"run_id": self.current_run_id, "session_key": self.session_key}
                bus.broadcast_event(run_topic(self.current_run_id), "run_failed", payload, meta)
                bus.broadcast_event(session_topic(self.session_key), "run_failed", payload, meta)
                self._finish_synthetic(self.current_run_id, f"router error: {exc}", False)
        finally:
            self._router._run_finished(self)

    async def _run(self) -> None:
        prompt = self.prompt
        while True:
            run_id = self.current_run_id
            outcome = await self._attempt(run_id, prompt)
            completion = outcome.completion
            if not outcome.synthetic:
                await self._record_chat_state(completion)
            if (
                not completion.ok
                and not (completion.answer or "").strip()
                and _retryable(outcome)
                and self.cancel_reason is None
                and not self.retried
                and self._router.config.retry_zero_answer
            ):
                self.retried = True
                self._router._phase(run_id, self.prepared, RunPhase.FAILED)
                self.current_run_id = f"run_{uuid.uuid4()}"
                self._router._retry_started(self, run_id)
                prompt = RETRY_NOTICE + self.prompt
                continue
            if completion.ok:
                phase = RunPhase.COMPLETED
            elif self.cancel_reason is not None:
                phase = RunPhase.ABORTED
            else:
                phase = RunPhase.FAILED
            self._router._phase(run_id, self.prepared, phase)
            return

    async def _attempt(self, run_id: str, prompt: str) -> _Outcome:
        config = self._router.config
        bus = self._router.bus
        delivery = Delivery(max_entries=config.run_event_buffer)
        subscription = bus.subscribe(run_topic(run_id), delivery=delivery)
        try:
            self._router._phase(run_id, self.prepared, RunPhase.WAITING_FOR_SLOT)
            command = await self._command(run_id, prompt)
            refused = await self._submit(command)
            if refused is not None:
                return self._finish_synthetic(run_id, refused, self.cancel_reason is not None)
            self._router._phase(run_id, self.prepared, RunPhase.DISPATCHED_TO_GATEWAY)
            return await self._pump(run_id, delivery)
        finally:
            subscription.cancel()
            delivery.close()

    async def _command(self, run_id: str, prompt: str) -> ExecutionCommand:
        p = self.prepared
        resume = p.explicit_resume
        automatic = False
        if resume is None and not auto_resume_disabled(p.meta):
            # Chat-state readback at start time: an earlier run of this session may have
            # written the native session id while this message waited.
            resume = await self._router._read_resume(p.session_key) or p.resume_at_submit
            automatic = resume is not None
        meta: dict[str, Any] = dict(p.meta)
        # Tell the executor the token was looked up, not asked for: a missing or corrupt
        # transcript then starts a fresh session with a notice instead of failing forever.
        meta["resume_mode"] = "auto" if automatic else "explicit"
        meta.update(origin=p.origin, agent_id=p.agent_id)
        if p.model is not None:
            meta["model"] = p.model
        if run_id != self.run_id:
            meta["retry_of"] = self.run_id
        if self.merged_run_ids:
            meta["merged_run_ids"] = list(self.merged_run_ids)
        return ExecutionCommand(
            run_id=run_id,
            session_key=p.session_key,
            prompt=prompt,
            conversation_key=p.conversation_tuple,
            images=p.images,
            cwd=p.cwd,
            resume=resume,
            tool_policy=p.tool_policy,
            meta=meta,
        )

    async def _submit(self, command: ExecutionCommand) -> str | None:
        """Hand ``command`` to the runtime; None when accepted, else why it never started."""
        router = self._router
        config = router.config
        clock = router.clock
        delay = config.submit_backoff_initial_ms
        deadline = clock.now_ms() + config.submit_timeout_ms
        last_problem = "no EngineRuntime is registered"
        while True:
            if self.cancel_reason is not None:
                return f"aborted before the runtime bound the run: {self.cancel_reason}"
            engine = router._engine()
            if engine is not None and engine.available():
                try:
                    engine.submit(command)
                except (ExecutionContractError, TypeError, ValueError) as exc:
                    return f"the engine runtime refused the command: {exc}"
                except Exception as exc:
                    # A foreign runtime failure: treated as "unavailable right now".
                    last_problem = f"{type(exc).__name__}: {exc}"
                    log.warning("engine runtime refused %s: %s", command.run_id, last_problem)
                else:
                    self.submitted = True
                    return None
            elif engine is not None:
                last_problem = "the EngineRuntime is not available"
            remaining = deadline - clock.now_ms()
            if remaining <= 0:
                return (
                    f"the engine runtime stayed unavailable for {config.submit_timeout_ms} ms "
                    f"({last_problem})"
                )
            await self._wait_or_wake(min(delay, remaining))
            delay = min(delay * 2, config.submit_backoff_max_ms)

    async def _wait_or_wake(self, ms: int) -> None:
        sleeper = asyncio.ensure_future(self._router.clock.sleep_ms(ms))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, waker):
                task.cancel()
            await asyncio.gather(sleeper, waker, return_exceptions=True)

    async def _pump(self, run_id: str, delivery: Delivery) -> _Outcome:
        """Forward events until the run's completion; synthesise one when it cannot come."""
        router = self._router
        config = router.config
        clock = router.clock
        bus = router.bus
        session = session_topic(self.session_key)
        engine = router._engine()
        candidate: object = engine  # a runtime may also implement the optional probe
        probe = candidate if isinstance(candidate, RunLiveness) else None
        last_event_at = clock.now_ms()
        failed_at: int | None = None
        failed_reason = ""
        vanished_at: int | None = None
        next_probe = clock.now_ms()
        cancel_seen_at: int | None = None
        getter: asyncio.Future[Any] = asyncio.ensure_future(delivery.get())
        try:
            while True:
                now = clock.now_ms()
                if self.cancel_reason is not None and cancel_seen_at is None:
                    cancel_seen_at = now
                if (
                    probe is not None
                    and config.liveness_interval_ms is not None
                    and now >= next_probe
                ):
                    next_probe = now + config.liveness_interval_ms
                    if probe.is_live(run_id):
                        vanished_at = None
                    elif vanished_at is None:
                        vanished_at = now
                deadlines: list[tuple[int, str, bool]] = []
                if failed_at is not None:
                    deadlines.append((failed_at + config.run_failed_grace_ms, failed_reason, False))
                if vanished_at is not None:
                    deadlines.append(
                        (
                            vanished_at + config.vanish_grace_ms,
                            "the gateway run vanished without a completion",
                            self.cancel_reason is not None,
                        )
                    )
                if cancel_seen_at is not None:
                    deadlines.append(
                        (
                            cancel_seen_at + config.cancel_grace_ms,
                            f"aborted: {self.cancel_reason}",
                            True,
                        )
                    )
                if config.idle_timeout_ms is not None and cancel_seen_at is None:
                    deadlines.append(
                        (
                            last_event_at + config.idle_timeout_ms,
                            f"no event for {config.idle_timeout_ms} ms (watchdog)",
                            False,
                        )
                    )
                due = [d for d in deadlines if d[0] <= now]
                if due:
                    _, reason, aborted = min(due)
                    if engine is not None:
                        engine.cancel(run_id, "watchdog" if "watchdog" in reason else reason)
                    return self._finish_synthetic(run_id, reason, aborted)
                wake_at = min([d[0] for d in deadlines], default=None)
                if probe is not None and config.liveness_interval_ms is not None:
                    wake_at = next_probe if wake_at is None else min(wake_at, next_probe)
                item = await self._next(getter, None if wake_at is None else wake_at - now)
                if item is None:
                    continue
                getter = asyncio.ensure_future(delivery.get())
                last_event_at = clock.now_ms()
                if isinstance(item, Overflow):
                    bus.broadcast_event(
                        session,
                        "run_events_overflow",
                        RunEventsOverflow(run_id=run_id, session_key=self.session_key),
                        {"run_id": run_id, "session_key": self.session_key},
                    )
                    continue
                if isinstance(item, TerminalNotice):
                    if item.event is None:
                        return self._finish_synthetic(
                            run_id, "the completion was too large to deliver after overflow", False
                        )
                    item = item.event
                if not isinstance(item, Event):
                    continue
                if _is_own_phase(item):
                    continue
                bus.broadcast(session, item)
                if item.type == "run_started":
                    router._phase(run_id, self.prepared, RunPhase.STREAMING)
                elif item.type == "run_failed" and failed_at is None:
                    failed_at = clock.now_ms()
                    failed_reason = f"run failed: {_field(item.payload, 'reason') or 'unknown'}"
                elif item.type == "run_completed":
                    return _Outcome(event=item, completion=_completion(item), synthetic=False)
        finally:
            getter.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await getter

    async def _next(self, getter: asyncio.Future[Any], timeout_ms: int | None) -> Any:
        """The next delivered item, or None when the timeout passed or a cancel woke us."""
        if getter.done():
            return getter.result()
        waiters: set[asyncio.Future[Any]] = {getter}
        waker = asyncio.ensure_future(self._wake.wait())
        waiters.add(waker)
        sleeper: asyncio.Future[Any] | None = None
        if timeout_ms is not None:
            sleeper = asyncio.ensure_future(self._router.clock.sleep_ms(max(timeout_ms, 0)))
            waiters.add(sleeper)
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for extra in (waker, sleeper):
                if extra is not None:
                    extra.cancel()
            await asyncio.gather(
                *(t for t in (waker, sleeper) if t is not None), return_exceptions=True
            )
        if self._wake.is_set():
            self._wake.clear()
        if getter.done():
            return getter.result()
        return None

    def _finish_synthetic(self, run_id: str, reason: str, aborted: bool) -> _Outcome:
        """Publish a synthetic failed completion on the run and session topics."""
        completion = Completion.new(
            ok=False,
            answer=None,
            error=reason,
            run_id=run_id,
            session_key=self.session_key,
            meta={"synthetic": True, "aborted": aborted},
        )
        payload = RunCompleted.new(completed=completion)
        meta = {"run_id": run_id, "session_key": self.session_key, "synthetic": True}
        bus = self._router.bus
        self._router._note_synthetic()
        event = bus.broadcast_event(run_topic(run_id), "run_completed", payload, meta)
        bus.broadcast(session_topic(self.session_key), event)
        return _Outcome(event=event, completion=completion, synthetic=True)

    async def _record_chat_state(self, completion: Completion) -> None:
        """The router owns chat-state writes: remember the native session to resume."""
        if completion.resume is None:
            return
        try:
            token = ResumeToken.from_dict(dict(completion.resume))
        except ExecutionContractError:
            log.warning("run %s completed with a malformed resume token", self.current_run_id)
            return
        await self._router._write_resume(self.session_key, token)


_NOT_RETRIED_CODES = frozenset(
    {
        # Gateway codes: the run was stopped on purpose, or can never run.
        "cancelled",
        "unsupported_resume_engine",
        # Executor error kinds (the prefix of Completion.error): the same request fails again.
        "auth",
        "bad_request",
        "context_overflow",
        "corrupt_transcript",
        "session_not_found",
        "config_invalid",
        "model_unavailable",
    }
)


def _retryable(outcome: _Outcome) -> bool:
    """A transient failure of the run itself: not synthetic, not a cancel, not deterministic.

    Deterministic failures (bad credentials, a request the provider rejects, a corrupt
    transcript, an invalid config) would fail the same way again, so retrying them only shows
    the user the same error twice.
    """
    if outcome.synthetic or outcome.event.meta.get("synthetic"):
        return False
    error = outcome.completion.meta.get("error")
    code = error.get("code") if isinstance(error, Mapping) else None
    if code in _NOT_RETRIED_CODES:
        return False
    text = outcome.completion.error
    kind = text.split(":", 1)[0].strip() if isinstance(text, str) and ":" in text else None
    return kind not in _NOT_RETRIED_CODES


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
        return Completion.new(ok=False, error="malformed run_completed payload")


class ChatStateAccess(ChatStateReader, Protocol):
    """Read and write access to chat state (``lemon_core.store.ChatStateStore`` fits)."""

    async def put(self, session_key: str, token: ResumeToken) -> Any:
        """Record ``token`` as the session's latest resume state."""
        ...


__all__ = [
    "RETRY_NOTICE",
    "ChatStateAccess",
    "EngineRuntime",
    "Prepared",
    "RunProcess",
]
