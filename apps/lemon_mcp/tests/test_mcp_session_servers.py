"""A session's own MCP servers (``McpServerSpec``, an editor's over ACP) through the hub: each
session gets its own server process, its tools name the session, another session's call is
refused, a configured server's name is not taken over, and the bounds stop idle and least
recently used servers."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from lemon_core.config import Config
from lemon_core.execution import ExecutionContractError, McpServerSpec, RunRequest
from lemon_core.mcp import McpDiscovery, McpToolSpec
from lemon_mcp import McpHubImpl
from lemon_mcp._session import SessionServers

ConfigFor = Callable[..., tuple[Config, Path, Path]]
SDK = str(Path(__file__).parent / "servers" / "sdk_mcp_server.py")
SCRIPTED = str(Path(__file__).parent / "servers" / "scripted_mcp_server.py")
PYTHON = sys.executable


def _spec(name: str = "sdk") -> McpServerSpec:
    return McpServerSpec(name=name, command=PYTHON, args=(SDK, "stdio"))


def _hub(home: Path) -> McpHubImpl:
    return McpHubImpl(home=home, environ={"PATH": os.environ["PATH"]})


async def test_each_session_gets_its_own_server_and_only_its_own_tools(
    config_for: ConfigFor,
) -> None:
    config, home, work = config_for("")
    hub = _hub(home)
    try:
        a = await hub.discover(config, cwd=work, session_key="acp:a", servers=[_spec()])
        b = await hub.discover(config, cwd=work, session_key="acp:b", servers=[_spec()])
        assert a.unavailable == {}
        assert b.unavailable == {}
        echo_a = next(t for t in a.tools if t.tool == "echo")
        echo_b = next(t for t in b.tools if t.tool == "echo")
        assert (echo_a.name, echo_a.session_key, echo_a.approval) == (
            "mcp_sdk_echo",
            "acp:a",
            "ask",
        )
        assert echo_b.session_key == "acp:b"
        assert (await hub.call(echo_a, {"text": "A"})).content == "A"
        assert (await hub.call(echo_b, {"text": "B"})).content == "B"
        # Nothing configured and no session servers: a third session sees no tool.
        assert (await hub.discover(config, cwd=work, session_key="acp:c")).tools == ()
        # A tool naming a session that started no such server is refused.
        forged = msgspec.structs.replace(echo_a, session_key="acp:c")
        out = await hub.call(forged, {"text": "x"})
        assert out.is_error
        assert "unavailable" in out.content
    finally:
        await hub.aclose()
    out = await hub.call(echo_a, {"text": "after"})
    assert out.is_error  # the hub's stop ended the session servers too


async def test_a_session_server_cannot_take_a_configured_servers_name(
    config_for: ConfigFor,
) -> None:
    config, home, work = config_for(
        f'[mcp.servers.sdk]\ncommand = "{PYTHON}"\nargs = ["{SDK}", "stdio"]\napproval = "allow"\n'
    )
    hub = _hub(home)
    try:
        found = await hub.discover(
            config, cwd=work, session_key="acp:a", servers=[_spec("sdk"), _spec("mine")]
        )
        assert "configured server" in found.unavailable["sdk"]
        by_name = {t.name: t for t in found.tools}
        assert by_name["mcp_sdk_echo"].session_key is None  # the configured one
        assert by_name["mcp_sdk_echo"].approval == "allow"
        assert by_name["mcp_mine_echo"].session_key == "acp:a"
        assert len(by_name) == 4
    finally:
        await hub.aclose()


async def test_idle_and_least_recently_used_session_servers_are_stopped(tmp_path: Path) -> None:
    now = [0.0]
    hub = McpHubImpl(home=tmp_path, environ={"PATH": os.environ["PATH"]})
    servers = SessionServers(
        stdio_transport=hub.transport_for, max_servers=2, idle_s=100.0, clock=lambda: now[0]
    )

    async def tools(session: str) -> dict[str, McpToolSpec]:
        found = await servers.merge(
            McpDiscovery(), session_key=session, servers=[_spec()], cwd=tmp_path, wait_s=30
        )
        return {t.tool: t for t in found.tools}

    try:
        a = await tools("s:a")
        now[0] = 10.0
        await tools("s:b")
        assert servers.statistics()["running"] == 2
        now[0] = 20.0
        await tools("s:c")  # over max_servers: the least recently used (s:a) is stopped
        assert servers.statistics() == {"servers": 2, "running": 2, "max_servers": 2}
        out = await servers.call(a["echo"], {"text": "x"})
        assert out.is_error
        now[0] = 500.0
        await tools("s:d")  # s:b and s:c idle for over idle_s: stopped
        assert servers.statistics()["servers"] == 1
    finally:
        await servers.aclose()
        await hub.aclose()


def test_a_bad_session_server_is_refused_with_its_field() -> None:
    with pytest.raises(ExecutionContractError, match="needs a command"):
        McpServerSpec(name="x", command=" ")
    with pytest.raises(ExecutionContractError, match="http:// or https://"):
        McpServerSpec(name="x", transport="http", url="ftp://host")
    with pytest.raises(ExecutionContractError, match="two MCP servers"):
        RunRequest(origin="acp", session_key="acp:a", prompt="", mcp_servers=(_spec(), _spec()))
    with pytest.raises(msgspec.ValidationError, match="name"):
        msgspec.convert({"name": "a b", "command": "x"}, McpServerSpec)


async def test_an_idle_session_server_stops_on_its_timer_without_another_discovery(
    tmp_path: Path,
) -> None:
    """No later run is needed: the timer stops a server unused for ``idle_s``, and a use in
    between moves its stop on."""
    import asyncio

    hub = McpHubImpl(home=tmp_path, environ={"PATH": os.environ["PATH"]})
    servers = SessionServers(stdio_transport=hub.transport_for, idle_s=0.5)
    loop = asyncio.get_running_loop()
    try:
        found = await servers.merge(
            McpDiscovery(), session_key="s:a", servers=[_spec()], cwd=tmp_path, wait_s=30
        )
        echo = next(t for t in found.tools if t.tool == "echo")
        assert servers.statistics()["running"] == 1
        assert (await servers.call(echo, {"text": "used"})).content == "used"
        deadline = loop.time() + 30
        while servers.statistics()["servers"] and loop.time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)  # polling the stop, with a deadline (no event to wait on)
        assert servers.statistics() == {"servers": 0, "running": 0, "max_servers": 32}
        out = await servers.call(echo, {"text": "late"})
        assert out.is_error
        assert "unavailable" in out.content
    finally:
        await servers.aclose()
        await hub.aclose()


async def test_closing_waits_for_a_stop_the_idle_timer_began(tmp_path: Path) -> None:
    """The timer is ending an idle server that ignores TERM (its stop takes the 2 s grace)
    when the servers are closed: aclose cancels the timer but waits for that stop, so no
    process outlives it. (Its asyncio transport used to be left to the garbage collector,
    whose ResourceWarning failed a later test on the same worker.)"""
    import asyncio

    hub = McpHubImpl(home=tmp_path, environ={"PATH": os.environ["PATH"]})
    servers = SessionServers(stdio_transport=hub.transport_for, idle_s=0.2)
    spec = McpServerSpec(name="stubborn", command=PYTHON, args=(SCRIPTED, "ok", "stubborn"))
    loop = asyncio.get_running_loop()
    try:
        found = await servers.merge(
            McpDiscovery(), session_key="s:a", servers=[spec], cwd=tmp_path, wait_s=30
        )
        assert {t.tool for t in found.tools} == {"echo", "add"}
        client = servers._entries[("s:a", "stubborn")].client
        assert client is not None
        pid = client.transport.pid  # type: ignore[attr-defined]
        deadline = loop.time() + 30
        while servers.statistics()["servers"] and loop.time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.02)  # the timer took it: its stop is under way (TERM ignored)
        assert servers.statistics()["servers"] == 0
    finally:
        await servers.aclose()
        await hub.aclose()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # ended and reaped by the time aclose returned
