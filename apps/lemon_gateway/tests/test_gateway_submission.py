"""The submission boundary, executor validation, startup mode and the EngineRuntime seam."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lemon_core.bus import Bus
from lemon_core.execution import ENGINE_RUNTIME, ExecutionCommand, RuntimeContext
from lemon_gateway import (
    DuplicateRunError,
    ExecutorNotReadyError,
    Gateway,
    GatewayConfig,
    GatewayConfigError,
    GatewayNotRunningError,
    GatewayOverloadedError,
    InvalidSubmissionError,
    MissingConversationKeyError,
    validate_executor,
)
from lemon_gateway._request import ExecutionRequest
from lemon_platform_test.executor import Gate, Script, ScriptedExecutor
from lemon_platform_test.gateway_kit import RunEvents, command


async def test_gateway_submission_rejects_anything_but_an_execution_command() -> None:
    bus = Bus()
    async with Gateway(bus=bus, executor=ScriptedExecutor()) as gw:
        cmd = command("r1")
        private = ExecutionRequest(cmd, ("session", "s"), 0)
        for bad in ({"run_id": "r1"}, private, None, "r1"):
            with pytest.raises(InvalidSubmissionError, match=r"accepts only .*ExecutionCommand"):
                gw.submit_execution(bad)  # type: ignore[arg-type]  # the point of the test
        assert gw.statistics().runs.submitted == 0
        assert not hasattr(private, "queue_mode")  # queue semantics belong to the router


async def test_gateway_submission_rejects_a_missing_conversation_key_clearly() -> None:
    bus = Bus()
    async with Gateway(bus=bus, executor=ScriptedExecutor()) as gw:
        cmd = ExecutionCommand(run_id="r-nokey", session_key="s", prompt="p")
        with pytest.raises(MissingConversationKeyError, match="r-nokey is missing router-owned"):
            gw.submit_execution(cmd)
        assert gw.statistics().runs.live == 0


async def test_gateway_acceptance_is_not_completion() -> None:
    bus = Bus()
    gate = Gate()
    executor = ScriptedExecutor().script_run("r1", Script().delta("a").gate(gate).complete())
    async with Gateway(bus=bus, executor=executor) as gw:
        events = RunEvents(bus).watch("r1")
        handle = gw.submit_execution(command("r1"))
        assert not handle.done()
        await gate.reached()
        assert not handle.done()
        assert events.types("r1") == ["run_started", "delta"]
        gate.open()
        completion = await handle
        assert completion.ok
        assert completion.answer == "a"
        assert events.completed("r1").payload.completed == completion


async def test_gateway_refuses_when_not_running_duplicate_or_full() -> None:
    bus = Bus()
    gw = Gateway(bus=bus, executor=ScriptedExecutor())
    with pytest.raises(GatewayNotRunningError, match="new"):
        gw.submit_execution(command("r0"))
    gate = Gate()
    executor = ScriptedExecutor(default=Script().gate(gate).complete())
    cfg = GatewayConfig(max_pending_per_conversation=2, max_pending_runs=3)
    async with Gateway(bus=bus, executor=executor, config=cfg) as gw:
        gw.submit_execution(command("a1", session="a"))
        with pytest.raises(DuplicateRunError, match="a1 is still queued or running"):
            gw.submit_execution(command("a1", session="a"))
        gw.submit_execution(command("a2", session="a"))
        with pytest.raises(GatewayOverloadedError, match="max_pending_per_conversation"):
            gw.submit_execution(command("a3", session="a"))
        gw.submit_execution(command("b1", session="b"))
        with pytest.raises(GatewayOverloadedError, match="max_pending_runs"):
            gw.submit_execution(command("c1", session="c"))
        gate.open()
    with pytest.raises(GatewayNotRunningError, match="stopped"):
        gw.submit_execution(command("late"))


def test_gateway_config_is_strict() -> None:
    assert GatewayConfig().max_concurrent_runs == 2
    with pytest.raises(
        GatewayConfigError, match=r"gateway\.max_concurrent_runs: Expected `int` >= 1"
    ):
        GatewayConfig(max_concurrent_runs=0)
    with pytest.raises(GatewayConfigError, match="unknown gateway settings"):
        GatewayConfig.from_mapping({"max_concurent_runs": 3})
    # the webhook keys moved to [webhooks] (lemon_webhooks): the gateway knows none of them
    with pytest.raises(GatewayConfigError, match="unknown gateway settings"):
        GatewayConfig.from_mapping({"ingress_enabled": True})


async def test_gateway_registers_engine_runtime_on_its_runtime_context() -> None:
    ctx = RuntimeContext(name="t")
    other = RuntimeContext(name="other")
    async with Gateway(bus=Bus(), executor=ScriptedExecutor(), runtime=ctx) as gw:
        runtime = ctx.capabilities.require(ENGINE_RUNTIME)
        assert runtime is gw
        assert runtime.available()
        assert other.capabilities.get(ENGINE_RUNTIME) is None
        runtime.submit_execution(command("via-seam"))
        assert not hasattr(gw, "submit")  # seed 000: submit_execution is the one way in
        handle = gw.handle("via-seam")
        assert handle is not None
        assert (await handle).ok
        assert runtime.cancel("unknown-run") is False
    assert ctx.capabilities.get(ENGINE_RUNTIME) is None
    assert not gw.available()


# -- executor discovery through the lemon.executor entry point group ---------------------


@pytest.fixture
def fake_dists(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))


def _dist(root: Path, name: str, group: str, entries: dict[str, str]) -> None:
    info = root / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = "".join(f"{k} = {v}\n" for k, v in entries.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}")


async def test_gateway_validate_executor_explains_why_not_ready(fake_dists: Path) -> None:
    group = "lemon.executor.test_none"
    status = validate_executor(group)
    assert not status.ready
    assert "no executor installed" in (status.reason or "")
    with pytest.raises(ExecutorNotReadyError, match="no executor installed"):
        async with Gateway(bus=Bus(), executor_group=group):
            pass

    _dist(fake_dists, "broken_exec", "lemon.executor.test_broken", {"x": "no_such_module:Thing"})
    status = validate_executor("lemon.executor.test_broken")
    assert "cannot be loaded" in (status.reason or "")

    _dist(fake_dists, "wrong_exec", "lemon.executor.test_wrong", {"x": "builtins:object"})
    status = validate_executor("lemon.executor.test_wrong")
    assert "has no prepare(job) method" in (status.reason or "")

    two = "lemon.executor.test_two"
    _dist(fake_dists, "exec_a", two, {"a": "lemon_platform_test.executor:ScriptedExecutor"})
    _dist(fake_dists, "exec_b", two, {"b": "lemon_platform_test.executor:ScriptedExecutor"})
    status = validate_executor(two)
    assert not status.ready
    assert "exactly one is allowed" in (status.reason or "")


async def test_gateway_uses_the_one_entry_point_executor(fake_dists: Path) -> None:
    group = "lemon.executor.test_one"
    _dist(
        fake_dists, "exec_one", group, {"scripted": "lemon_platform_test.executor:ScriptedExecutor"}
    )
    status = validate_executor(group)
    assert status.ready, status.reason
    async with Gateway(bus=Bus(), executor_group=group) as gw:
        assert gw.statistics().executor == "ScriptedExecutor"
        completion = await gw.submit_execution(command("ep-run", prompt="hello"))
        assert completion.answer == "Echo: hello"


async def test_gateway_starts_once_and_one_engine_runtime_per_runtime_context() -> None:
    from lemon_core.execution import CapabilityConflictError

    ctx = RuntimeContext()
    async with Gateway(bus=Bus(), executor=ScriptedExecutor(), runtime=ctx) as gw:
        with pytest.raises(GatewayNotRunningError, match="starts once"):
            await gw.start()
        second = Gateway(bus=Bus(), executor=ScriptedExecutor(), runtime=ctx)
        with pytest.raises(CapabilityConflictError, match="EngineRuntime is already provided"):
            await second.start()
        assert ctx.capabilities.require(ENGINE_RUNTIME) is gw
    assert ctx.capabilities.get(ENGINE_RUNTIME) is None


async def test_gateway_reports_an_executor_result_of_the_wrong_type() -> None:
    class Sloppy:
        async def prepare(self, job: object) -> Sloppy:
            return self

        async def execute(self, sink: object) -> object:
            return {"ok": True}

    async with Gateway(bus=Bus(), executor=Sloppy()) as gw:  # type: ignore[arg-type]  # on purpose
        completion = await gw.submit_execution(command("r1"))
    assert not completion.ok
    assert completion.error is not None
    assert completion.error.startswith("invalid_executor_result")
