"""ThreadWorker: FIFO per key, one run at a time, bounded launch failures, idle exit."""

from __future__ import annotations

from lemon_core.bus import Bus
from lemon_core.events import ErrorCode
from lemon_gateway import Gateway, GatewayConfig
from lemon_platform_test.executor import Gate, Script, ScriptedExecutor
from lemon_platform_test.gateway_kit import RunEvents, command, until


async def test_gateway_worker_runs_one_key_in_fifo_order_one_at_a_time() -> None:
    bus = Bus()
    gates = {f"r{i}": Gate(f"r{i}") for i in range(3)}
    executor = ScriptedExecutor()
    for run_id, gate in gates.items():
        executor.script_run(run_id, Script().gate(gate).complete(answer=run_id))
    async with Gateway(
        bus=bus, executor=executor, config=GatewayConfig(max_concurrent_runs=4)
    ) as gw:
        handles = [gw.submit_execution(command(r, session="one")) for r in gates]
        await gates["r0"].reached()
        assert list(executor.records) == ["r0"]
        assert gw.debug_snapshot()["workers"] == [
            {"key": ("session", "one"), "current": "r0", "queued": ["r1", "r2"], "launched": 1}
        ]
        # Opening later gates first changes nothing: r1 cannot start before r0 ends.
        gates["r2"].open()
        gates["r1"].open()
        gates["r0"].open()
        answers = [(await h).answer for h in handles]
        assert answers == ["r0", "r1", "r2"]
        assert executor.order == ["r0", "r1", "r2"]


async def test_gateway_idle_workers_exit_and_are_recreated() -> None:
    bus = Bus()
    async with Gateway(bus=bus, executor=ScriptedExecutor()) as gw:
        await gw.submit_execution(command("r1", session="k"))
        assert gw.statistics().workers == 0
        assert (await gw.submit_execution(command("r2", session="k"))).answer == "Echo: r2"
        stats = gw.statistics()
        assert (stats.workers, stats.tasks, stats.runs.live) == (0, 0, 0)


async def test_gateway_launch_failures_are_bounded_to_one_terminal_completion() -> None:
    bus = Bus()
    executor = (
        ScriptedExecutor()
        .script_run("bad", Script().fail_launch(10).complete())
        .script_run("flaky", Script().fail_launch(2).complete(answer="third time"))
    )
    cfg = GatewayConfig(max_launch_attempts=3, launch_retry_backoff_s=0)
    async with Gateway(bus=bus, executor=executor, config=cfg) as gw:
        events = RunEvents(bus).watch("bad", "next", "flaky")
        bad = gw.submit_execution(command("bad", session="k"))
        nxt = gw.submit_execution(command("next", session="k"))
        flaky = gw.submit_execution(command("flaky", session="f"))
        c_bad = await bad
        assert not c_bad.ok
        assert c_bad.synthetic is True
        assert c_bad.error_code is ErrorCode.LAUNCH_FAILED
        assert c_bad.meta == {
            "attempts": 3,
            "last_error": "LaunchError: scripted launch failure 3 of bad",
        }
        assert c_bad.error is not None
        assert c_bad.error.startswith("launch_failed: 3 attempts")
        assert executor.record("bad").launch_attempts == 3
        completed = events.completed("bad")
        assert completed.payload.completed.synthetic is True
        assert events.types("bad") == ["run_started", "run_completed"]
        # The worker advanced to the next request of the same key.
        assert (await nxt).ok
        c_flaky = await flaky
        assert (c_flaky.ok, c_flaky.answer) == (True, "third time")
        assert executor.record("flaky").launch_attempts == 3
        await until(lambda: gw.statistics().tasks == 0)
        stats = gw.statistics()
        assert stats.launch_failures == 5
        assert stats.runs.synthetic == 1
        assert (stats.slots.in_flight, stats.locks.held, stats.workers) == (0, 0, 0)


async def test_gateway_engine_lock_serialises_one_session_across_conversation_keys() -> None:
    bus = Bus()
    gate = Gate()
    executor = ScriptedExecutor().script_run("k1", Script().gate(gate).complete())
    async with Gateway(
        bus=bus, executor=executor, config=GatewayConfig(max_concurrent_runs=4)
    ) as gw:
        # Two conversation keys that share a session: the lock is defence in depth.
        first = gw.submit_execution(command("k1", session="s", key=("x", "1")))
        second = gw.submit_execution(command("k2", session="s", key=("x", "2")))
        await gate.reached()
        await until(lambda: gw.debug_snapshot()["engine_lock"]["waiting"] == 1)
        snap = gw.debug_snapshot()["engine_lock"]
        assert [o["key"] for o in snap["owners"]] == [("session", "s")]
        assert "k2" not in executor.records
        gate.open()
        assert (await first).ok
        assert (await second).ok
        assert executor.order == ["k1", "k2"]


async def test_gateway_lock_timeout_completes_the_run() -> None:
    bus = Bus()
    gate = Gate()
    executor = ScriptedExecutor().script_run("hold", Script().gate(gate).complete())
    cfg = GatewayConfig(max_concurrent_runs=2, engine_lock_timeout_s=0)
    async with Gateway(bus=bus, executor=executor, config=cfg) as gw:
        events = RunEvents(bus).watch("late")
        hold = gw.submit_execution(command("hold", session="s", key=("x", "1")))
        await gate.reached()
        late = await gw.submit_execution(command("late", session="s", key=("x", "2")))
        assert (late.ok, late.error_code) == (False, ErrorCode.TIMEOUT)
        assert late.error is not None
        assert late.error.startswith("lock_timeout")
        assert events.types("late") == ["run_completed"]
        gate.open()
        assert (await hold).ok


async def test_gateway_worker_yields_to_other_conversations_every_16_runs() -> None:
    # Runs whose executor never suspends: one conversation's burst must not starve another.
    executor = ScriptedExecutor(default=Script().complete(answer="ok"))
    config = GatewayConfig(max_concurrent_runs=2, record_run_history=False)
    async with Gateway(bus=Bus(), executor=executor, config=config) as gw:
        burst = [gw.submit_execution(command(f"a{i}", session="a")) for i in range(40)]
        other = gw.submit_execution(command("b1", session="b"))
        for handle in [*burst, other]:
            assert (await handle).ok
    assert executor.order.index("b1") <= 16
    assert [r for r in executor.order if r != "b1"] == [f"a{i}" for i in range(40)]
