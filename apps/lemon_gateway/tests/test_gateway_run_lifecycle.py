"""Run lifecycle: event order, delta numbering, actions, one completion, resume state."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lemon_core.bus import Bus
from lemon_core.events import Delta, EngineAction, ErrorCode, RunStarted, RunUsage
from lemon_core.execution import ResumeToken
from lemon_core.store import ChatStateStore, RunStore, Store
from lemon_gateway import Gateway, GatewayConfig
from lemon_infra import MemoryStore, SQLiteStore
from lemon_platform_test import ManualClock
from lemon_platform_test.executor import Script, ScriptedExecutor
from lemon_platform_test.gateway_kit import RunEvents, command


async def test_gateway_run_publishes_started_deltas_actions_and_one_completion() -> None:
    bus = Bus()
    script = (
        Script()
        .started(resume=ResumeToken.native("sess-1"))
        .action(id="t1", kind="tool", title="read file", phase="started")
        .delta("Hello", " ")
        .action(
            id="t1",
            kind="tool",
            title="read file",
            phase="completed",
            ok=False,
            level="error",
            detail={"result_meta": {"error_type": "tool_task_timeout", "exit_code": 124}},
        )
        .delta("World")
        .complete(answer="", usage={"input_tokens": 3})
    )
    executor = ScriptedExecutor().script_run("r1", script)
    async with Gateway(bus=bus, executor=executor) as gw:
        events = RunEvents(bus).watch("r1")
        completion = await gw.submit_execution(command("r1", model="m-1", origin="cli"))
    evs = events.events("r1")
    assert [e.type for e in evs] == [
        "run_started",
        "engine_action",
        "delta",
        "delta",
        "engine_action",
        "delta",
        "run_completed",
    ]
    started = evs[0].payload
    assert isinstance(started, RunStarted)
    assert (started.engine, started.model, started.run_id) == ("lemon", "m-1", "r1")
    assert evs[0].meta == {
        "run_id": "r1",
        "session_key": "agent:test:main",
        "origin": "cli",
        "model": "m-1",
    }
    deltas = [e.payload for e in evs if isinstance(e.payload, Delta)]
    assert [d.seq for d in deltas] == [1, 2, 3]
    assert [d.text for d in deltas] == ["Hello", " ", "World"]
    done_action = evs[4].payload
    assert isinstance(done_action, EngineAction)
    assert done_action.phase == "completed"
    assert done_action.ok is False
    assert done_action.action.detail["result_meta"]["exit_code"] == 124
    assert completion.ok
    assert completion.answer == "Hello World"
    assert completion.engine == "lemon"
    assert completion.resume == {"engine": "lemon", "value": "sess-1"}
    assert completion.usage == RunUsage(input_tokens=3)
    assert (completion.run_id, completion.session_key) == ("r1", "agent:test:main")
    assert events.completed("r1").payload.completed == completion


async def test_gateway_completion_stores_native_resume_state_and_history(tmp_path: Path) -> None:
    bus = Bus()
    store = await SQLiteStore.open(tmp_path / "lemon.sqlite3")
    try:
        executor = ScriptedExecutor().script_run(
            "r1", Script().complete(answer="x", resume=ResumeToken.native("native-1"))
        )
        async with Gateway(bus=bus, executor=executor, store=store) as gw:
            await gw.submit_execution(command("r1", session="s1"))
        assert await ChatStateStore(store).resume_token("s1") == ResumeToken.native("native-1")
        history = await RunStore(store).history("s1")
        assert [h.run_id for h in history] == ["r1"]
        assert history[0].ok
    finally:
        await store.close()


async def test_gateway_native_resume_reaches_the_executor_and_locks_on_its_value() -> None:
    bus = Bus()
    executor = ScriptedExecutor()
    async with Gateway(bus=bus, executor=executor) as gw:
        token = ResumeToken.native("abc")
        completion = await gw.submit_execution(
            command("r1", resume=token, key=("resume", "lemon", "abc"))
        )
    assert completion.ok
    assert executor.record("r1").job.resume == token


async def test_gateway_non_native_resume_ends_the_run_and_is_never_executed() -> None:
    bus = Bus()
    store = MemoryStore()
    executor = ScriptedExecutor()
    async with Gateway(bus=bus, executor=executor, store=store) as gw:
        events = RunEvents(bus).watch("r1")
        completion = await gw.submit_execution(
            command("r1", resume=ResumeToken(engine="codex", value="old"))
        )
        stats = gw.statistics()
    assert not completion.ok
    assert completion.error is not None
    assert completion.error.startswith("unsupported_resume_engine")
    assert "'codex'" in completion.error
    assert completion.error_code is ErrorCode.RESUME_UNSUPPORTED
    assert "r1" not in executor.records
    assert events.types("r1") == ["run_completed"]
    assert await ChatStateStore(store).get("agent:test:main") is None
    assert stats.slots.in_flight == 0
    assert stats.locks.held == 0


async def test_gateway_executor_failures_become_completions() -> None:
    bus = Bus()
    executor = (
        ScriptedExecutor()
        .script_run("boom", Script().delta("part").raise_error("kaput"))
        .script_run("err", Script().fail("model said no"))
    )
    async with Gateway(bus=bus, executor=executor) as gw:
        boom = await gw.submit_execution(command("boom"))
        err = await gw.submit_execution(command("err"))
    assert not boom.ok
    assert boom.error == "executor_exception: RuntimeError: kaput"
    assert boom.answer == "part"
    assert not err.ok
    assert err.error == "model said no"


class _FailingChatState:
    """A Store whose chat_state writes fail (disk full), everything else delegated."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.failed = 0

    async def get(self, table: str, key: str) -> Any:
        return await self.inner.get(table, key)

    async def put(self, table: str, key: str, value: Any, *, ttl_ms: int | None = None) -> None:
        if table == ChatStateStore.TABLE:
            from lemon_core.store import StoreUnavailableError

            self.failed += 1
            raise StoreUnavailableError("database or disk is full")
        await self.inner.put(table, key, value, ttl_ms=ttl_ms)

    async def put_many(self, entries: Sequence[tuple[str, str, Any, int | None]]) -> None:
        if any(table == ChatStateStore.TABLE for table, _, _, _ in entries):
            from lemon_core.store import StoreUnavailableError

            self.failed += 1
            raise StoreUnavailableError("database or disk is full")
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
        return {"backend": "failing"}


