"""Gateway restart with runs in flight: every accepted run ends exactly once, nothing leaks."""

from __future__ import annotations

from pathlib import Path

from lemon_core.bus import Bus
from lemon_core.events import ErrorCode
from lemon_core.execution import ResumeToken
from lemon_core.store import ChatStateStore
from lemon_gateway import Gateway, GatewayConfig, GatewayState
from lemon_infra import SQLiteStore
from lemon_platform_test.executor import Gate, Script, ScriptedExecutor
from lemon_platform_test.gateway_kit import RunEvents, command, until


async def test_gateway_restart_with_runs_in_flight(tmp_path: Path) -> None:
    bus = Bus()
    store = await SQLiteStore.open(tmp_path / "lemon.sqlite3")
    stream_gate, launch_gate = Gate("stream"), Gate("launch")
    executor = (
        ScriptedExecutor()
        .script_run(
            "streaming",
            Script().started(resume=ResumeToken.native("sess-a")).delta("x").gate(stream_gate),
        )
        .script_run("launching", Script().block_launch(launch_gate).complete())
    )
    cfg = GatewayConfig(max_concurrent_runs=2)
    events = RunEvents(bus).watch("streaming", "queued", "launching", "waiting")
    gw = Gateway(bus=bus, executor=executor, store=store, config=cfg)
    async with gw:
        handles = [
            gw.submit_execution(command("streaming", session="a")),
            gw.submit_execution(command("queued", session="a")),
            gw.submit_execution(command("launching", session="b")),
            gw.submit_execution(command("waiting", session="c")),
        ]
        await stream_gate.reached()
        await launch_gate.reached()
        await until(lambda: gw.scheduler.statistics().waiting == 1)
        states = {r["run_id"]: r["state"] for r in gw.debug_snapshot()["runs"]}
        assert states == {
            "streaming": "running",
            "queued": "queued",
            "launching": "launching",
            "waiting": "waiting_slot",
        }
    assert gw.state is GatewayState.STOPPED
    for handle in handles:
        assert handle.done()
        completion = await handle
        assert (completion.ok, completion.error) == (False, "gateway_shutdown")
        assert events.completed(handle.run_id).payload.completed.synthetic is True
        assert completion.error_code is ErrorCode.CANCELLED
    assert events.types("queued") == ["run_completed"]
    assert events.types("waiting") == ["run_completed"]
    assert events.types("streaming") == ["run_started", "delta", "run_completed"]
    stats = gw.statistics()
    assert stats.runs.live == 0
    assert (stats.slots.in_flight, stats.slots.waiting) == (0, 0)
    assert stats.slots.generations_tracked == 0
    assert (stats.locks.held, stats.locks.waiting) == (0, 0)
    assert (stats.workers, stats.tasks) == (0, 0)
    # The resume state written at shutdown survives into the next gateway.
    assert await ChatStateStore(store).resume_token("a") == ResumeToken.native("sess-a")

    async with Gateway(bus=bus, executor=ScriptedExecutor(), store=store, config=cfg) as again:
        events.watch("after")
        completion = await again.submit_execution(command("after", session="a"))
        assert completion.ok
        assert len(events.completions("after")) == 1
    await store.close()
