"""End to end: Router -> real Gateway (EngineRuntime) -> the scripted test executor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from lemon_core.bus import Bus, Delivery, session_topic
from lemon_core.events import Event
from lemon_core.execution import ResumeToken, RunRequest, RuntimeContext
from lemon_core.store import ChatStateStore
from lemon_gateway import Gateway
from lemon_infra import SQLiteStore
from lemon_platform_test.executor import Gate, Script, ScriptedExecutor
from lemon_router import Router, RouterConfig

SESSION = "agent:default:main"
CONFIG = RouterConfig(idle_timeout_ms=None)


class Session:
    """A subscriber of session:<key> that waits for events by run id."""

    def __init__(self, bus: Bus, key: str = SESSION) -> None:
        self.delivery = Delivery(max_entries=10_000)
        self.sub = bus.subscribe(session_topic(key), delivery=self.delivery)
        self.seen: list[Event] = []

    async def terminal(self, run_id: str) -> str:
        while True:
            for e in self.seen:
                if (
                    e.type == "run_phase_changed"
                    and e.payload.run_id == run_id
                    and e.payload.phase.terminal
                ):
                    return str(e.payload.phase.value)
            item = await self.delivery.get()
            assert isinstance(item, Event)
            self.seen.append(item)

    def completions(self, run_id: str) -> list[Event]:
        return [e for e in self.seen if e.type == "run_completed" and e.meta["run_id"] == run_id]


@pytest.fixture
async def bus() -> AsyncIterator[Bus]:
    async with Bus(validation="raise") as b:
        yield b


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with await SQLiteStore.open(tmp_path / "lemon.sqlite3") as s:
        yield s


def req(prompt: str, mode: str = "collect", **kw: Any) -> RunRequest:
    return RunRequest(
        origin="control_plane",
        session_key=SESSION,
        prompt=prompt,
        queue_mode=mode,  # type: ignore[arg-type]  # valid modes only
        **kw,
    )


async def test_a_chat_resumes_the_same_native_session(
    bus: Bus, store: SQLiteStore, tmp_path: Path
) -> None:
    context = RuntimeContext()
    executor = ScriptedExecutor()
    session = Session(bus)
    async with (
        Gateway(bus=bus, executor=executor, store=store, runtime=context),
        Router(bus=bus, context=context, chat_state=ChatStateStore(store), config=CONFIG) as router,
    ):
        first = await router.submit(req("hello", cwd=str(tmp_path)))
        assert await session.terminal(first.run_id) == "completed"
        (done,) = session.completions(first.run_id)
        assert done.payload.completed.answer == "Echo: hello"
        assert [e.type for e in session.seen if e.meta.get("run_id") == first.run_id][:1] == [
            "run_phase_changed"
        ]
        assert {"run_started", "delta", "run_completed"} <= {e.type for e in session.seen}
        second = await router.submit(req("and again", cwd=str(tmp_path)))
        assert second.conversation_key == f"resume:lemon:{first.run_id}"
        assert await session.terminal(second.run_id) == "completed"
        assert executor.records[second.run_id].job.resume == ResumeToken.native(first.run_id)


@pytest.mark.parametrize("mode", ["collect", "followup", "steer", "interrupt"])
async def test_a_burst_of_20_through_the_gateway_loses_nothing(
    bus: Bus, store: SQLiteStore, mode: str
) -> None:
    context = RuntimeContext()
    gate = Gate()
    executor = ScriptedExecutor()
    executor.script_prompt("busy", Script().delta("working").gate(gate).complete(answer="ok"))
    session = Session(bus)
    async with (
        Gateway(bus=bus, executor=executor, store=store, runtime=context),
        Router(bus=bus, context=context, chat_state=ChatStateStore(store), config=CONFIG) as router,
    ):
        first = await router.submit(req("busy"))
        await gate.reached()
        burst = [await router.submit(req(f"m{i}", mode)) for i in range(20)]
        gate.open()
        outcomes = [await session.terminal(r.run_id) for r in [first, *burst]]
        prompts = [executor.records[rid].job.prompt for rid in executor.order]
        texts = [line for p in prompts for line in p.split("\n")]
        assert len(set(executor.order)) == len(executor.order)
        if mode == "interrupt":
            # Each interrupt cancels whatever runs when it arrives: every message became a
            # run that either completed or was aborted by a later interrupt; the last completes.
            assert outcomes[0] == "aborted"
            assert set(outcomes) <= {"completed", "aborted"}
            assert outcomes[-1] == "completed"
            assert executor.records[first.run_id].cancelled
        else:
            assert sorted(t for t in texts if t != "busy") == sorted(f"m{i}" for i in range(20))
        if mode == "collect":
            assert texts == ["busy"] + [f"m{i}" for i in range(20)]
            assert outcomes == ["completed"] * 21
        assert not router.is_busy(SESSION)


async def test_interrupt_cancels_and_runs_next(bus: Bus, store: SQLiteStore) -> None:
    context = RuntimeContext()
    gate = Gate()
    executor = ScriptedExecutor()
    executor.script_prompt("long", Script().delta("partial").gate(gate).complete(answer="x"))
    session = Session(bus)
    async with (
        Gateway(bus=bus, executor=executor, store=store, runtime=context),
        Router(bus=bus, context=context, config=CONFIG) as router,
    ):
        first = await router.submit(req("long"))
        await gate.reached()
        later = await router.submit(req("later"))
        interrupt = await router.submit(req("now", "interrupt"))
        assert await session.terminal(first.run_id) == "aborted"
        assert await session.terminal(interrupt.run_id) == "completed"
        assert await session.terminal(later.run_id) == "completed"
        assert executor.order == [first.run_id, interrupt.run_id, later.run_id]
        assert len(session.completions(first.run_id)) == 1


async def test_steer_on_the_gateway_falls_back_to_a_followup(bus: Bus, store: SQLiteStore) -> None:
    context = RuntimeContext()
    gate = Gate()
    executor = ScriptedExecutor()
    executor.script_prompt("long", Script().gate(gate).complete(answer="x"))
    session = Session(bus)
    async with (
        Gateway(bus=bus, executor=executor, store=store, runtime=context),
        Router(bus=bus, context=context, config=CONFIG) as router,
    ):
        first = await router.submit(req("long"))
        await gate.reached()
        steer = await router.submit(req("look at tests too", "steer"))
        assert steer.status == "dispatched_to_active"
        while not any(
            e.type == "queue_outcome" and e.payload.run_id == steer.run_id for e in session.seen
        ):
            item = await session.delivery.get()
            session.seen.append(item)
        gate.open()
        assert await session.terminal(first.run_id) == "completed"
        assert await session.terminal(steer.run_id) == "completed"
        assert executor.order == [first.run_id, steer.run_id]


async def test_steer_taken_by_a_steerable_execution_on_the_gateway(
    bus: Bus, store: SQLiteStore
) -> None:
    context = RuntimeContext()
    gate = Gate()
    executor = ScriptedExecutor()
    executor.script_prompt("long", Script().steering("accept").gate(gate).echo_steers().complete())
    session = Session(bus)
    async with (
        Gateway(bus=bus, executor=executor, store=store, runtime=context),
        Router(bus=bus, context=context, config=CONFIG) as router,
    ):
        first = await router.submit(req("long"))
        await gate.reached()
        steer = await router.submit(req("look at tests too", "redirect"))
        assert steer.status == "dispatched_to_active"
        assert await session.terminal(steer.run_id) == "completed"  # settled as steered
        while not any(e.type == "queue_outcome" for e in session.seen):
            session.seen.append(await session.delivery.get())
        outcomes = [e.payload for e in session.seen if e.type == "queue_outcome"]
        assert [(o.run_id, o.outcome.value, o.into_run_id) for o in outcomes] == [
            (steer.run_id, "steered", first.run_id)
        ]
        gate.open()
        assert await session.terminal(first.run_id) == "completed"
        (done,) = session.completions(first.run_id)
        assert done.payload.completed.answer == "steered: look at tests too"
        assert executor.order == [first.run_id]


async def test_gateway_gone_mid_stream_gives_one_completion_and_frees_the_session(
    bus: Bus, store: SQLiteStore
) -> None:
    context = RuntimeContext()
    gate = Gate()
    executor = ScriptedExecutor()
    executor.script_prompt("long", Script().delta("partial").gate(gate).complete(answer="x"))
    session = Session(bus)
    config = RouterConfig(idle_timeout_ms=None, submit_timeout_ms=50)
    async with Router(bus=bus, context=context, config=config) as router:
        gateway = Gateway(bus=bus, executor=executor, store=store, runtime=context)
        await gateway.start()
        first = await router.submit(req("long"))
        await gate.reached()
        queued = await router.submit(req("next"))
        await gateway.stop()  # the runtime goes away while the run streams
        assert await session.terminal(first.run_id) == "failed"
        (done,) = session.completions(first.run_id)
        assert done.payload.completed.synthetic is True
        # The queued message cannot reach a runtime: it fails visibly instead of hanging.
        assert await session.terminal(queued.run_id) == "failed"
        assert len(session.completions(queued.run_id)) == 1
        assert not router.is_busy(SESSION)
        assert router.statistics().zero_answer_retries == 0  # a shutdown is not retried


async def test_a_crash_without_answer_is_retried_once_through_the_gateway(
    bus: Bus, store: SQLiteStore
) -> None:
    context = RuntimeContext()
    executor = ScriptedExecutor()
    executor.script_run("first", Script().raise_error("worker killed"))
    session = Session(bus)
    async with (
        Gateway(bus=bus, executor=executor, store=store, runtime=context),
        Router(bus=bus, context=context, config=CONFIG) as router,
    ):
        first = await router.submit(req("fragile", run_id="first"))
        assert await session.terminal(first.run_id) == "failed"
        retry_id = router.active_run(SESSION)
        assert retry_id is not None
        assert retry_id != first.run_id
        assert await session.terminal(retry_id) == "completed"
        assert executor.order == [first.run_id, retry_id]
        # The retry re-sends the user's words unchanged and says it is a retry.
        assert executor.records[retry_id].job.prompt == "fragile"
        assert executor.records[retry_id].job.retry_of == first.run_id
        (done,) = session.completions(retry_id)
        assert done.payload.completed.answer == "Echo: fragile"
        assert done.payload.completed.retry_of == first.run_id
        assert router.statistics().zero_answer_retries == 1


async def test_a_completion_too_large_for_the_runs_buffer_is_read_from_its_owner(
    bus: Bus, store: SQLiteStore
) -> None:
    # A 1.2 MB answer does not fit the router's per-message bound, nor the compact terminal
    # notice: the router reads the real completion from the gateway, answer and resume kept.
    context = RuntimeContext()
    big = "x" * 1_200_000
    executor = ScriptedExecutor()
    executor.script_prompt(
        "big", Script().delta("start").complete(answer=big, resume=ResumeToken.native("n-big"))
    )
    delivery = Delivery(max_entries=100, max_message_bytes=4_000_000)
    bus.subscribe(session_topic(SESSION), delivery=delivery)
    async with (
        Gateway(bus=bus, executor=executor, store=store, runtime=context),
        Router(bus=bus, context=context, config=CONFIG) as router,
    ):
        receipt = await router.submit(req("big"))
        while True:
            item = await delivery.get()
            if isinstance(item, Event) and item.type == "run_completed":
                break
        done = item.payload.completed
        assert done.run_id == receipt.run_id
        assert (done.ok, done.synthetic, done.error_code) == (True, False, None)
        assert done.answer == big
        assert done.resume == {"engine": "lemon", "value": "n-big"}
        assert router.statistics().synthetic_completions == 0


async def test_after_an_overflow_of_the_runs_buffer_the_real_completion_arrives(
    bus: Bus, store: SQLiteStore
) -> None:
    # 8 entries, 20 deltas and the completion: the session hears the overflow notice and then
    # the run's real completion, never a synthetic failure.
    context = RuntimeContext()
    executor = ScriptedExecutor()
    chunks = [f"d{i} " for i in range(20)]
    executor.script_prompt("chatty", Script().delta(*chunks).complete(answer="".join(chunks)))
    session = Session(bus)
    config = RouterConfig(idle_timeout_ms=None, run_event_buffer=8)
    async with (
        Gateway(bus=bus, executor=executor, store=store, runtime=context),
        Router(bus=bus, context=context, config=config) as router,
    ):
        receipt = await router.submit(req("chatty"))
        assert await session.terminal(receipt.run_id) == "completed"
        (done,) = session.completions(receipt.run_id)
        completed = done.payload.completed
        assert (completed.ok, completed.synthetic) == (True, False)
        assert completed.answer == "".join(chunks)
        assert [e.type for e in session.seen].count("run_events_overflow") >= 1
        assert router.statistics().synthetic_completions == 0
