"""Runs of one conversation share their worker's task: cancel by run id stays exact."""

from __future__ import annotations

import asyncio
from typing import Any

from lemon_core.bus import Bus
from lemon_core.execution import (
    ExecutionJob,
    ExecutionResult,
    ExecutionSink,
    PreparedExecution,
)
from lemon_gateway import Gateway
from lemon_platform_test.gateway_kit import command


class _SelfCancelling:
    """Runs ``victim`` and ``returns`` cancel themselves from inside their own execution
    (``victim`` then waits, ``returns`` returns at once); every other run suspends once and
    completes."""

    def __init__(self) -> None:
        self.gateway: Gateway | None = None
        self.executed: list[str] = []

    async def prepare(self, job: ExecutionJob) -> PreparedExecution:
        return _Prepared(self, job.run_id)


class _Prepared:
    def __init__(self, owner: _SelfCancelling, run_id: str) -> None:
        self.owner = owner
        self.run_id = run_id

    async def execute(self, sink: ExecutionSink) -> ExecutionResult:
        self.owner.executed.append(self.run_id)
        if self.run_id in ("victim", "returns"):
            assert self.owner.gateway is not None
            assert self.owner.gateway.cancel(self.run_id, "self")
            if self.run_id == "returns":  # returns without suspending: the cancel still wins
                return ExecutionResult(ok=True, answer=self.run_id)
            await asyncio.Event().wait()  # only the cancellation ends this
        await asyncio.sleep(0)
        return ExecutionResult(ok=True, answer=self.run_id)


async def test_gateway_self_cancel_hits_only_that_run_not_the_next_in_its_conversation() -> None:
    executor = _SelfCancelling()
    async with Gateway(bus=Bus(), executor=executor) as gw:
        executor.gateway = gw
        victim = gw.submit_execution(command("victim", session="s"))
        nxt = gw.submit_execution(command("next", session="s"))  # same conversation
        c_victim = await asyncio.wait_for(victim.completion(), 10)
        c_next = await asyncio.wait_for(nxt.completion(), 10)
    assert (c_victim.ok, c_victim.error) == (False, "self")
    assert (c_next.ok, c_next.answer) == (True, "next")
    assert executor.executed == ["victim", "next"]


async def test_gateway_self_cancel_without_suspending_does_not_leak_into_the_next_run() -> None:
    executor = _SelfCancelling()
    async with Gateway(bus=Bus(), executor=executor) as gw:
        executor.gateway = gw
        returns = gw.submit_execution(command("returns", session="s"))
        nxt = gw.submit_execution(command("next", session="s"))  # same conversation
        c_returns = await asyncio.wait_for(returns.completion(), 10)
        c_next = await asyncio.wait_for(nxt.completion(), 10)
    assert (c_returns.ok, c_returns.error) == (False, "self")
    assert (c_next.ok, c_next.answer) == (True, "next")


async def test_gateway_cancel_of_a_completed_run_does_not_reach_the_next_run() -> None:
    executor = _SelfCancelling()
    async with Gateway(bus=Bus(), executor=executor) as gw:
        executor.gateway = gw
        first = gw.submit_execution(command("first", session="s"))
        second = gw.submit_execution(command("second", session="s"))
        c_first = await first
        assert not gw.cancel("first")  # completed: nothing to cancel
        c_second = await second
    assert (c_first.ok, c_second.ok) == (True, True)


async def test_gateway_many_queued_runs_of_one_conversation_all_complete_in_order() -> None:
    order: list[str] = []

    class _Instant:
        async def prepare(self, job: ExecutionJob) -> Any:
            order.append(job.run_id)
            return self

        async def execute(self, sink: ExecutionSink) -> ExecutionResult:
            return ExecutionResult(ok=True)

    async with Gateway(bus=Bus(), executor=_Instant()) as gw:
        handles = [gw.submit_execution(command(f"r{i}", session="s")) for i in range(100)]
        completions = [await h for h in handles]
        assert gw.statistics().tasks == 0
        assert gw.statistics().workers == 0
    assert all(c.ok for c in completions)
    assert order == [f"r{i}" for i in range(100)]
