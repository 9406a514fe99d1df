"""Through the session port of a booted runtime (profile ``full``: the agent, the gateway, the
router and this app) on the offline scripted model (``/tool NAME {json}`` calls a tool): an
MCP tool the model calls asks for an approval, runs on the real server once approved, and its
result is the tool card's message; a denied call never reaches the server."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from lemon_core.config import load_config
from lemon_core.execution import RunRequest
from lemon_core.mcp import MCP_HUB
from lemon_core.sessions import SESSION_PORT, ApprovalAsked, RunEnded, ToolCard
from lemon_runtime import Runtime

SDK = str(Path(__file__).parent / "servers" / "sdk_mcp_server.py")
SESSION = "agent:default:main"


async def _run(tmp_path: Path, decision: str) -> tuple[list[ApprovalAsked], list[ToolCard]]:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        f'[mcp.servers.sdk]\ncommand = "{sys.executable}"\nargs = ["{SDK}", "stdio"]\n',
        encoding="utf-8",
    )
    loaded = load_config(home=home, cwd=work, environ={})
    asked: list[ApprovalAsked] = []
    cards: list[ToolCard] = []
    async with Runtime(profile="full", config=loaded) as runtime:
        assert runtime.context.capabilities.get(MCP_HUB) is not None
        port = runtime.context.capabilities.require(SESSION_PORT)
        stream = port.watch(SESSION)
        try:
            receipt = await port.submit(
                RunRequest(
                    origin="test",
                    session_key=SESSION,
                    prompt='/tool mcp_sdk_echo {"text": "through the port"}',
                    cwd=str(work),
                )
            )
            while True:
                event = await asyncio.wait_for(stream.get(), 60)
                if isinstance(event, ApprovalAsked):
                    asked.append(event)
                    await port.resolve_approval(event.approval_id, decision)
                elif isinstance(event, ToolCard) and event.phase == "completed":
                    cards.append(event)
                elif isinstance(event, ToolCard) and event.detail.get("tool") == "mcp_sdk_echo":
                    assert event.detail["mcp"] == {"server": "sdk", "tool": "echo"}
                elif isinstance(event, RunEnded) and event.run_id == receipt.run_id:
                    break
        finally:
            stream.close()
    return asked, cards


async def test_an_approved_mcp_call_runs_through_the_session_port(tmp_path: Path) -> None:
    asked, cards = await _run(tmp_path, "approve_once")
    (question,) = asked
    assert question.tool == "mcp_sdk_echo"
    assert question.action == {"text": "through the port"}
    card = next(c for c in cards if c.detail.get("tool") == "mcp_sdk_echo")
    assert card.ok
    assert card.message == "through the port"
    assert card.detail["mcp"] == {"server": "sdk", "tool": "echo"}  # the card names its server


async def test_a_denied_mcp_call_is_not_run(tmp_path: Path) -> None:
    asked, cards = await _run(tmp_path, "deny")
    assert [a.tool for a in asked] == ["mcp_sdk_echo"]
    card = next(c for c in cards if c.detail.get("tool") == "mcp_sdk_echo")
    assert card.ok is False
    assert "not approved" in (card.message or "")


async def test_mcp_status_and_logs_are_wire_methods_of_the_booted_runtime(tmp_path: Path) -> None:
    from lemon_core.errors import UsageError
    from lemon_core.wire_methods import WIRE_METHODS, WireCall

    scripted = str(Path(__file__).parent / "servers" / "scripted_mcp_server.py")
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(
        f'[mcp.servers.s]\ncommand = "{sys.executable}"\nargs = ["{scripted}", "ok"]\n'
        '[mcp.servers.idle]\ncommand = "never-started"\n',
        encoding="utf-8",
    )
    loaded = load_config(home=home, cwd=work, environ={})
    async with Runtime(profile="full", config=loaded) as runtime:
        methods = runtime.context.capabilities.require(WIRE_METHODS)
        status_method, logs_method = methods.get("mcp.status"), methods.get("mcp.logs")
        assert status_method is not None
        assert logs_method is not None
        assert (status_method.scope, logs_method.scope) == ("admin", "admin")
        before = await status_method.handler(WireCall(method="mcp.status", params={}))
        assert [(s["name"], s["state"]) for s in before["servers"]] == [
            ("idle", "stopped"), ("s", "stopped"),
        ]  # fmt: skip
        hub = runtime.context.capabilities.require(MCP_HUB)
        await hub.discover(loaded.config, cwd=work)  # as a run does: both start
        after = await status_method.handler(WireCall(method="mcp.status", params={}))
        rows = {s["name"]: s for s in after["servers"]}
        ready = rows["s"]
        assert (ready["state"], ready["tools"], ready["detail"]) == ("ready", 2, "stdio")
        assert rows["idle"]["state"] == "failed"
        assert "never-started" in rows["idle"]["last_error"]
        logs = await logs_method.handler(WireCall(method="mcp.logs", params={"name": "s"}))
        assert "a banner on stderr" in logs["stderr"]
        with pytest.raises(UsageError, match="no MCP server named 'nope'"):
            await logs_method.handler(WireCall(method="mcp.logs", params={"name": "nope"}))
    assert methods.get("mcp.status") is None  # unregistered when the app stopped
