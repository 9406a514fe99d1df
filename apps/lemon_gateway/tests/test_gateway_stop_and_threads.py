"""stop() with no grace does not wait on a stubborn executor; cancel from other threads."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from lemon_core.bus import Bus
from lemon_core.events import ErrorCode
from lemon_core.execution import ExecutionJob, ExecutionResult, ExecutionSink
from lemon_gateway import Gateway, GatewayConfig, WrongThreadError
from lemon_platform_test.executor import Gate, Script, ScriptedExecutor
from lemon_platform_test.gateway_kit import RunEvents, command, until


class _IgnoresCancellation:
    """An executor whose execution swallows every cancellation until its gate opens."""

    def __init__(self) -> None:
        self.gate = Gate("stubborn")

    async def prepare(self, job: ExecutionJob) -> _IgnoresCancellation:
        return self

    async def execute(self, sink: ExecutionSink) -> ExecutionResult:
        while not self.gate.is_open:
            with contextlib.suppress(asyncio.CancelledError):
                await self.gate.pass_through()
        return ExecutionResult(ok=True, answer="too late")


async def test_gateway_stop_with_zero_grace_does_not_wait_on_a_stubborn_executor() -> None:
    bus = Bus()
    executor = _IgnoresCancellation()
    gw = Gateway(bus=bus, executor=executor, config=GatewayConfig(shutdown_grace_s=0))  # type: ignore[arg-type]  # structural
    await gw.start()
    events = RunEvents(bus).watch("r1")
    handle = gw.submit_execution(command("r1"))
    await executor.gate.reached()
    stopping = asyncio.ensure_future(gw.stop())
    done, _ = await asyncio.wait({stopping}, timeout=5)  # a guard: the fix returns at once
    if not done:
        executor.gate.open()  # let the test end cleanly, then fail it
        await stopping
        pytest.fail("stop() with shutdown_grace_s=0 waited on an executor ignoring cancellation")
    completion = await handle
    assert completion.ok is False
    assert completion.error == "gateway_shutdown: executor did not stop"
    assert completion.error_code is ErrorCode.CANCELLED
    assert completion.synthetic is True
    assert events.completions("r1") == [completion]
    # The stubborn task is still running; when its executor returns, nothing more happens.
    assert gw.statistics().tasks == 1
    executor.gate.open()
    await until(lambda: gw.statistics().tasks == 0)
    assert events.completions("r1") == [completion]
    assert gw.statistics().task_crashes == 0


async def test_gateway_cancel_from_another_thread_raises_and_the_twin_cancels() -> None:
    gate = Gate()
    executor = ScriptedExecutor().script_run("r1", Script().gate(gate).complete(answer="no"))
    async with Gateway(bus=Bus(), executor=executor) as gw:
        handle = gw.submit_execution(command("r1"))
        await gate.reached()
        with pytest.raises(WrongThreadError, match="cancel_threadsafe"):
            await asyncio.to_thread(gw.cancel, "r1")
        assert gw.is_live("r1")  # the refused call changed nothing
        assert await asyncio.to_thread(lambda: gw.cancel_threadsafe("r1", "from a thread").result())
        assert await asyncio.to_thread(lambda: gw.cancel_threadsafe("nope").result()) is False
        completion = await handle
        assert (completion.ok, completion.error) == (False, "from a thread")
        # On the loop itself the twin answers at once.
        assert gw.cancel_threadsafe("r1").result() is False


async def test_gateway_cancel_threadsafe_before_start_answers_false() -> None:
    gw = Gateway(bus=Bus(), executor=ScriptedExecutor())
    assert await asyncio.to_thread(lambda: gw.cancel_threadsafe("r1").result()) is False


async def test_gateway_cancel_on_another_threads_event_loop_raises() -> None:
    gate = Gate()
    executor = ScriptedExecutor().script_run("r1", Script().gate(gate).complete(answer="ok"))
    async with Gateway(bus=Bus(), executor=executor) as gw:
        handle = gw.submit_execution(command("r1"))
        await gate.reached()

        async def cancel_there() -> bool:
            return gw.cancel("r1")

        # A running loop that is not the gateway's is "another thread" too.
        with pytest.raises(WrongThreadError, match="cancel_threadsafe"):
            await asyncio.to_thread(asyncio.run, cancel_there())
        assert gw.is_live("r1")
        gate.open()
        assert (await handle).ok is True
