"""The ``lemon.apps`` hooks live in the apps that own them, and lemon_cli's own hook swaps
in the built-in executor only when asked (or when ``lemon.executor`` is not ready)."""

from __future__ import annotations

import re
from importlib.metadata import entry_points
from pathlib import Path

from coding_agent import CodingExecutor
from lemon_core.config import load_config
from lemon_core.runtime import AGENT_RUNTIME, APPROVALS, APPS_ENTRY_POINT_GROUP, AppSpec, Runtime
from lemon_gateway import Gateway

APPS = {"coding_agent", "lemon_cli", "lemon_gateway", "lemon_router"}


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


def runtime_for(tmp_path: Path, **settings: str) -> Runtime:
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    loaded = load_config(home=home, cwd=tmp_path, environ={})
    return Runtime(profile="execution-only", config=loaded, store="memory", settings=settings)


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
        assert runtime.handle("lemon_cli") is None  # the fallback stayed out of the way
    assert runtime.statistics().capabilities == {}


async def test_built_in_executor_replaces_the_agent_and_stops_cleanly(tmp_path: Path) -> None:
    async with runtime_for(tmp_path, executor="built-in") as runtime:
        capabilities = runtime.context.capabilities
        agent = capabilities.require(AGENT_RUNTIME)
        executor = agent.executor()
        assert not isinstance(executor, CodingExecutor)
        assert agent.not_ready_reason() is None
        gateway = runtime.handle("lemon_gateway")
        assert isinstance(gateway, Gateway)
        assert gateway.executor is executor
        assert runtime.handle("lemon_cli") is agent
        assert getattr(agent, "reason", None) == "built-in executor asked for"
    assert runtime.statistics().capabilities == {}
