"""What a stop and a cancel do with a completing run's store writes.

A run that has its answer writes the session's resume state and its run history. A cancel
(or a graceful stop) that arrives while those writes are healthy and within their bound
(``store_timeout_s``) leaves them alone: the next message resumes the native session. Only a
write past its bound is abandoned (with a warning), and only the forced cancel after the
stop's grace interrupts a completing run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from lemon_core.bus import Bus
from lemon_core.execution import (
    ExecutionJob,
    ExecutionResult,
    ExecutionSink,
    PreparedExecution,
    ResumeToken,
)
from lemon_core.store import ChatStateStore, RunStore, Store
from lemon_gateway import Gateway, GatewayConfig, GatewayState
from lemon_infra import MemoryStore
from lemon_platform_test.executor import Script, ScriptedExecutor
from lemon_platform_test.gateway_kit import RunEvents, command, until

_NATIVE = ResumeToken.native("n1")
_ABANDONED = (
    "store_failed: the resume state was not saved (the write was abandoned by cancel: stop)"
)


class _ControlledStore:
    """A Store (behind the Store Protocol) whose writes to the chat-state table are controlled
    by the test: each takes ``turns`` event-loop turns (a healthy store), or, while
    ``held``, waits until the test sets ``release``. ``stubborn``: a held write ignores the
    first cancellation it gets (as a store that finishes its round trip regardless)."""

    def __init__(self, inner: Store | None = None, *, turns: int = 0, held: bool = False) -> None:
        self.inner: Store = MemoryStore() if inner is None else inner
        self.turns = turns
        self.held = held
        self.stubborn = False
        self.writing = asyncio.Event()
        self.release = asyncio.Event()
        self.swallowed = asyncio.Event()
        self.chat_writes = 0

    async def _controlled(self, table: str) -> None:
        if table != ChatStateStore.TABLE:
            return
        self.chat_writes += 1
        self.writing.set()
        for _ in range(self.turns):
            await asyncio.sleep(0)
        if self.held:
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                if not self.stubborn:
                    raise
                self.swallowed.set()
                await self.release.wait()

    async def get(self, table: str, key: str) -> Any:
        return await self.inner.get(table, key)

    async def put(self, table: str, key: str, value: Any, *, ttl_ms: int | None = None) -> None:
        await self._controlled(table)
        await self.inner.put(table, key, value, ttl_ms=ttl_ms)

    async def put_many(self, entries: Sequence[tuple[str, str, Any, int | None]]) -> None:
        for table in {table for table, _, _, _ in entries}:
            await self._controlled(table)
        await self.inner.put_many(entries)

    async def put_new(
        self,
        table: str,
        key: str,
        value: Any,
        *,
        ttl_ms: int | None = None,
        also: Sequence[tuple[str, str, Any, int | None]] = (),
    ) -> bool:
        return await self.inner.put_new(table, key, value, ttl_ms=ttl_ms, also=also)

    async def delete(self, table: str, key: str) -> bool:
        return await self.inner.delete(table, key)

    async def scan(
        self, table: str, *, prefix: str = "", limit: int = 1000, reverse: bool = False
    ) -> list[tuple[str, Any]]:
        return await self.inner.scan(table, prefix=prefix, limit=limit, reverse=reverse)

    async def sweep_expired(self) -> int:
        return await self.inner.sweep_expired()

    async def close(self) -> None:
        await self.inner.close()

    def statistics(self) -> dict[str, Any]:
        return {"backend": "controlled"}


def _answering() -> ScriptedExecutor:
    return ScriptedExecutor(
        default=Script().delta("answer").complete(answer="answer", resume=_NATIVE)
    )


class _CancelAfterAnswer:
    """An executor whose execution answers, then has ``cancel`` called exactly ``turns``
    event-loop turns after it returned its answer (a deterministic point per offset)."""

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.cancel: Callable[[], object] = lambda: None
        self.answered: list[bool] = []
        self.jobs: list[ExecutionJob] = []

    async def prepare(self, job: ExecutionJob) -> PreparedExecution:
        self.jobs.append(job)
        return _Answer(self)


class _Answer:
    def __init__(self, owner: _CancelAfterAnswer) -> None:
        self._owner = owner

    async def execute(self, sink: ExecutionSink) -> ExecutionResult:
        owner = self._owner
        loop = asyncio.get_running_loop()

        def fire(left: int) -> None:
            if left == 0:
                owner.answered.append(bool(owner.cancel()))
            else:
                loop.call_soon(fire, left - 1)

        sink.delta("answer")
        loop.call_soon(fire, owner.turns)
        return ExecutionResult(ok=True, answer="answer", resume=_NATIVE)


# -- item 22: a cancel after the answer keeps a healthy write ------------------------------


@pytest.mark.parametrize("turns", range(13))
async def test_gateway_cancel_after_the_answer_keeps_a_healthy_resume_write(turns: int) -> None:
    # A healthy store: its resume-state write takes 16 loop turns, far within its bound. The
    # cancel lands at each loop turn after the answer in turn (all during that write).
    store = _ControlledStore(turns=16)
    executor = _CancelAfterAnswer(turns)
    bus = Bus()
    async with Gateway(bus=bus, executor=executor, store=store) as gw:
        executor.cancel = lambda: gw.cancel("a", "stop")
        events = RunEvents(bus).watch("a")
        done = await gw.submit_execution(command("a", session="s"))
        assert executor.answered  # the cancel did arrive
        assert (done.ok, done.answer, done.error_code, done.warning) == (
            True,
            "answer",
            None,
            None,
        )
        assert events.completions("a") == [done]
        assert gw.statistics().store_failures == 0
        # The next message resumes the native session, and the history has the turn.
        resume = await ChatStateStore(store).resume_token("s")
        assert resume == _NATIVE
        assert (await RunStore(store).get("a")) is not None
        executor.cancel = lambda: None
        again = await gw.submit_execution(command("b", session="s", resume=resume))
        assert again.ok
        assert executor.jobs[-1].resume == _NATIVE


async def test_gateway_cancel_abandons_a_resume_write_only_past_its_bound() -> None:
    # The write hangs; the cancel arrives within the bound and does not abandon it at once:
    # the write is abandoned when it passes store_timeout_s, with the cancel's warning.
    store = _ControlledStore(held=True)
    cfg = GatewayConfig(store_timeout_s=0.05)
    bus = Bus()
    async with Gateway(bus=bus, executor=_answering(), store=store, config=cfg) as gw:
        events = RunEvents(bus).watch("a")
        handle = gw.submit_execution(command("a", session="s"))
        await store.writing.wait()
        assert gw.cancel("a", "stop")
        for _ in range(50):
            await asyncio.sleep(0)
        assert not handle.done()  # still writing: a cancel does not cut a write short
        done = await handle
    assert (done.ok, done.answer, done.error_code) == (True, "answer", None)
    assert done.warning == _ABANDONED
    assert events.completions("a") == [done]
    assert await ChatStateStore(store).resume_token("s") is None


async def test_gateway_cancel_abandons_a_write_already_past_its_bound_at_once() -> None:
    # A store that ignores its bound's cancellation: the write is past store_timeout_s (the
    # bound has fired), so the cancel abandons it at once.
    store = _ControlledStore(held=True)
    store.stubborn = True
    cfg = GatewayConfig(store_timeout_s=0.01)
    async with Gateway(bus=Bus(), executor=_answering(), store=store, config=cfg) as gw:
        handle = gw.submit_execution(command("a", session="s"))
        await store.swallowed.wait()  # the bound fired and the store went on waiting
        assert gw.cancel("a", "stop")
        done = await handle
    assert (done.ok, done.answer) == (True, "answer")
    assert done.warning == _ABANDONED
    assert not store.release.is_set()


# -- item 21: a graceful stop lets completing runs finish their writes ----------------------


async def test_gateway_graceful_stop_keeps_a_completing_runs_resume_state_and_history() -> None:
    backing = MemoryStore()
    store = _ControlledStore(backing, held=True)
    cfg = GatewayConfig(shutdown_grace_s=2.0)
    bus = Bus()
    gw = Gateway(bus=bus, executor=_answering(), store=store, config=cfg)
    await gw.start()
    events = RunEvents(bus).watch("first")
    handle = gw.submit_execution(command("first", session="s"))
    await store.writing.wait()  # the run has its answer; its resume write is in flight
    stopping = asyncio.create_task(gw.stop())
    await until(lambda: gw.state is GatewayState.STOPPING)
    for _ in range(20):
        await asyncio.sleep(0)
    assert not handle.done()  # the stop waits for the write (within its grace)
    store.release.set()  # the write completes (as a slow store's would)
    await stopping
    done = await handle
    assert (done.ok, done.answer, done.error, done.warning) == (True, "answer", None, None)
    assert events.completions("first") == [done]
    assert gw.statistics().store_failures == 0

    # Restart on the same store: the next message resumes the session; the history has it.
    executor = _answering()
    async with Gateway(bus=bus, executor=executor, store=backing, config=cfg) as again:
        resume = await ChatStateStore(backing).resume_token("s")
        assert resume == _NATIVE
        history = await RunStore(backing).history("s")
        assert [(r.run_id, r.ok, r.answer) for r in history] == [("first", True, "answer")]
        after = await again.submit_execution(command("second", session="s", resume=resume))
        assert after.ok
        assert executor.record("second").job.resume == _NATIVE


async def test_gateway_stop_interrupts_a_completing_write_only_after_its_grace() -> None:
    # A write that never answers (bound 10 s) and a grace of 0.05 s: the forced cancel after
    # the grace abandons it; the run still completes once, with its answer and a warning.
    store = _ControlledStore(held=True)
    cfg = GatewayConfig(shutdown_grace_s=0.05)
    bus = Bus()
    gw = Gateway(bus=bus, executor=_answering(), store=store, config=cfg)
    await gw.start()
    events = RunEvents(bus).watch("first")
    handle = gw.submit_execution(command("first", session="s"))
    await store.writing.wait()
    await gw.stop()
    done = await handle
    assert (done.ok, done.answer) == (True, "answer")
    assert done.warning == "store_failed: the resume state was not saved (interrupted by shutdown)"
    assert events.completions("first") == [done]
    assert gw.statistics().runs.live == 0