async def test_gateway_store_failure_on_resume_state_keeps_the_answer_with_a_warning() -> None:
    # A store failure after the execution is not an execution failure: the run keeps its
    # outcome and answer, says what was not saved, and frees its slot.
    bus = Bus()
    store = _FailingChatState()
    assert isinstance(store, Store)
    executor = ScriptedExecutor(
        default=Script().delta("answer").complete(resume=ResumeToken.native("n1"))
    )
    cfg = GatewayConfig(max_concurrent_runs=1)
    async with Gateway(bus=bus, executor=executor, store=store, config=cfg) as gw:
        events = RunEvents(bus).watch("r1", "r2")
        first = gw.submit_execution(command("r1", session="a"))
        second = gw.submit_execution(command("r2", session="b"))
        c1, c2 = await first, await second
        stats = gw.statistics()
    assert store.failed == 2
    for c, run_id in ((c1, "r1"), (c2, "r2")):
        assert c.ok
        assert c.error is None
        assert c.error_code is None
        assert c.warning is not None
        assert c.warning.startswith("store_failed: the resume state was not saved")
        assert "StoreUnavailableError" in c.warning
        assert c.answer == "answer"
        assert events.completed(run_id).payload.completed == c
    assert stats.store_failures == 2
    assert stats.slots.in_flight == 0
    assert stats.locks.held == 0


async def test_gateway_sweeps_expired_chat_state() -> None:
    clock = ManualClock(1_000_000)
    store = MemoryStore(clock=clock)
    executor = ScriptedExecutor()
    async with Gateway(bus=Bus(), executor=executor, store=store) as gw:
        await gw.submit_execution(command("r1", session="s1"))
        assert store.statistics()["entries"] >= 1
        chat_entries = len(await store.scan(ChatStateStore.TABLE))
        assert chat_entries == 1
        clock.advance(24 * 60 * 60 * 1000)
        assert await gw.sweep_store() == 1
        assert gw.statistics().store_swept == 1
