"""Cancel by exact run id: queued, waiting, launching, streaming, completed, twice."""

from __future__ import annotations

import contextlib

from lemon_core.bus import Bus
from lemon_core.events import ErrorCode
from lemon_core.execution import ResumeToken
from lemon_gateway import Gateway, GatewayConfig, RunState
from lemon_platform_test.executor import Gate, Script, ScriptedExecutor
from lemon_platform_test.gateway_kit import RunEvents, command, until


async def test_gateway_cancel_before_launch_for_queued_and_slot_waiting_runs() -> None:
    bus = Bus()
    gate = Gate()
    executor = ScriptedExecutor().script_run("a1", Script().gate(gate).complete(answer="a1"))
    async with Gateway(
        bus=bus, executor=executor, config=GatewayConfig(max_concurrent_runs=1)
    ) as gw:
        events = RunEvents(bus).watch("a1", "a2", "b1")
        a1 = gw.submit_execution(command("a1", session="a"))
        a2 = gw.submit_execution(command("a2", session="a"))  # queued behind a1 (same key)
        b1 = gw.submit_execution(command("b1", session="b"))  # waits for the only slot
        await gate.reached()
        await until(lambda: gw.debug_snapshot()["scheduler"]["waiting"] == 1)
        states = {r["run_id"]: r["state"] for r in gw.debug_snapshot()["runs"]}
        assert states == {"a1": "running", "a2": "queued", "b1": "waiting_slot"}
        assert gw.cancel("a2")
        assert gw.cancel("b1", "stop it")
        c_a2, c_b1 = await a2, await b1
        assert (c_a2.ok, c_a2.error) == (False, "user_requested")
        assert (c_b1.ok, c_b1.error) == (False, "stop it")
        assert c_a2.synthetic is True
        assert c_a2.error_code is ErrorCode.CANCELLED
        assert events.types("a2") == ["run_completed"]
        assert events.types("b1") == ["run_completed"]
        assert gw.debug_snapshot()["scheduler"]["waiting"] == 0
        gate.open()
        assert (await a1).answer == "a1"
        assert set(executor.records) == {"a1"}
        stats = gw.statistics()
        assert stats.runs.cancelled == 2
        assert stats.workers == 0


async def test_gateway_cancel_during_launch() -> None:
    bus = Bus()
    gate = Gate()
    executor = ScriptedExecutor().script_run("r1", Script().block_launch(gate).complete())
    async with Gateway(bus=bus, executor=executor) as gw:
        events = RunEvents(bus).watch("r1")
        handle = gw.submit_execution(command("r1"))
        await gate.reached()
        assert gw.debug_snapshot()["runs"][0]["state"] == RunState.LAUNCHING.value
        assert gw.cancel("r1")
        completion = await handle
        assert (completion.ok, completion.error) == (False, "user_requested")
        assert events.types("r1") == ["run_started", "run_completed"]
        record = executor.record("r1")
        assert record.launch_attempts == 1
        assert not record.executed.is_set()
        stats = gw.statistics()
        assert (stats.slots.in_flight, stats.locks.held) == (0, 0)


async def test_gateway_cancel_during_streaming_keeps_partial_answer_and_resume() -> None:
    bus = Bus()
    gate = Gate()
    script = Script().started(resume=ResumeToken.native("s-9")).delta("par", "tial").gate(gate)
    executor = ScriptedExecutor().script_run("r1", script)
    async with Gateway(bus=bus, executor=executor) as gw:
        events = RunEvents(bus).watch("r1")
        handle = gw.submit_execution(command("r1"))
        await gate.reached()
        assert gw.cancel("r1", "interrupted")
        completion = await handle
        assert executor.record("r1").cancelled
        assert (completion.ok, completion.error) == (False, "interrupted")
        assert completion.answer == "partial"
        assert completion.resume == {"engine": "lemon", "value": "s-9"}
        assert events.types("r1") == ["run_started", "delta", "delta", "run_completed"]
        assert gw.chat_state is not None
        assert await gw.chat_state.resume_token("agent:test:main") == ResumeToken.native("s-9")


