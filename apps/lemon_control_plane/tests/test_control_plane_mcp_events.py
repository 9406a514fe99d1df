"""The MCP servers' state on the wire: lemon_mcp's ``mcp_server_status`` bus events (topic
``mcp``) reach the connections that asked for the topic (``events.subscribe {topics:
["mcp"]}``, admin scope) as ``mcp.server``, and an MCP tool's card names its server
(``action.detail.mcp``). Over a booted daemon with a real stdio MCP server and real WebSocket
clients."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lemon_control_plane import ControlPlane
from lemon_control_plane.server import EVENTS
from lemon_control_plane.testing import WireClient, plane_client
from lemon_core.mcp import MCP_HUB
from lemon_runtime import Runtime

SERVER = str(Path(__file__).parent / "servers" / "echo_mcp_server.py")
SESSION = "agent:default:main"


def _configure(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        f'[mcp.servers.tiny]\ncommand = "{sys.executable}"\nargs = ["{SERVER}"]\n'
        'approval = "allow"\n',
        encoding="utf-8",
    )


async def _server(c: WireClient, name: str, state: str | None = None) -> dict[str, Any]:
    """The first ``mcp.server`` event (seen or to come) of server ``name`` (in ``state``)."""
    return await c.until(
        lambda f: (
            f.get("event") == "mcp.server"
            and f["payload"]["name"] == name
            and (state is None or f["payload"]["state"] == state)
        )
    )


def _plane(runtime: Runtime) -> ControlPlane:
    plane = runtime.handle("lemon_control_plane")
    assert isinstance(plane, ControlPlane)
    return plane


async def test_a_subscriber_of_the_mcp_topic_sees_a_server_start_and_others_do_not(
    tmp_path: Path, boot: Callable[..., Runtime], work: Path
) -> None:
    _configure(tmp_path)
    async with boot() as runtime:
        clients = plane_client(_plane(runtime))
        async with clients() as watcher, clients() as other:
            assert "mcp.server" in EVENTS
            answer = await watcher.call("events.subscribe", {"topics": ["mcp"]})
            assert answer == {"mode": "all", "sessionKeys": None, "topics": ["mcp"]}
            hub = runtime.context.capabilities.require(MCP_HUB)
            await hub.discover(runtime.config, cwd=work)  # as a run does: the server starts
            starting = await _server(watcher, "tiny", "starting")
            ready = await _server(watcher, "tiny", "connected")
            # the status the wire method tells agrees with the event
            status = await watcher.call("mcp.status")
            # everything broadcast before this answer precedes it on the other socket too
            await other.call("health")
            assert other.events("mcp.server") == []
    assert starting["payload"]["change"] == "starting"
    payload = ready["payload"]
    assert payload == {
        "version": 1,
        "name": "tiny",
        "state": "connected",
        "change": "ready",
        "transport": "stdio",
        "detail": "stdio",
        "tools": 1,
        "error": None,
        "timestampMs": payload["timestampMs"],
    }
    assert isinstance(payload["timestampMs"], int)
    (row,) = [s for s in status["servers"] if s["name"] == "tiny"]
    assert (row["state"], row["tools"]) == ("ready", 1)


async def test_the_topic_takes_the_admin_scope_and_must_be_known(
    boot: Callable[..., Runtime],
) -> None:
    async with boot() as runtime:
        clients = plane_client(_plane(runtime))
        async with clients(handshake=False) as reader:
            hello = await reader.connect(scopes=["read"])
            assert hello["type"] == "hello-ok"
            refused = await reader.request("events.subscribe", {"topics": ["mcp"]})
            assert refused["ok"] is False
            assert refused["error"]["code"] == "FORBIDDEN"
            assert "admin" in refused["error"]["message"]
        async with clients() as owner:
            unknown = await owner.request("events.subscribe", {"topics": ["nope"]})
            assert unknown["error"]["code"] == "INVALID_PARAMS"
            assert "unknown topic 'nope'" in unknown["error"]["message"]
            empty = await owner.request("events.subscribe", {"topics": []})
            assert empty["error"]["code"] == "INVALID_REQUEST"
            # topics and sessions are independent: narrowing to a session keeps the topic
            await owner.call("events.subscribe", {"topics": ["mcp"]})
            narrowed = await owner.call("events.subscribe", {"sessionKeys": [SESSION]})
            assert narrowed == {"mode": "sessions", "sessionKeys": [SESSION], "topics": ["mcp"]}
            left = await owner.call("events.unsubscribe", {"topics": ["mcp"]})
            assert left == {"mode": "sessions", "sessionKeys": [SESSION], "topics": []}


async def test_an_unsubscribed_connection_stops_getting_them_and_a_malformed_one_is_dropped(
    boot: Callable[..., Runtime],
) -> None:
    async with boot() as runtime, plane_client(_plane(runtime))() as c:
        await c.call("events.subscribe", {"topics": ["mcp"]})
        bus = runtime.bus
        bus.broadcast_event("mcp", "mcp_server_status", {"state": "failed"})  # no name
        bus.broadcast_event(
            "mcp", "mcp_server_status",
            {"version": 1, "name": "a", "state": "weird", "tools": "many", "error": 3},
        )  # fmt: skip
        first = await _server(c, "a")
        assert first["payload"]["state"] == "unknown"
        assert (first["payload"]["tools"], first["payload"]["error"]) == (None, None)
        await c.call("events.unsubscribe", {"topics": ["mcp"]})
        bus.broadcast_event("mcp", "mcp_server_status", {"name": "b", "state": "failed"})
        await c.call("events.subscribe", {"topics": ["mcp"]})
        bus.broadcast_event("mcp", "mcp_server_status", {"name": "c", "state": "failed"})
        await _server(c, "c")
        names = [f["payload"]["name"] for f in c.events("mcp.server")]
    assert names == ["a", "c"]  # the nameless one dropped, "b" sent while unsubscribed


async def test_an_mcp_tool_card_names_its_server_and_tool(
    tmp_path: Path, boot: Callable[..., Runtime]
) -> None:
    _configure(tmp_path)
    async with boot() as runtime, plane_client(_plane(runtime))() as c:
        prompt = '/tool mcp_tiny_echo {"text": "from the server"}'
        sent = await c.call("chat.send", {"sessionKey": SESSION, "prompt": prompt})
        done = await c.completed(sent["runId"])
        assert done["payload"]["ok"], done
        cards = [
            f["payload"]
            for f in c.events("agent")
            if f["payload"].get("type") == "tool_use"
            and f["payload"]["action"]["detail"].get("name") == "mcp_tiny_echo"
        ]
    assert [card["phase"] for card in cards] == ["started", "completed"]
    for card in cards:
        assert card["action"]["detail"]["mcp"] == {"server": "tiny", "tool": "echo"}
    assert cards[-1]["action"]["detail"]["result"] == "from the server"
