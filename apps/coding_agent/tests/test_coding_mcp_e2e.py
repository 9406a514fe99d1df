"""MCP servers' tools in a coding run, through the real gateway, the scripted model and a real
MCP server process (the official SDK's): the model sees ``mcp_<server>_<tool>``, a call of an
``ask`` tool waits for an approval, an ``allow`` tool runs at once, a server that cannot start
is a note and never stops the run."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from coding_agent import CodingExecutor, ExecutorSettings
from lemon_ai import OpenAICompletionsProvider, default_catalogue
from lemon_core import ExecApprovals
from lemon_core.bus import EXEC_APPROVALS, Bus, Delivery, Subscription
from lemon_core.events import Completion, Event
from lemon_core.execution import ExecutionCommand
from lemon_gateway import Gateway
from lemon_mcp import McpHubImpl
from lemon_platform_test.providers import ScriptedProviderServer, ScriptedToolCall, ScriptedTurn

SESSION = "agent:coder:main"
SDK = Path(__file__).parents[2] / "lemon_mcp" / "tests" / "servers" / "sdk_mcp_server.py"


@dataclass
class Env:
    gateway: Gateway
    approvals: ExecApprovals
    server: ScriptedProviderServer
    cwd: Path
    asks: Subscription

    def submit(self, run_id: str, preapproved: frozenset[str] = frozenset()) -> Any:
        return asyncio.ensure_future(
            self.gateway.submit_execution(
                ExecutionCommand(run_id=run_id, session_key=SESSION, prompt="go",
                                 conversation_key=("session", SESSION), cwd=str(self.cwd),
                                 preapproved=preapproved)
            )
        )  # fmt: skip

    async def next_approval(self, type_: str) -> Any:
        while True:
            item = await asyncio.wait_for(self.asks.get(), 30)
            assert isinstance(item, Event)
            if item.type == type_:
                return item.payload

    def tool_results(self, request: int) -> list[str]:
        body = self.server.requests[request].body
        return [m["content"] for m in body["messages"] if m["role"] == "tool"]


@pytest.fixture
async def env(tmp_path: Path, scripted_provider: ScriptedProviderServer) -> AsyncIterator[Env]:
    home, cwd = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    cwd.mkdir()
    (home / "config.toml").write_text(
        f'[mcp.servers.sdk]\ncommand = "{sys.executable}"\nargs = ["{SDK}", "stdio"]\n'
        '[mcp.servers.sdk.tools.add]\napproval = "allow"\n'
        '[mcp.servers.broken]\ncommand = "/nonexistent/server"\n',
        encoding="utf-8",
    )
    hub = McpHubImpl(home=home, environ={"PATH": os.environ["PATH"]})
    provider = OpenAICompletionsProvider(api_key="sk-test")
    model = default_catalogue().resolve(
        "openai:gpt-4o-mini", base_url=scripted_provider.openai_base_url
    )
    bus = Bus()
    approvals = ExecApprovals(bus)
    executor = CodingExecutor(
        home=home, model=model, provider=provider, approvals=approvals,
        settings=ExecutorSettings(approval_timeout_s=60.0), mcp=lambda: hub,
    )  # fmt: skip
    asks = bus.subscribe(EXEC_APPROVALS, delivery=Delivery(max_entries=1000,
                                                          bind_current_task=False))  # fmt: skip
    try:
        async with Gateway(bus=bus, executor=executor) as gateway:
            yield Env(gateway, approvals, scripted_provider, cwd, asks)
    finally:
        await provider.aclose()
        await hub.aclose()


def _call(id: str, name: str, **arguments: object) -> ScriptedToolCall:
    return ScriptedToolCall(id=id, name=name, arguments=arguments)


async def test_the_model_calls_mcp_tools_under_the_approval_policy(env: Env) -> None:
    env.server.script(
        ScriptedTurn(tool_calls=(_call("c1", "mcp_sdk_add", a=2, b=40),)),
        ScriptedTurn(tool_calls=(_call("c2", "mcp_sdk_echo", text="via mcp"),)),
        ScriptedTurn(text="done"),
    )
    run = env.submit("r1")
    asked = await env.next_approval("approval_requested")
    assert asked.pending.tool == "mcp_sdk_echo"  # add is allowed; echo asks first
    assert asked.pending.action == {"text": "via mcp"}
    env.approvals.resolve(asked.approval_id, "approve_once")
    completion: Completion = await asyncio.wait_for(run, 60)
    assert completion.ok, completion
    tools = {t["function"]["name"] for t in env.server.requests[0].body["tools"]}
    assert {"mcp_sdk_add", "mcp_sdk_echo", "bash"} <= tools
    assert not any("broken" in t for t in tools)
    assert env.tool_results(1) == ["42"]
    assert env.tool_results(2)[-1] == "via mcp"


async def test_a_denied_mcp_call_does_not_reach_the_server(env: Env) -> None:
    env.server.script(
        ScriptedTurn(tool_calls=(_call("c1", "mcp_sdk_echo", text="nope"),)),
        ScriptedTurn(text="ok"),
    )
    run = env.submit("r2")
    asked = await env.next_approval("approval_requested")
    env.approvals.resolve(asked.approval_id, "deny")
    completion: Completion = await asyncio.wait_for(run, 60)
    assert completion.ok
    (result,) = env.tool_results(1)
    assert "was not approved" in result


async def test_a_preapproved_mcp_tool_runs_without_asking(env: Env) -> None:
    env.server.script(
        ScriptedTurn(tool_calls=(_call("c1", "mcp_sdk_echo", text="pre"),)),
        ScriptedTurn(text="ok"),
    )
    completion: Completion = await asyncio.wait_for(
        env.submit("r3", frozenset({"mcp_sdk_echo"})), 60
    )
    assert completion.ok
    assert env.tool_results(1) == ["pre"]


async def test_a_glob_preapproves_every_tool_of_a_server_and_no_other(env: Env) -> None:
    from coding_agent.tools.mcp import mcp_policy
    from lemon_core.execution import ToolPolicy

    env.server.script(
        ScriptedTurn(tool_calls=(_call("c1", "mcp_sdk_echo", text="globbed"),)),
        ScriptedTurn(text="ok"),
    )
    completion: Completion = await asyncio.wait_for(env.submit("r4", frozenset({"mcp_sdk_*"})), 60)
    assert completion.ok
    assert env.tool_results(1) == ["globbed"]
    specs = {"mcp_sdk_echo": "ask", "mcp_other_echo": "ask"}
    policy = mcp_policy(ToolPolicy(), specs, frozenset({"mcp_sdk_*"}))
    assert policy.require_approval == {"mcp_other_echo"}
