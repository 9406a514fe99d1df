"""Steering and liveness: ``Gateway.steer(run_id, text)`` and ``Gateway.is_live(run_id)``.

The scripted executor's prepared execution implements SteerableExecution when its script asks
for it (``Script().steering(...)``); the gateway must hand text only to the exact run while it
executes, and report True only when that execution accepted it.
"""

from __future__ import annotations

from lemon_core.bus import Bus
from lemon_core.execution import ENGINE_RUNTIME, RunLiveness, RuntimeContext, SteerableRuntime
from lemon_gateway import Gateway, GatewayConfig, GatewaySteers
from lemon_platform_test.executor import Gate, Script, ScriptedExecutor
from lemon_platform_test.gateway_kit import RunEvents, command, until


async def test_gateway_steer_accepted_reaches_the_running_execution() -> None:
    bus = Bus()
    gate = Gate()
    script = Script().steering("accept").gate(gate).echo_steers().complete()
    executor = ScriptedExecutor(default=script)
    context = RuntimeContext()
    events = RunEvents(bus).watch("r1")
    async with Gateway(bus=bus, executor=executor, runtime=context) as gw:
        engine = context.capabilities.require(ENGINE_RUNTIME)
        assert isinstance(engine, SteerableRuntime)
        assert isinstance(engine, RunLiveness)
        handle = gw.submit_execution(command("r1"))
        await gate.reached()
        assert gw.steer("r1", "also the tests") is True
        assert gw.steer("r1", "and the docs") is True
        gate.open()
        completion = await handle
    assert completion.ok
    assert completion.answer == "steered: also the testssteered: and the docs"
    assert executor.record("r1").steers == ["also the tests", "and the docs"]
    assert events.types("r1") == ["run_started", "delta", "delta", "run_completed"]
    assert gw.statistics().steers == GatewaySteers(accepted=2, refused=0)


async def test_gateway_steer_is_refused_unless_that_exact_run_executes() -> None:
    bus = Bus()
    gate = Gate()
    launch = Gate("launch")
    executor = (
        ScriptedExecutor(default=Script().steering("accept").gate(gate).complete())
        .script_run("launching", Script().steering("accept").block_launch(launch).complete())
        .script_run("refuses", Script().steering("refuse").gate(gate).complete())
        .script_run("plain", Script().gate(gate).complete())
    )
    cfg = GatewayConfig(max_concurrent_runs=4)
    async with Gateway(bus=bus, executor=executor, config=cfg) as gw:
        running = gw.submit_execution(command("running", session="a"))
        queued = gw.submit_execution(command("queued", session="a"))  # behind "running"
        launching = gw.submit_execution(command("launching", session="b"))
        refuses = gw.submit_execution(command("refuses", session="c"))
        plain = gw.submit_execution(command("plain", session="d"))
        await until(lambda: gate.arrivals == 3)
        await launch.reached()
        assert gw.steer("running", "x") is True
        assert gw.steer("queued", "x") is False  # accepted but not executing
        assert gw.steer("launching", "x") is False  # prepare has not returned
        assert gw.steer("refuses", "x") is False  # its execution said no
        assert gw.steer("plain", "x") is False  # its execution has no steer
        assert gw.steer("nobody", "x") is False
        assert gw.steer("runnin", "x") is False  # exact ids only
        assert executor.record("refuses").steer_refusals == 1
        assert executor.record("running").steers == ["x"]
        gate.open()
        launch.open()
        for handle in (running, queued, launching, refuses, plain):
            assert (await handle).ok
        assert gw.steer("running", "late") is False  # completed
        assert executor.record("running").steers == ["x"]
        assert gw.statistics().steers == GatewaySteers(accepted=1, refused=7)


async def test_gateway_steer_after_cancel_or_raising_execution_is_refused() -> None:
    bus = Bus()
    gate = Gate()
    executor = ScriptedExecutor(
        default=Script().steering("accept").gate(gate).complete()
    ).script_run("raises", Script().steering("raise").gate(gate).complete())
    cfg = GatewayConfig(max_concurrent_runs=2)
    async with Gateway(bus=bus, executor=executor, config=cfg) as gw:
        victim = gw.submit_execution(command("victim", session="a"))
        raises = gw.submit_execution(command("raises", session="b"))
        await until(lambda: gate.arrivals == 2)
        assert gw.steer("raises", "x") is False  # the execution raised: contained, refused
        assert gw.cancel("victim")
        assert gw.steer("victim", "x") is False  # cancelling: no new input
        assert (await victim).error == "user_requested"
        gate.open()
        assert (await raises).ok
    assert executor.record("victim").steers == []


async def test_gateway_is_live_from_acceptance_until_completion() -> None:
    bus = Bus()
    gate = Gate()
    executor = ScriptedExecutor(default=Script().gate(gate).complete())
    cfg = GatewayConfig(max_concurrent_runs=1)
    async with Gateway(bus=bus, executor=executor, config=cfg) as gw:
        assert gw.is_live("a1") is False
        first = gw.submit_execution(command("a1", session="a"))
        second = gw.submit_execution(command("b1", session="b"))  # waits for the one slot
        assert gw.is_live("a1")
        assert gw.is_live("b1")
        await gate.reached()
        assert gw.is_live("a1")
        assert gw.is_live("b1")
        gate.open()
        await first
        assert gw.is_live("a1") is False
        await second
        assert gw.is_live("b1") is False
        cancelled = gw.submit_execution(command("c1", session="c"))
        assert gw.cancel("c1")
        await cancelled
        assert gw.is_live("c1") is False
