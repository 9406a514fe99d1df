"""Server state changes as bus events (``mcp`` topic, ``mcp_server_status``) on a booted
runtime: a server that starts is ``starting`` then ``connected``, a missing command ``failed``,
an OAuth server answering 401 ``needs_login``, a connected server crashing in a call
``disconnected`` (then ``failed`` when the next run notices), and the runtime's stop tells
``disconnected`` for the servers it ends."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Any

from lemon_core.config import load_config
from lemon_core.mcp import MCP_HUB
from lemon_core.wire_methods import WIRE_METHODS, WireCall
from lemon_mcp import McpHubImpl
from lemon_runtime import Runtime

SCRIPTED = str(Path(__file__).parent / "servers" / "scripted_mcp_server.py")


async def _unauthorized(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        length = next(
            (int(line.split(":", 1)[1]) for line in head.split("\r\n")
             if line.lower().startswith("content-length:")), 0,
        )  # fmt: skip
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer\r\n"
                     b"content-length: 0\r\nconnection: close\r\n\r\n")  # fmt: skip
        await writer.drain()
    writer.close()


async def _until(
    sub: Any, seen: list[dict[str, Any]], want: set[tuple[str, str]], since: int = 0
) -> None:
    """Read events into ``seen`` until each wanted (name, state) came after ``since``."""
    while not want <= {(e["name"], e["state"]) for e in seen[since:]}:
        event = await asyncio.wait_for(sub.get(), 30)
        assert event.type == "mcp_server_status"
        assert event.meta == {"server": event.payload["name"]}
        seen.append(event.payload)


async def test_server_state_changes_are_bus_events(tmp_path: Path) -> None:
    server = await asyncio.start_server(_unauthorized, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(
        f'[mcp.servers.s]\ncommand = "{sys.executable}"\nargs = ["{SCRIPTED}", "crash_call"]\n'
        '[mcp.servers.idle]\ncommand = "never-started"\n'
        f'[mcp.servers.web]\nurl = "http://127.0.0.1:{port}/mcp"\nauth = "oauth"\n',
        encoding="utf-8",
    )
    loaded = load_config(home=home, cwd=work, environ={})
    seen: list[dict[str, Any]] = []
    try:
        async with Runtime(profile="full", config=loaded) as runtime:
            sub = runtime.bus.subscribe("mcp")
            hub = runtime.context.capabilities.require(MCP_HUB)
            assert isinstance(hub, McpHubImpl)
            await hub.discover(loaded.config, cwd=work)
            await _until(sub, seen, {("s", "connected"), ("idle", "failed"),
                                     ("web", "needs_login")})  # fmt: skip
            states = [(e["name"], e["state"]) for e in seen if e["name"] == "s"]
            assert states == [("s", "starting"), ("s", "connected")]
            ready = next(e for e in seen if e["state"] == "connected")
            assert ready["version"] == 1
            assert (ready["transport"], ready["detail"], ready["tools"]) == ("stdio", "stdio", 2)
            failed = next(e for e in seen if e["name"] == "idle" and e["state"] == "failed")
            assert "never-started" in failed["error"]
            assert next(s for s in hub.status() if s.name == "web").needs_login
            methods = runtime.context.capabilities.require(WIRE_METHODS)
            status_method = methods.get("mcp.status")
            assert status_method is not None
            rows = await status_method.handler(WireCall(method="mcp.status", params={}))
            logins = {r["name"]: r["needs_login"] for r in rows["servers"]}
            assert logins == {"idle": False, "s": False, "web": True}
            # a call crashes the connected server: its connection is lost
            found = await hub.discover(loaded.config, cwd=work)
            spec = next(t for t in found.tools if t.server == "s")
            mark = len(seen)
            await hub.call(spec, {})
            await _until(sub, seen, {("s", "disconnected")}, since=mark)
            assert seen[-1]["change"] == "lost"
            mark = len(seen)
            await hub.discover(loaded.config, cwd=work)  # noticed: failed, restarted later
            await _until(sub, seen, {("s", "failed")}, since=mark)
            assert "closed its stdout" in seen[-1]["error"]
            mark = len(seen)
        # the runtime's stop ended it, told while the bus was still up (queued for us)
        await _until(sub, seen, {("s", "disconnected")}, since=mark)
        assert seen[-1]["change"] == "stopped"
    finally:
        server.close()
        await server.wait_closed()
