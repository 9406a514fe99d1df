"""Run history by group commit (``lemon_gateway._history``).

The runs that end in the same loop turns write their summaries as one batch
(``RunStore.finalize_many``: one ``put_many`` for every run of the batch, all or nothing).
Each run still waits for its own summary's write before its ``run_completed`` is published,
a failed batch is reported to every run in it (each counts its store failure and keeps its
answer), and a run whose batch has not been written yet is still recorded in flight, so a
process that died at that point would leave it to be completed as ``vanished``: nothing lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lemon_core.bus import Bus
from lemon_core.store import RunStore, SessionIndexStore, Store, StoreUnavailableError
from lemon_gateway import Gateway, GatewayConfig
from lemon_infra import MemoryStore
from lemon_platform_test.executor import Script, ScriptedExecutor
from lemon_platform_test.gateway_kit import command, until

_IN_FLIGHT = "gateway_in_flight"


class _HistoryStore:
    """A Store whose run-history batches the test controls: while ``held`` they wait for
    ``release``; with ``failing`` they raise (nothing written). Every batch is counted."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.held = False
        self.failing = False
        self.release = asyncio.Event()
        self.waiting = asyncio.Event()
        self.history_batches: list[int] = []

    async def get(self, table: str, key: str) -> Any:
        return await self.inner.get(table, key)

    async def put(self, table: str, key: str, value: Any, *, ttl_ms: int | None = None) -> None:
        await self.inner.put(table, key, value, ttl_ms=ttl_ms)

    async def put_many(self, entries: Sequence[tuple[str, str, Any, int | None]]) -> None:
        runs = sum(1 for table, _, _, _ in entries if table == RunStore.RUNS)
        if runs:
            self.history_batches.append(runs)
            if self.held:
                self.waiting.set()
                await self.release.wait()
            if self.failing:
                raise StoreUnavailableError("the store went away")
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
        return {"backend": "history-controlled"}


class _RecordedAtCompletion(Bus):
    """A Bus that notes, when each run_completed is published, whether the run's summary is
    already in the store (the store's reads never suspend: it is a MemoryStore)."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__()
        self.store = store
        self.recorded: dict[str, bool] = {}

    def broadcast_event(self, topic: str, type: str, payload: Any = None, meta: Any = None) -> Any:
        if type == "run_completed":
            run_id = payload.completed.run_id
            read = RunStore(self.store).get(run_id)
            try:
                read.send(None)
            except StopIteration as done:
                self.recorded[run_id] = done.value is not None
            else:  # pragma: no cover - a MemoryStore read never suspends
                read.close()
                raise AssertionError("the store read suspended")
        return super().broadcast_event(topic, type, payload, meta)


def _executor() -> ScriptedExecutor:
    return ScriptedExecutor(default=Script().complete(answer="done"))


async def test_gateway_history_runs_ending_together_are_one_batch_recorded_before_publish() -> None:
    store = MemoryStore()
    bus = _RecordedAtCompletion(store)
    config = GatewayConfig(max_concurrent_runs=8)
    async with Gateway(bus=bus, executor=_executor(), store=store, config=config) as gw:
        handles = [
            gw.submit_execution(command(f"r{i}", session=f"agent:test:s{i}")) for i in range(6)
        ]
        completions = [await h for h in handles]
    assert [c.answer for c in completions] == ["done"] * 6
    # Every run's summary was in the store when its run_completed was published.
    assert bus.recorded == {f"r{i}": True for i in range(6)}
    assert gw.history is not None
    assert gw.history.written == 6
    assert gw.history.batches < 6  # grouped: the six runs ended in the same loop turns
    runs = RunStore(store)
    index = SessionIndexStore(store)
    for i in range(6):
        summary = await runs.get(f"r{i}")
        assert summary is not None
        assert summary.ok
        assert summary.answer == "done"
        entry = await index.get(f"agent:test:s{i}")
        assert entry is not None
        assert entry.runs == 1
        assert entry.last_run_id == f"r{i}"


async def test_gateway_history_a_session_batched_twice_counts_each_run() -> None:
    store = MemoryStore()
    async with Gateway(bus=Bus(), executor=_executor(), store=store) as gw:
        handles = [gw.submit_execution(command(f"r{i}")) for i in range(5)]
        for h in handles:
            await h
    entry = await SessionIndexStore(store).get("agent:test:main")
    assert entry is not None
    assert entry.runs == 5
    assert entry.last_run_id == "r4"
    history = await RunStore(store).history("agent:test:main")
    assert [s.run_id for s in history] == ["r4", "r3", "r2", "r1", "r0"]


async def test_gateway_history_a_failed_batch_is_reported_to_every_run_in_it() -> None:
    store = _HistoryStore()
    store.failing = True
    config = GatewayConfig(max_concurrent_runs=8)
    backing: Store = store
    async with Gateway(bus=Bus(), executor=_executor(), store=backing, config=config) as gw:
        handles = [
            gw.submit_execution(command(f"r{i}", session=f"agent:test:s{i}")) for i in range(4)
        ]
        completions = [await h for h in handles]
        stats = gw.statistics()
    # The runs keep their outcome and answer; each counted its own store failure.
    assert [(c.ok, c.answer) for c in completions] == [(True, "done")] * 4
    assert stats.store_failures == 4
    assert sum(store.history_batches) == 4
    assert len(store.history_batches) < 4
    # All or nothing: no run of the failed batch is partly recorded.
    for i in range(4):
        assert await RunStore(store.inner).get(f"r{i}") is None
        assert await SessionIndexStore(store.inner).get(f"agent:test:s{i}") is None
    assert await store.inner.scan(RunStore.HISTORY) == []
    assert await store.inner.scan(RunStore.RECENT) == []


async def test_gateway_history_a_run_waiting_for_its_batch_is_still_recorded_in_flight(
    tmp_path: Path,
) -> None:
    # A process that died while the batch waits would leave these runs in flight: the next
    # gateway on the store completes them as vanished (test_gateway_crash_recovery.py), so
    # nothing between the run's end and the batch's write is lost.
    store = _HistoryStore()
    store.held = True
    config = GatewayConfig(max_concurrent_runs=8)
    backing: Store = store
    async with Gateway(
        bus=Bus(), executor=_executor(), store=backing, config=config, owners_dir=tmp_path
    ) as gw:
        assert gw.records_in_flight
        handles = [
            gw.submit_execution(command(f"r{i}", session=f"agent:test:s{i}")) for i in range(3)
        ]
        await asyncio.wait_for(store.waiting.wait(), 5)
        rows = await store.inner.scan(_IN_FLIGHT)
        assert sorted(record["run_id"] for _, record in rows) == ["r0", "r1", "r2"]
        assert not any(h.done() for h in handles)  # nothing published before it is recorded
        assert all(gw.is_live(f"r{i}") for i in range(3))
        store.release.set()
        completions = [await h for h in handles]
        await until(lambda: gw.statistics().runs.live == 0)
        assert await store.inner.scan(_IN_FLIGHT) == []
    assert [c.answer for c in completions] == ["done"] * 3
    for i in range(3):
        assert await RunStore(store.inner).get(f"r{i}") is not None
