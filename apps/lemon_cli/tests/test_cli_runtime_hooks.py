"""The ``lemon.apps`` hooks live in the apps that own them; lemon_cli has none (one executor:
the terminal has no fallback executor of its own)."""

from __future__ import annotations

import asyncio
import re
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from coding_agent import CodingExecutor
from lemon_core.bus import Delivery, session_topic
from lemon_core.capabilities import AGENT_RUNTIME, APPROVALS
from lemon_core.config import load_config
from lemon_core.events import Event
from lemon_core.execution import ALL_TOOLS, ROUTER_BRIDGE, Executor, RunRequest, ToolPolicy
from lemon_core.runtime_errors import RuntimeBootError
from lemon_gateway import Gateway
from lemon_platform_test.lifespans import hooks
from lemon_platform_test.providers import ScriptedProviderServer, ScriptedTurn
from lemon_runtime import APPS_ENTRY_POINT_GROUP, AppSpec, Runtime, discover_apps

APPS = {"coding_agent", "lemon_gateway", "lemon_router"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def test_lemon_apps_entry_points_come_from_their_owning_distributions() -> None:
    found = {}
    for ep in entry_points(group=APPS_ENTRY_POINT_GROUP):
        assert ep.dist is not None, ep
        found[ep.name] = canonical(ep.dist.name)
        assert ep.value.split(".")[0] == ep.name, ep.value  # the hook is in the app's package
        spec = ep.load()
        assert isinstance(spec, AppSpec)
        assert spec.name == ep.name
    assert set(found) >= APPS
    for name in APPS:
        assert found[name] == name, f"{name}'s hook is published by {found[name]}"


def runtime_for(tmp_path: Path) -> Runtime:
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    loaded = load_config(home=home, cwd=tmp_path, environ={})
    return Runtime(profile="execution-only", config=loaded, store="memory")


async def test_the_gateway_runs_the_coding_agents_wired_executor(tmp_path: Path) -> None:
    async with runtime_for(tmp_path) as runtime:
        capabilities = runtime.context.capabilities
        agent = capabilities.require(AGENT_RUNTIME)
        executor = agent.executor()
        assert isinstance(executor, CodingExecutor)
        assert executor.approvals is capabilities.require(APPROVALS)
        gateway = runtime.handle("lemon_gateway")
        assert isinstance(gateway, Gateway)
        assert gateway.executor is executor
    assert runtime.statistics().capabilities == {}


async def test_the_gateway_falls_back_to_the_executor_entry_point(tmp_path: Path) -> None:
    # An agent app whose AGENT_RUNTIME is not ready: the gateway hook finds the one executor
    # of the lemon.executor group itself (coding_agent's, unwired: no approvals).
    class NotReady:
        def executor(self) -> Executor:
            raise AssertionError("the gateway asked a not-ready agent for its executor")

        def not_ready_reason(self) -> str | None:
            return "no model configured"

    agent = NotReady()

    async def start(rt: Runtime) -> None:
        rt.context.capabilities.register(AGENT_RUNTIME, agent)

    apps = {
        "coding_agent": AppSpec(
            name="coding_agent", lifespan=hooks(start), provides=(AGENT_RUNTIME,)
        ),
        "lemon_gateway": discover_apps()["lemon_gateway"],
    }
    home = tmp_path / "home"
    home.mkdir()
    loaded = load_config(home=home, cwd=tmp_path, environ={})
    async with Runtime(profile="execution-only", config=loaded, apps=apps, store="memory") as rt:
        gateway = rt.handle("lemon_gateway")
        assert isinstance(gateway, Gateway)
        assert isinstance(gateway.executor, CodingExecutor)
        assert gateway.executor.approvals is None
        assert rt.context.capabilities.get(AGENT_RUNTIME) is agent


async def test_the_gateway_needs_an_agent_runtime_provider(tmp_path: Path) -> None:
    # The gateway names no agent app: it needs the AGENT_RUNTIME capability, and an installed
    # set without a provider is a boot error that says so.
    apps = {"lemon_gateway": discover_apps()["lemon_gateway"]}
    home = tmp_path / "home"
    home.mkdir()
    loaded = load_config(home=home, cwd=tmp_path, environ={})
    with pytest.raises(RuntimeBootError, match="needs the capability AgentRuntime"):
        Runtime(profile="execution-only", config=loaded, apps=apps, store="memory")


async def test_the_coding_agent_hook_reads_the_key_from_secrets_env(
    tmp_path: Path, scripted_provider: ScriptedProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LEMON_HOOKS_TEST_KEY", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[defaults]\nmodel = "scripted:test-model"\n\n'
        '[providers.scripted]\nkind = "openai_completions"\n'
        f'base_url = "{scripted_provider.openai_base_url}"\n'
        'api_key_env = "LEMON_HOOKS_TEST_KEY"\n'
    )
    (home / "secrets.env").write_text("# the key\nLEMON_HOOKS_TEST_KEY=from-the-file\n")
    scripted_provider.script(ScriptedTurn(text="hello"))
    loaded = load_config(home=home, cwd=tmp_path, environ={})
    session = "agent:default:main"
    async with Runtime(profile="full", config=loaded, store="memory") as runtime:
        delivery = Delivery(max_entries=10_000)
        runtime.bus.subscribe(session_topic(session), delivery=delivery)
        router = runtime.context.capabilities.require(ROUTER_BRIDGE)
        receipt = await router.submit(
            RunRequest(
                origin="test",
                session_key=session,
                prompt="hi",
                cwd=str(tmp_path),
                tool_policy=ToolPolicy(),
                preapproved=frozenset({ALL_TOOLS}),
            )
        )
        while True:
            event = await asyncio.wait_for(delivery.get(), 60)
            assert isinstance(event, Event)
            if event.type == "run_completed" and event.meta.get("run_id") == receipt.run_id:
                assert event.payload.completed.answer == "hello"
                break
    (sent,) = scripted_provider.requests
    assert sent.headers["authorization"] == "Bearer from-the-file"