async def test_gateway_cancel_after_completion_and_twice_is_idempotent() -> None:
    bus = Bus()
    gate = Gate()
    executor = ScriptedExecutor().script_run("twice", Script().gate(gate).complete())
    async with Gateway(bus=bus, executor=executor) as gw:
        events = RunEvents(bus).watch("done", "twice")
        await gw.submit_execution(command("done"))
        assert gw.cancel("done") is False
        assert gw.cancel("never-submitted") is False
        handle = gw.submit_execution(command("twice", session="t"))
        await gate.reached()
        assert gw.cancel("twice", "first")
        assert gw.cancel("twice", "second")
        completion = await handle
        assert completion.error == "first"
        assert gw.cancel("twice", "third") is False
        assert len(events.completions("done")) == 1
        assert len(events.completions("twice")) == 1


async def test_gateway_cancel_of_an_executor_that_swallows_cancellation_still_completes() -> None:
    bus = Bus()

    class Stubborn:
        def __init__(self) -> None:
            self.gate = Gate()

        async def prepare(self, job: object) -> Stubborn:
            return self

        async def execute(self, sink: object) -> object:
            from lemon_core.execution import ExecutionResult

            # An executor that ignores cancellation.
            with contextlib.suppress(BaseException):
                await self.gate.pass_through()
            return ExecutionResult(ok=True, answer="ignored the cancel")

    executor = Stubborn()
    async with Gateway(bus=bus, executor=executor) as gw:  # type: ignore[arg-type]  # structural
        events = RunEvents(bus).watch("r1")
        handle = gw.submit_execution(command("r1"))
        await executor.gate.reached()
        gw.cancel("r1")
        completion = await handle
        assert (completion.ok, completion.error) == (False, "user_requested")
        assert len(events.completions("r1")) == 1


async def test_gateway_cancel_in_the_same_tick_as_submit_still_completes_once() -> None:
    bus = Bus()
    async with Gateway(bus=bus, executor=ScriptedExecutor()) as gw:
        events = RunEvents(bus).watch("r1", "r2")
        handle = gw.submit_execution(command("r1"))  # launched: its task has not run yet
        assert gw.cancel("r1")
        completion = await handle
        assert (completion.ok, completion.error) == (False, "user_requested")
        assert events.types("r1") == ["run_completed"]
        gw.submit_execution(command("r2", session="other"))
    # Stopping in the same tick as a submission also completes it exactly once.
    assert len(events.completions("r2")) == 1
    assert gw.statistics().runs.live == 0


async def test_gateway_cancel_matches_the_run_id_exactly() -> None:
    gate = Gate()
    executor = ScriptedExecutor().script_run("r1", Script().gate(gate).complete(answer="done"))
    async with Gateway(bus=Bus(), executor=executor) as gw:
        handle = gw.submit_execution(command("r1"))
        await gate.reached()
        for near in ("R1", " r1", "r1 ", "r1\n", "r", "r10", "", "\tr1"):
            assert gw.cancel(near) is False, repr(near)
            assert gw.is_live(near) is False, repr(near)
        assert gw.cancel(1) is False  # type: ignore[arg-type]  # not a string: not found
        assert gw.run_view("r1") is not None
        assert gw.run_view("r1").state == "running"  # type: ignore[union-attr]  # checked above
        gate.open()
        completion = await handle
    assert (completion.ok, completion.answer) == (True, "done")


async def test_gateway_cancel_of_a_completing_run_keeps_its_outcome() -> None:
    # The run is completing (its execution has returned) when it is cancelled: the answer it
    # produced is not replaced by a cancellation, and cancel does not claim a run it cannot
    # affect once the completion is out.
    gate = Gate()
    executor = ScriptedExecutor().script_run("r1", Script().delta("partial").gate(gate).complete())
    async with Gateway(bus=Bus(), executor=executor) as gw:
        handle = gw.submit_execution(command("r1"))
        await gate.reached()
        gate.open()
        completion = await handle
        assert gw.cancel("r1") is False
        assert gw.statistics().runs.cancelled == 0
    assert (completion.ok, completion.answer, completion.error_code) == (True, "partial", None)
