"""Every await of a run has a bound: a hung store or launch never holds a slot forever."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lemon_core.bus import Bus
from lemon_core.events import ErrorCode
from lemon_core.execution import ResumeToken
from lemon_core.store import ChatStateStore, RunStore, Store
from lemon_gateway import Gateway, GatewayConfig
from lemon_infra import MemoryStore
from lemon_platform_test.executor import Gate, Script, ScriptedExecutor
from lemon_platform_test.gateway_kit import RunEvents, command, until


class _HangingStore:
    """A Store whose writes to ``table`` block on a gate that is never opened."""

    def __init__(self, table: str) -> None:
        self.inner = MemoryStore()
        self.table = table
        self.gate = Gate(f"{table} write")

    async def get(self, table: str, key: str) -> Any:
        return await self.inner.get(table, key)

    async def put(self, table: str, key: str, value: Any, *, ttl_ms: int | None = None) -> None:
        if table == self.table:
            await self.gate.pass_through()
        await self.inner.put(table, key, value, ttl_ms=ttl_ms)

    async def put_many(self, entries: Sequence[tuple[str, str, Any, int | None]]) -> None:
        if any(table == self.table for table, _, _, _ in entries):
            await self.gate.pass_through()
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
        return {"backend": "hanging"}


def _resuming() -> ScriptedExecutor:
    return ScriptedExecutor(
        default=Script().delta("answer").complete(resume=ResumeToken.native("n1"))
    )


async def test_gateway_hung_resume_state_write_releases_the_slot_on_its_bound() -> None:
    store = _HangingStore(ChatStateStore.TABLE)
    assert isinstance(store, Store)
    cfg = GatewayConfig(max_concurrent_runs=1, store_timeout_s=0.01, record_run_history=False)
    bus = Bus()
    async with Gateway(bus=bus, executor=_resuming(), store=store, config=cfg) as gw:
        events = RunEvents(bus).watch("a", "b")
        a = gw.submit_execution(command("a", session="a"))
        b = gw.submit_execution(command("b", session="b"))  # waits for the only slot
        ca, cb = await a, await b
        stats = gw.statistics()
    for c, run_id in ((ca, "a"), (cb, "b")):
        assert (c.ok, c.answer, c.error_code) == (True, "answer", None)
        assert c.warning is not None
        assert "no answer within 0.01 s, gateway.store_timeout_s" in c.warning
        assert events.completed(run_id).payload.completed == c
    assert stats.store_failures == 2
    assert stats.slots.in_flight == 0


async def test_gateway_cancel_abandons_a_hung_resume_state_write() -> None:
    # A cancel does not cut a write short: the hung write is abandoned once it passes its
    # bound (store_timeout_s), with the cancel's warning.
    store = _HangingStore(ChatStateStore.TABLE)
    cfg = GatewayConfig(max_concurrent_runs=1, record_run_history=False, store_timeout_s=0.05)
    bus = Bus()
    async with Gateway(bus=bus, executor=_resuming(), store=store, config=cfg) as gw:
        events = RunEvents(bus).watch("a")
        a = gw.submit_execution(command("a", session="a"))
        b = gw.submit_execution(command("b", session="b"))
        await store.gate.reached()
        assert {r["run_id"]: r["state"] for r in gw.debug_snapshot()["runs"]} == {
            "a": "completing",
            "b": "waiting_slot",
        }
        assert gw.is_live("a")
        assert gw.cancel("a", "stop")
        assert gw.cancel("a", "again")  # idempotent while still live; first reason wins
        ca = await a
        assert gw.cancel("a") is False  # completed
        assert (ca.ok, ca.answer, ca.error_code) == (True, "answer", None)
        assert ca.warning == (
            "store_failed: the resume state was not saved (the write was abandoned by cancel: stop)"
        )
        assert events.completions("a") == [ca]
        # b's own write hangs too; it is cancelled the same way and the slot comes back.
        await until(lambda: store.gate.arrivals == 2)
        assert gw.cancel("b")
        assert (await b).ok
        assert gw.statistics().slots.in_flight == 0


async def test_gateway_hung_run_history_write_lets_the_worker_move_on() -> None:
    store = _HangingStore(RunStore.RUNS)
    cfg = GatewayConfig(store_timeout_s=0.01)
    async with Gateway(bus=Bus(), executor=_resuming(), store=store, config=cfg) as gw:
        first = gw.submit_execution(command("r1"))
        second = gw.submit_execution(command("r2"))  # same conversation: after r1's history
        assert (await first).ok
        assert (await second).ok
    assert gw.statistics().store_failures == 2  # one bounded history write each


async def test_gateway_hung_prepare_completes_with_a_typed_timeout_and_frees_the_slot() -> None:
    never = Gate("prepare")
    executor = ScriptedExecutor().script_run("a", Script().block_launch(never).complete())
    cfg = GatewayConfig(max_concurrent_runs=1, prepare_timeout_s=0.01)
    bus = Bus()
    async with Gateway(bus=bus, executor=executor, config=cfg) as gw:
        events = RunEvents(bus).watch("a")
        a = gw.submit_execution(command("a", session="a"))
        b = gw.submit_execution(command("b", session="b"))
        ca, cb = await a, await b
        stats = gw.statistics()
    assert ca.ok is False
    assert ca.error_code is ErrorCode.TIMEOUT
    assert ca.error is not None
    assert ca.error.startswith("prepare_timeout: executor.prepare did not return within 0.01 s")
    assert executor.record("a").launch_attempts == 1  # a hung launch is not retried
    assert events.types("a") == ["run_started", "run_completed"]
    assert cb.ok
    assert stats.slots.in_flight == 0


async def test_gateway_prepare_raising_its_own_timeout_error_is_a_failed_launch() -> None:
    class TimesOut:
        attempts = 0

        async def prepare(self, job: object) -> object:
            self.attempts += 1
            raise TimeoutError("the sandbox did not start")

    executor = TimesOut()
    cfg = GatewayConfig(max_launch_attempts=2, launch_retry_backoff_s=0)
    async with Gateway(bus=Bus(), executor=executor, config=cfg) as gw:  # type: ignore[arg-type]  # structural
        completion = await gw.submit_execution(command("r1"))
    assert executor.attempts == 2  # retried: not the gateway's bound
    assert completion.error_code is ErrorCode.LAUNCH_FAILED
    assert completion.error is not None
    assert "TimeoutError: the sandbox did not start" in completion.error
