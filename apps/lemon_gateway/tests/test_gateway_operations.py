"""Operations: the debug snapshot, and a run task that dies while holding the session lock."""

from __future__ import annotations

import asyncio
import dataclasses

from lemon_core.bus import Bus
from lemon_gateway import (
    EngineLockStatistics,
    Gateway,
    GatewayConfig,
    GatewaySlots,
    GatewayStatistics,
    SchedulerStatistics,
)
from lemon_platform_test.executor import Gate, Script, ScriptedExecutor
from lemon_platform_test.gateway_kit import RunEvents, command, until


def _task(name: str) -> asyncio.Task[object]:
    return next(t for t in asyncio.all_tasks() if t.get_name() == name)


async def test_gateway_debug_snapshot_shows_slots_locks_workers_and_runs() -> None:
    bus = Bus()
    gate = Gate()
    executor = ScriptedExecutor(default=Script().gate(gate).complete())
    cfg = GatewayConfig(max_concurrent_runs=1)
    async with Gateway(bus=bus, executor=executor, config=cfg) as gw:
        gw.submit_execution(command("a1", session="a"))
        gw.submit_execution(command("a2", session="a"))
        gw.submit_execution(command("b1", session="b"))
        await gate.reached()
        await until(lambda: gw.scheduler.statistics().waiting == 1)
        snap = gw.debug_snapshot()
        (slot,) = snap["scheduler"]["slots"]
        assert slot["key"] == ("session", "a")
        assert slot["generation"] >= 1
        (waiter,) = snap["scheduler"]["waiters"]
        assert waiter["key"] == ("session", "b")
        (owner,) = snap["engine_lock"]["owners"]
        assert owner["key"] == ("session", "a")
        assert owner["owner"] == "run:a1"
        workers = {tuple(w["key"]): w for w in snap["workers"]}
        assert workers[("session", "a")]["queued"] == ["a2"]
        assert {r["run_id"]: r["state"] for r in snap["runs"]} == {
            "a1": "running",
            "a2": "queued",
            "b1": "waiting_slot",
        }
        assert sorted(snap["tasks"]) == ["run:a1", "run:b1"]
        stats = gw.statistics()
        assert stats.runs.by_state == {"running": 1, "queued": 1, "waiting_slot": 1}
        assert stats.slots == GatewaySlots(
            max=1, in_flight=1, waiting=1, generations_tracked=2, stale_releases=0
        )
        gate.open()


async def test_gateway_run_task_dying_with_the_lock_hands_it_to_the_waiting_run() -> None:
    bus = Bus()
    gate = Gate()
    executor = ScriptedExecutor().script_run("owner", Script().gate(gate).complete())
    cfg = GatewayConfig(max_concurrent_runs=2)
    async with Gateway(bus=bus, executor=executor, config=cfg) as gw:
        events = RunEvents(bus).watch("owner", "waiter")
        owner = gw.submit_execution(command("owner", session="s", key=("k", "1")))
        waiter = gw.submit_execution(command("waiter", session="s", key=("k", "2")))
        await gate.reached()
        await until(lambda: gw.engine_lock.statistics().waiting == 1)
        # The owning run's task dies (cancelled from outside, not through gw.cancel).
        _task("run:owner").cancel()
        c_owner = await owner
        assert (c_owner.ok, c_owner.error) == (False, "cancelled")
        assert (await waiter).ok
        assert len(events.completions("owner")) == 1
        assert len(events.completions("waiter")) == 1
        stats = gw.statistics()
        assert (stats.locks.held, stats.slots.in_flight) == (0, 0)


async def test_gateway_waiting_run_dying_leaves_the_lock_queue() -> None:
    bus = Bus()
    gate = Gate()
    executor = ScriptedExecutor().script_run("owner", Script().gate(gate).complete())
    async with Gateway(
        bus=bus, executor=executor, config=GatewayConfig(max_concurrent_runs=3)
    ) as gw:
        owner = gw.submit_execution(command("owner", session="s", key=("k", "1")))
        doomed = gw.submit_execution(command("doomed", session="s", key=("k", "2")))
        last = gw.submit_execution(command("last", session="s", key=("k", "3")))
        await gate.reached()
        await until(lambda: gw.engine_lock.statistics().waiting == 2)
        _task("run:doomed").cancel()
        c_doomed = await doomed
        assert c_doomed.error == "cancelled"
        assert gw.engine_lock.statistics().waiting == 1
        gate.open()
        assert (await owner).ok
        assert (await last).ok
        assert "doomed" not in executor.records


async def test_gateway_statistics_are_typed_and_the_debug_snapshot_is_plain_data() -> None:
    async with Gateway(bus=Bus(), executor=ScriptedExecutor()) as gw:
        stats = gw.statistics()
        assert isinstance(stats, GatewayStatistics)
        assert isinstance(gw.scheduler.statistics(), SchedulerStatistics)
        assert isinstance(gw.engine_lock.statistics(), EngineLockStatistics)
        snap = gw.debug_snapshot()
        assert snap["statistics"] == dataclasses.asdict(stats)
        assert snap["statistics"]["slots"]["max"] == gw.config.max_concurrent_runs
        assert (snap["scheduler"]["slots"], snap["scheduler"]["waiters"]) == ([], [])
        assert (snap["engine_lock"]["owners"], snap["engine_lock"]["waiters"]) == ([], {})
