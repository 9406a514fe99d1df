"""The Router end to end against a fake EngineRuntime on a real Bus and a real store."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from lemon_core.bus import Bus, Delivery, session_topic
from lemon_core.events import (
    NOT_RETRYABLE,
    ErrorCode,
    Event,
    QueueOutcome,
    QueueOutcomeKind,
    RunCompleted,
    RunEventsOverflow,
)
from lemon_core.execution import (
    ENGINE_RUNTIME,
    ResumeToken,
    RunRequest,
    RuntimeContext,
    ToolPolicy,
    Unavailable,
    submit_via_bridge,
)
from lemon_core.store import ChatStateStore
from lemon_infra import SQLiteStore
from lemon_platform_test import ManualClock
from lemon_router import (
    ResumeError,
    Router,
    RouterConfig,
)
from lemon_router.testing import FakeEngineRuntime

SESSION = "agent:default:main"
FAST = RouterConfig(idle_timeout_ms=None, liveness_interval_ms=None)


class Watcher:
    """Reads session:<key> from a real subscription and waits for events deterministically."""

    def __init__(self, bus: Bus, session_key: str) -> None:
        self.delivery = Delivery(max_entries=10_000)
        self.sub = bus.subscribe(session_topic(session_key), delivery=self.delivery)
        self.seen: list[Event] = []

    async def until(self, type_: str, **match: Any) -> Event:
        for event in self.seen:
            if _matches(event, type_, match):
                return event
        while True:
            item = await self.delivery.get()
            assert isinstance(item, Event), item
            self.seen.append(item)
            if _matches(item, type_, match):
                return item

    async def until_terminal(self, run_id: str) -> Event:
        while True:
            for event in self.seen:
                if (
                    event.type == "run_phase_changed"
                    and event.payload.run_id == run_id
                    and event.payload.phase.terminal
                ):
                    return event
            item = await self.delivery.get()
            assert isinstance(item, Event), item
            self.seen.append(item)

    def drain(self) -> list[Event]:
        while True:
            try:
                item = self.delivery.get_nowait()
            except asyncio.QueueEmpty:
                return self.seen
            self.seen.append(item)

    def phases(self, run_id: str) -> list[str]:
        return [
            e.payload.phase.value
            for e in self.drain()
            if e.type == "run_phase_changed" and e.payload.run_id == run_id
        ]

    def completions(self) -> list[Event]:
        return [e for e in self.drain() if e.type == "run_completed"]


def _matches(event: Event, type_: str, match: dict[str, Any]) -> bool:
    if event.type != type_:
        return False
    return all(event.meta.get(k) == v or _payload_get(event, k) == v for k, v in match.items())


def _payload_get(event: Event, key: str) -> Any:
    payload = event.payload
    if isinstance(payload, dict):
        return payload.get(key)
    return getattr(payload, key, None)


@pytest.fixture
async def bus() -> AsyncIterator[Bus]:
    async with Bus(validation="raise") as b:
        yield b


@pytest.fixture
async def chat_state(tmp_path: Path) -> AsyncIterator[ChatStateStore]:
    async with await SQLiteStore.open(tmp_path / "store.sqlite3") as store:
        yield ChatStateStore(store)


def request(prompt: str, mode: str = "collect", **kw: Any) -> RunRequest:
    return RunRequest(
        origin="control_plane",
        session_key=kw.pop("session_key", SESSION),
        prompt=prompt,
        queue_mode=mode,  # type: ignore[arg-type]  # the modes under test are all valid
        **kw,
    )


async def test_a_run_is_forwarded_unchanged_with_phases_and_chat_state(
    bus: Bus, chat_state: ChatStateStore
) -> None:
    context, engine = runtime(bus)
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, chat_state=chat_state, config=FAST) as router:
        receipt = await router.submit(request("hello"))
        assert (receipt.status, receipt.requested_mode, receipt.actual_mode) == (
            "started",
            "collect",
            "collect",
        )
        assert receipt.conversation_key == f"session:{SESSION}"
        command = await engine.next_command()
        assert command.run_id == receipt.run_id
        assert command.prompt == "hello"
        assert command.conversation_key == ("session", SESSION)
        assert command.resume is None
        assert router.is_busy(SESSION)
        engine.started(command.run_id)
        engine.delta(command.run_id, "hi")
        engine.complete(command.run_id, answer="hi", resume="native-1")
        done = await watcher.until("run_completed", run_id=command.run_id)
        assert isinstance(done.payload, RunCompleted)
        assert done.payload.completed.answer == "hi"
        await watcher.until("run_phase_changed", run_id=command.run_id, phase="completed")
        assert watcher.phases(command.run_id) == [
            "accepted",
            "waiting_for_slot",
            "dispatched_to_gateway",
            "streaming",
            "completed",
        ]
        forwarded = [e.type for e in watcher.seen if e.type != "run_phase_changed"]
        assert forwarded == ["run_started", "delta", "run_completed"]
        # One writer per fact: the native resume state is the engine runtime's to write (the
        # gateway writes it before it publishes the completion), never the router's.
        assert await chat_state.resume_token(SESSION) is None
        await chat_state.put(SESSION, ResumeToken.native("native-1"))

        # The next message resumes the native session and is keyed by it.
        receipt2 = await router.submit(request("again"))
        assert receipt2.conversation_key == "resume:lemon:native-1"
        command2 = await engine.next_command()
        assert command2.resume == ResumeToken.native("native-1")
        assert command2.conversation_key == ("resume", "lemon", "native-1")
        engine.complete(command2.run_id)
        await watcher.until("run_phase_changed", run_id=command2.run_id, phase="completed")
        assert not router.is_busy(SESSION)
        assert router.statistics().conversations == 0


def runtime(bus: Bus, **kw: Any) -> tuple[RuntimeContext, FakeEngineRuntime]:
    context = RuntimeContext()
    engine = FakeEngineRuntime(bus, **kw)
    context.capabilities.register(ENGINE_RUNTIME, engine)
    return context, engine


async def test_explicit_non_native_resume_is_an_error_and_auto_resume_can_be_disabled(
    bus: Bus, chat_state: ChatStateStore
) -> None:
    context, engine = runtime(bus)
    await chat_state.put(SESSION, ResumeToken.native("s1"))
    async with Router(bus=bus, context=context, chat_state=chat_state, config=FAST) as router:
        with pytest.raises(ResumeError, match="only native 'lemon' sessions"):
            await router.submit(request("x", resume=ResumeToken(engine="codex", value="t")))
        receipt = await router.submit(request("x", meta={"disable_auto_resume": True}))
        assert receipt.conversation_key == f"session:{SESSION}"
        command = await engine.next_command()
        assert command.resume is None
        engine.complete(command.run_id)
        await chat_state.put(SESSION, ResumeToken(engine="claude", value="old"))
        watcher = Watcher(bus, SESSION)
        receipt = await router.submit(request("y"))
        assert receipt.conversation_key == f"session:{SESSION}"  # quarantined, not resumed
        command = await engine.next_command()
        assert command.resume is None
        engine.complete(command.run_id)
        await watcher.until("run_phase_changed", run_id=command.run_id, phase="completed")


async def test_submit_retries_with_backoff_while_the_runtime_is_unavailable(bus: Bus) -> None:
    context, engine = runtime(bus, available=False)
    clock = ManualClock()
    watcher = Watcher(bus, SESSION)
    exact = dataclasses.replace(FAST, submit_backoff_jitter=0.0)
    async with Router(bus=bus, context=context, config=exact, clock=clock) as router:
        receipt = await router.submit(request("x"))
        await clock.slept(7)
        engine.is_available = True
        command = await engine.next_command()
        assert command.run_id == receipt.run_id
        assert clock.sleeps == [100, 200, 400, 800, 1600, 2000, 2000]
        engine.complete(command.run_id)
        await watcher.until("run_phase_changed", run_id=command.run_id, phase="completed")


async def test_submit_backoff_jitter_only_shortens_the_waits(bus: Bus) -> None:
    context, engine = runtime(bus, available=False)
    clock = ManualClock()
    async with Router(bus=bus, context=context, config=FAST, clock=clock) as router:
        receipt = await router.submit(request("x"))
        await clock.slept(7)
        engine.is_available = True
        command = await engine.next_command()
        assert command.run_id == receipt.run_id
        exact = [100, 200, 400, 800, 1600, 2000, 2000]
        assert all(e * 0.8 - 1 <= s <= e for s, e in zip(clock.sleeps, exact, strict=False))
        engine.complete(command.run_id)


async def test_submit_gives_up_after_the_timeout_with_one_synthetic_completion(bus: Bus) -> None:
    context = RuntimeContext()  # no EngineRuntime at all
    clock = ManualClock()
    config = RouterConfig(idle_timeout_ms=None, liveness_interval_ms=None, submit_timeout_ms=5000)
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, config=config, clock=clock) as router:
        receipt = await router.submit(request("x"))
        done = await watcher.until("run_completed", run_id=receipt.run_id)
        assert done.payload.completed.synthetic is True
        assert "stayed unavailable for 5000 ms" in done.payload.completed.error
        await watcher.until("run_phase_changed", run_id=receipt.run_id, phase="failed")
        assert sum(clock.sleeps) == 5000
        assert not router.is_busy(SESSION)


async def test_abort_before_the_runtime_bound_the_run(bus: Bus) -> None:
    context, engine = runtime(bus, available=False)
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, config=FAST) as router:
        receipt = await router.submit(request("x"))
        queued = await router.submit(request("next"))
        assert queued.status == "queued"
        assert router.abort_run(receipt.run_id)
        done = await watcher.until("run_completed", run_id=receipt.run_id)
        assert done.payload.completed.synthetic is True
        assert done.payload.completed.error_code is ErrorCode.CANCELLED
        assert done.payload.completed.synthetic is True
        await watcher.until("run_phase_changed", run_id=receipt.run_id, phase="aborted")
        engine.is_available = True
        command = await engine.next_command()
        assert command.run_id == queued.run_id
        engine.complete(command.run_id)
        await watcher.until("run_phase_changed", run_id=queued.run_id, phase="completed")


async def test_a_vanished_gateway_run_gets_one_synthetic_completion_and_frees_the_session(
    bus: Bus,
) -> None:
    context, engine = runtime(bus)
    config = RouterConfig(idle_timeout_ms=None, liveness_interval_ms=5, vanish_grace_ms=20)
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, config=config) as router:
        first = await router.submit(request("one"))
        second = await router.submit(request("two"))
        command = await engine.next_command()
        engine.started(command.run_id)
        engine.vanish(command.run_id)
        done = await watcher.until("run_completed", run_id=first.run_id)
        assert done.payload.completed.synthetic is True
        assert "vanished" in done.payload.completed.error
        command2 = await engine.next_command()
        assert command2.run_id == second.run_id
        engine.complete(command2.run_id)
        await watcher.until("run_phase_changed", run_id=second.run_id, phase="completed")
        assert [e.meta["run_id"] for e in watcher.completions()] == [first.run_id, second.run_id]
        assert router.statistics().synthetic_completions == 1
        assert not router.is_busy(SESSION)


async def test_run_failed_without_completion_gets_a_synthetic_one_after_grace(bus: Bus) -> None:
    context, engine = runtime(bus)
    config = RouterConfig(idle_timeout_ms=None, liveness_interval_ms=None, run_failed_grace_ms=10)
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, config=config) as router:
        receipt = await router.submit(request("x"))
        command = await engine.next_command()
        engine.fail(command.run_id, "worker crashed")
        done = await watcher.until("run_completed", run_id=receipt.run_id)
        assert done.payload.completed.synthetic is True
        assert done.payload.completed.error == "run failed: worker crashed"
        await watcher.until("run_phase_changed", run_id=receipt.run_id, phase="failed")
        assert len(watcher.completions()) == 1


async def test_a_failed_run_without_answer_is_retried_once(bus: Bus) -> None:
    context, engine = runtime(bus)
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, config=FAST) as router:
        receipt = await router.submit(request("do it"))
        command = await engine.next_command()
        engine.complete(command.run_id, ok=False, answer="", error="model error")
        retry = await engine.next_command()
        assert retry.run_id != command.run_id
        assert retry.prompt == "do it"  # the user's words, never rewritten
        assert retry.retry_of == receipt.run_id
        assert router.active_run(SESSION) == retry.run_id
        engine.complete(retry.run_id, ok=False, answer="", error="model error again")
        await watcher.until("run_phase_changed", run_id=retry.run_id, phase="failed")
        assert watcher.phases(receipt.run_id)[-1] == "failed"
        assert router.statistics().zero_answer_retries == 1
        assert not router.is_busy(SESSION)
        assert engine.pending_commands() == 0


async def test_interrupt_cancels_the_active_run_and_runs_next(bus: Bus) -> None:
    context, engine = runtime(bus)
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, config=FAST) as router:
        first = await router.submit(request("long task"))
        command = await engine.next_command()
        queued = await router.submit(request("later"))
        interrupt = await router.submit(request("stop, do this", "interrupt"))
        assert (interrupt.status, interrupt.position) == ("queued", 0)
        assert engine.cancelled == [(command.run_id, "interrupted")]
        await watcher.until("run_phase_changed", run_id=first.run_id, phase="aborted")
        nxt = await engine.next_command()
        assert nxt.run_id == interrupt.run_id
        engine.complete(nxt.run_id)
        last = await engine.next_command()
        assert last.run_id == queued.run_id
        engine.complete(last.run_id)
        await watcher.until("run_phase_changed", run_id=queued.run_id, phase="completed")


@pytest.mark.parametrize(("steer", "outcome"), [("accept", "steered"), ("reject", "fallback")])
async def test_steer_is_accepted_or_falls_back_to_a_followup(
    bus: Bus, steer: str, outcome: str
) -> None:
    context, engine = runtime(bus, steer=steer)
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, config=FAST) as router:
        first = await router.submit(request("task"))
        command = await engine.next_command()
        s = await router.submit(request("also check tests", "steer"))
        assert (s.status, s.active_run_id) == ("dispatched_to_active", first.run_id)
        if outcome == "steered":
            settled = await watcher.until("queue_outcome", run_id=s.run_id)
            assert settled.payload.outcome == "steered"
            assert engine.steered == [(command.run_id, "also check tests")]
            await watcher.until("run_phase_changed", run_id=s.run_id, phase="completed")
            engine.complete(command.run_id)
            await watcher.until("run_phase_changed", run_id=first.run_id, phase="completed")
            assert engine.pending_commands() == 0
        else:
            requeued = await watcher.until("queue_outcome", run_id=s.run_id)
            assert requeued.payload.outcome == "fallback_queued"
            assert requeued.payload.mode == "followup"
            engine.complete(command.run_id)
            nxt = await engine.next_command()
            assert (nxt.run_id, nxt.prompt) == (s.run_id, "also check tests")
            engine.complete(nxt.run_id)
            await watcher.until("run_phase_changed", run_id=s.run_id, phase="completed")


async def test_steer_on_a_runtime_without_steering_falls_back(bus: Bus) -> None:
    context, engine = runtime(bus, steer="unsupported")
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, config=FAST) as router:
        await router.submit(request("task"))
        command = await engine.next_command()
        s = await router.submit(request("more", "steer_backlog"))
        requeued = await watcher.until("queue_outcome", run_id=s.run_id)
        assert requeued.payload.mode == "collect"
        engine.complete(command.run_id)
        nxt = await engine.next_command()
        assert nxt.run_id == s.run_id
        engine.complete(nxt.run_id)
        await watcher.until("run_phase_changed", run_id=s.run_id, phase="completed")


async def test_followups_within_the_window_merge_into_one_run(bus: Bus) -> None:
    context, engine = runtime(bus)
    clock = ManualClock()
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, config=FAST, clock=clock) as router:
        await router.submit(request("task"))
        command = await engine.next_command()
        a = await router.submit(request("one", "followup"))
        clock.advance(300)
        b = await router.submit(request("two", "followup"))
        assert b.reason == f"merged with earlier followup {a.run_id}"
        merged = await watcher.until("queue_outcome", run_id=a.run_id)
        assert merged.payload.into_run_id == b.run_id
        await watcher.until("run_phase_changed", run_id=a.run_id, phase="aborted")
        engine.complete(command.run_id)
        nxt = await engine.next_command()
        assert (nxt.run_id, nxt.prompt) == (b.run_id, "one\ntwo")
        assert nxt.merged_run_ids == (a.run_id,)
        engine.complete(nxt.run_id)
        await watcher.until("run_phase_changed", run_id=b.run_id, phase="completed")


async def test_past_the_bound_a_message_is_rejected_with_a_receipt(bus: Bus) -> None:
    context, engine = runtime(bus)
    config = RouterConfig(
        idle_timeout_ms=None, liveness_interval_ms=None, max_pending_per_conversation=2
    )
    async with Router(bus=bus, context=context, config=config) as router:
        await router.submit(request("a"))
        await router.submit(request("b"))
        await router.submit(request("c"))
        rejected = await router.submit(request("d"))
        assert rejected.status == "rejected"
        assert rejected.reason is not None
        assert rejected.reason.startswith("queue_full")
        assert len(router.queued(SESSION)) == 2
        assert router.statistics().rejected == 1
        for _ in range(3):
            engine.complete((await engine.next_command()).run_id)


async def test_abort_session_cancels_everything_of_the_session(bus: Bus) -> None:
    context, engine = runtime(bus)
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, config=FAST) as router:
        first = await router.submit(request("a"))
        command = await engine.next_command()
        queued = await router.submit(request("b"))
        assert router.abort_session(SESSION) == 2
        await watcher.until("run_phase_changed", run_id=queued.run_id, phase="aborted")
        await watcher.until("run_phase_changed", run_id=first.run_id, phase="aborted")
        assert engine.cancelled == [(command.run_id, "user_requested")]
        assert engine.pending_commands() == 0
        assert not router.is_busy(SESSION)


async def test_bridge_answers_unavailable_when_no_router_runs(bus: Bus) -> None:
    context, engine = runtime(bus)
    assert isinstance(await submit_via_bridge(context.capabilities, request("x")), Unavailable)
    async with Router(bus=bus, context=context, config=FAST):
        receipt = await submit_via_bridge(context.capabilities, request("x"))
        assert not isinstance(receipt, Unavailable)
        assert receipt.status == "started"
        engine.complete((await engine.next_command()).run_id)
    outcome = await submit_via_bridge(context.capabilities, request("x"))
    assert isinstance(outcome, Unavailable)
    assert outcome.reason == "no router is registered on this runtime"


async def test_model_and_images_of_the_request_reach_the_command(bus: Bus) -> None:
    context, engine = runtime(bus)
    image = {"type": "image", "mime_type": "image/png", "data": "aGk="}
    async with Router(bus=bus, context=context, config=FAST) as router:
        await router.submit(request("look", model="offline:vision", images=[image]))
        command = await engine.next_command()
        assert command.images == (image,)
        assert command.model == "offline:vision"
        assert "model" not in command.meta
        engine.complete(command.run_id)
        await router.submit(request("plain"))
        plain = await engine.next_command()
        assert plain.images == ()
        assert "model" not in plain.meta
        engine.complete(plain.run_id)


async def test_queue_outcomes_are_typed_payloads(bus: Bus) -> None:
    context, engine = runtime(bus, steer="reject")
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, config=FAST) as router:
        await router.submit(request("task"))
        command = await engine.next_command()
        s = await router.submit(request("more", "steer"))
        event = await watcher.until("queue_outcome", run_id=s.run_id)
        assert isinstance(event.payload, QueueOutcome)
        assert event.payload == QueueOutcome(
            run_id=s.run_id,
            session_key=SESSION,
            outcome=QueueOutcomeKind.FALLBACK_QUEUED,
            mode="followup",
            position=0,
            reason=event.payload.reason,
        )
        assert engine.steer_attempts == [(command.run_id, "more")]
        engine.complete(command.run_id)
        engine.complete((await engine.next_command()).run_id)
        await watcher.until("run_phase_changed", run_id=s.run_id, phase="completed")


async def test_overflow_of_a_runs_events_is_a_typed_notice_and_the_completion_arrives(
    bus: Bus,
) -> None:
    context, engine = runtime(bus)
    watcher = Watcher(bus, SESSION)
    config = RouterConfig(idle_timeout_ms=None, liveness_interval_ms=None, run_event_buffer=4)
    async with Router(bus=bus, context=context, config=config) as router:
        receipt = await router.submit(request("chatty"))
        command = await engine.next_command()
        engine.started(command.run_id)
        for i in range(10):  # no yield: the router's 4-entry subscription overflows
            engine.delta(command.run_id, f"d{i}")
        engine.complete(command.run_id, answer="all of it")
        notice = await watcher.until("run_events_overflow", run_id=receipt.run_id)
        assert notice.payload == RunEventsOverflow(run_id=receipt.run_id, session_key=SESSION)
        done = await watcher.until("run_completed", run_id=receipt.run_id)
        assert done.payload.completed.answer == "all of it"
        await watcher.until("run_phase_changed", run_id=receipt.run_id, phase="completed")


async def test_bad_requests_are_rejected_with_clear_errors(bus: Bus) -> None:
    from lemon_router import InvalidRunRequestError, InvalidSessionKeyError

    context, _ = runtime(bus)
    async with Router(bus=bus, context=context, config=FAST) as router:
        with pytest.raises(InvalidSessionKeyError, match="peer_kind 'pal'"):
            await router.submit(request("x", session_key="agent:a:tg:b:pal:1"))
        with pytest.raises(InvalidRunRequestError, match="does not match the session key's agent"):
            await router.submit(request("x", session_key="agent:a:main", agent_id="b"))
        with pytest.raises(InvalidRunRequestError, match=r"meta\.images.*RunRequest\.images"):
            await router.submit(request("x", meta={"images": ["cat.png"]}))
        with pytest.raises(InvalidRunRequestError, match=r"meta\.model.*RunRequest\.model"):
            await router.submit(request("x", meta={"model": "offline:x"}))


async def test_stopping_the_router_ends_every_run_with_a_completion(bus: Bus) -> None:
    context, engine = runtime(bus)
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, config=FAST) as router:
        first = await router.submit(request("a"))
        await engine.next_command()
        queued = await router.submit(request("b"))
    await watcher.until("run_phase_changed", run_id=queued.run_id, phase="aborted")
    done = await watcher.until("run_completed", run_id=first.run_id)
    assert done.payload.completed.synthetic is True
    await watcher.until("run_phase_changed", run_id=first.run_id, phase="aborted")
    assert len(watcher.completions()) == 1
    assert not router.running()


@pytest.mark.parametrize("steer", ["accept", "reject"])
@pytest.mark.parametrize(
    "mode", ["collect", "followup", "steer", "steer_backlog", "redirect", "interrupt"]
)
async def test_a_burst_of_20_to_a_busy_session_loses_nothing(
    bus: Bus, mode: str, steer: str
) -> None:
    context, engine = runtime(bus, steer=steer)
    clock = ManualClock()
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, config=FAST, clock=clock) as router:
        first = await router.submit(request("m-first"))
        receipts = [first]
        command = await engine.next_command()
        for i in range(20):
            receipts.append(await router.submit(request(f"m{i}", mode)))
            clock.advance(10)
        ran: list[str] = []
        texts: list[str] = []
        while True:
            assert engine.live <= {command.run_id}, "at most one active run"
            if command.run_id in engine.live:
                engine.complete(command.run_id)
            else:
                assert mode == "interrupt"  # the first run was cancelled by the interrupts
            ran.append(command.run_id)
            texts.extend(command.prompt.split("\n"))
            await watcher.until_terminal(command.run_id)
            if not router.is_busy(SESSION) and engine.pending_commands() == 0:
                break
            command = await engine.next_command()
        steered = [text for _, text in engine.steered]
        outcomes = {
            e.payload.run_id: e.payload.outcome
            for e in watcher.drain()
            if e.type == "queue_outcome"
        }
        for receipt in receipts:
            accounted = [
                receipt.run_id in ran,
                outcomes.get(receipt.run_id) in ("merged", "steered"),
                receipt.status == "rejected",
            ]
            assert accounted.count(True) == 1, (receipt, outcomes.get(receipt.run_id))
        # Every message text reached exactly one run or one live run.
        expected = ["m-first"] + [f"m{i}" for i in range(20)]
        assert sorted(texts + steered) == sorted(expected)
        if mode in ("collect", "interrupt", "steer_backlog") and steer == "reject":
            assert len(ran) == 21
        if mode == "collect":
            assert texts == expected  # FIFO
        assert router.statistics().conversations == 0


async def test_a_busy_session_keeps_its_conversation_when_a_resume_token_appears(
    bus: Bus, chat_state: ChatStateStore
) -> None:
    context, engine = runtime(bus)
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, chat_state=chat_state, config=FAST) as router:
        first = await router.submit(request("one"))
        c1 = await engine.next_command()
        second = await router.submit(request("two"))
        # The engine runtime (the gateway) writes the chat state before it completes.
        await chat_state.put(SESSION, ResumeToken.native("native-9"))
        engine.complete(c1.run_id, resume="native-9")
        c2 = await engine.next_command()
        assert c2.run_id == second.run_id
        # Readback at start time: "two" continues the native session "one" created.
        assert c2.resume == ResumeToken.native("native-9")
        third = await router.submit(request("three"))
        # The session is still busy: "three" joins the same queue, not a new conversation.
        assert third.conversation_key == first.conversation_key == f"session:{SESSION}"
        assert third.status == "queued"
        engine.complete(c2.run_id, resume="native-9")
        c3 = await engine.next_command()
        assert c3.run_id == third.run_id
        engine.complete(c3.run_id)
        await watcher.until("run_phase_changed", run_id=third.run_id, phase="completed")
        fourth = await router.submit(request("four"))
        assert fourth.conversation_key == "resume:lemon:native-9"
        engine.complete((await engine.next_command()).run_id)
        await watcher.until("run_phase_changed", run_id=fourth.run_id, phase="completed")


async def test_the_command_says_whether_its_resume_token_was_looked_up_or_asked_for(
    bus: Bus, chat_state: ChatStateStore
) -> None:
    context, engine = runtime(bus)
    await chat_state.put(SESSION, ResumeToken.native("s1"))
    async with Router(bus=bus, context=context, chat_state=chat_state, config=FAST) as router:
        watcher = Watcher(bus, SESSION)
        await router.submit(request("looked up"))
        command = await engine.next_command()
        assert command.resume == ResumeToken.native("s1")
        assert command.resume_mode == "auto"
        engine.complete(command.run_id)
        await watcher.until("run_phase_changed", run_id=command.run_id, phase="completed")

        await router.submit(request("asked for", resume=ResumeToken.native("s2")))
        command = await engine.next_command()
        assert command.resume == ResumeToken.native("s2")
        assert command.resume_mode == "explicit"
        engine.complete(command.run_id)
        await watcher.until("run_phase_changed", run_id=command.run_id, phase="completed")


@pytest.mark.parametrize("code", sorted(NOT_RETRYABLE))
async def test_a_deterministic_failure_is_not_retried(bus: Bus, code: ErrorCode) -> None:
    # Decided by the typed code alone: the error sentence says nothing the router reads.
    context, engine = runtime(bus)
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, config=FAST) as router:
        receipt = await router.submit(request("do it"))
        command = await engine.next_command()
        engine.complete(command.run_id, ok=False, answer="", error="timeout", error_code=code)
        await watcher.until("run_phase_changed", run_id=receipt.run_id, phase="failed")
        assert router.statistics().zero_answer_retries == 0
        assert engine.pending_commands() == 0
        assert len(watcher.completions()) == 1


async def test_a_crashed_task_never_cancels_another_sessions_run(bus: Bus) -> None:
    # The router's tasks belong to one supervisor, not a TaskGroup: a task that crashes is
    # logged and counted, and the other sessions' runs go on to their own completion.
    context, engine = runtime(bus)
    other = "agent:other:main"
    watcher = Watcher(bus, other)
    async with Router(bus=bus, context=context, config=FAST) as router:
        receipt = await router.submit(request("keep going", session_key=other))
        command = await engine.next_command()
        crashed = asyncio.Event()

        async def crash() -> None:
            crashed.set()
            raise RuntimeError("a session's task blew up")

        task = router._spawn(crash(), "crash:test")
        await crashed.wait()
        with pytest.raises(RuntimeError):
            await task
        await asyncio.sleep(0)  # one loop turn: the task's done callbacks run
        assert router.statistics().task_crashes == 1
        assert router.is_busy(other)  # untouched by the crash
        engine.started(command.run_id)
        engine.complete(command.run_id, answer="still here")
        done = await watcher.until("run_completed", run_id=receipt.run_id)
        assert done.payload.completed.answer == "still here"
        assert done.payload.completed.ok


@pytest.mark.parametrize(
    "kind", ["file_change", "command", "tool", "subagent", "web_search", "fetch"]
)
async def test_a_failed_run_whose_tool_already_ran_is_not_retried(bus: Bus, kind: str) -> None:
    # Retrying would run the tool's side effects a second time (a fetched URL may carry data
    # out or change something on the server, as much as a command can).
    context, engine = runtime(bus)
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, config=FAST) as router:
        receipt = await router.submit(request("write the file"))
        command = await engine.next_command()
        engine.started(command.run_id)
        engine.action(command.run_id, "call-1", kind=kind, title="the effect")
        engine.complete(command.run_id, ok=False, answer="", error="connection reset")
        await watcher.until("run_phase_changed", run_id=receipt.run_id, phase="failed")
        assert router.statistics().zero_answer_retries == 0
        assert engine.pending_commands() == 0


async def test_a_rate_limited_run_is_not_retried_at_once(bus: Bus) -> None:
    # The provider layer already retried it honouring Retry-After; the router does not hammer.
    context, engine = runtime(bus)
    watcher = Watcher(bus, SESSION)
    async with Router(bus=bus, context=context, config=FAST) as router:
        receipt = await router.submit(request("hi"))
        command = await engine.next_command()
        engine.complete(
            command.run_id, ok=False, answer="", error="429", error_code=ErrorCode.RATE_LIMITED
        )
        await watcher.until("run_phase_changed", run_id=receipt.run_id, phase="failed")
        assert router.statistics().zero_answer_retries == 0


async def test_every_command_carries_the_authority_the_router_bound(
    bus: Bus, tmp_path: Path
) -> None:
    context, engine = runtime(bus)
    policy = ToolPolicy(require_approval=frozenset({"bash"}))
    async with Router(bus=bus, context=context, config=FAST) as router:
        await router.submit(request("hi", cwd=str(tmp_path), tool_policy=policy))
        command = await engine.next_command()
        bound = command.context
        assert bound is not None
        assert (bound.run_id, bound.origin, bound.depth) == (command.run_id, "control_plane", 0)
        assert bound.principal.id == SESSION
        assert bound.workspace == str(tmp_path)
        assert bound.tool_policy == policy
        engine.complete(command.run_id)


async def test_a_steer_accepted_amid_a_flood_of_session_events_says_accepted(bus: Bus) -> None:
    # The port hears a steer's outcome from the router itself: 3,000 events on the session's
    # topic between the steer and its answer cannot make it guess "queued".
    from lemon_core.bus import session_topic
    from lemon_core.events import Delta
    from lemon_router import RouterSessionPort

    context, engine = runtime(bus, steer="accept")
    original = engine.steer

    def flooding_steer(run_id: str, text: str) -> bool:
        for seq in range(1, 3001):
            bus.broadcast_event(
                session_topic(SESSION), "delta", Delta(run_id=run_id, seq=seq, text="x")
            )
        return original(run_id, text)

    engine.steer = flooding_steer  # type: ignore[method-assign]
    async with Router(bus=bus, context=context, config=FAST) as router:
        port = RouterSessionPort(router)
        await router.submit(request("long answer"))
        command = await engine.next_command()
        engine.started(command.run_id)
        result = await port.steer(SESSION, "and the tests")
        assert result.status == "accepted", result
        engine.complete(command.run_id)


async def test_a_queue_outcome_after_the_bus_closed_is_skipped_not_raised() -> None:
    # Outcome publication uses the same running() guard as phase publication: cancelling a
    # queued message while the bus is already closed (shutdown order) raises nothing.
    bus = Bus(validation="raise")
    context, engine = runtime(bus)
    async with Router(bus=bus, context=context, config=FAST) as router:
        await router.submit(request("first"))
        queued = await router.submit(request("second"))
        assert queued.status == "queued"
        await engine.next_command()
        bus.close()
        assert router.abort_run(queued.run_id) is True
