"""MCP on the page, in Debian's Chromium against a real daemon with a real stdio MCP server: an
MCP tool's card names its server ("MCP tiny", as the TUI's card does) and a built-in tool's
does not; the sidebar's "MCP servers" shows each configured server's state, first from
``mcp.status`` and then from the ``mcp.server`` events the page subscribed to (the server
connecting with its tool count, a missing command failing with its reason)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from lemon_control_plane import ControlPlane
from lemon_runtime import Runtime

from .conftest import CHROMIUM
from .test_web_chat import WAIT_MS, open_chat, send, wait_idle

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Debian Chromium"),
]

#: A small stdio MCP server (newline-delimited JSON-RPC): one tool, ``echo``.
SERVER = """
import json, sys
ECHO = {"name": "echo", "description": "Echo the text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}
def send(m):
    sys.stdout.write(json.dumps(m) + "\\n"); sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line); method, rid = m.get("method"), m.get("id")
    if method == "initialize":
        version = m["params"]["protocolVersion"]
        send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": version,
              "capabilities": {"tools": {}}, "serverInfo": {"name": "tiny", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [ECHO]}})
    elif method == "tools/call":
        text = (m["params"].get("arguments") or {}).get("text", "")
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})
    elif rid is not None:
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
"""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def daemon(
    tmp_path_factory: pytest.TempPathFactory, runtime_at: Callable[..., Runtime]
) -> AsyncIterator[ControlPlane]:
    home = tmp_path_factory.mktemp("mcphome")
    script = home / "tiny_server.py"
    script.write_text(SERVER, encoding="utf-8")
    (home / "config.toml").write_text(
        f"[mcp.servers.tiny]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(script))}]\napproval = "allow"\n'
        '[mcp.servers.broken]\ncommand = "no-such-mcp-command"\n',
        encoding="utf-8",
    )
    async with runtime_at(home) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        yield plane


async def _tool(page: Any, name: str, arguments: dict[str, Any]) -> Any:
    """The card of ``name`` the prompt's call made (a run's note, such as the servers that did
    not start, is a card of its own)."""
    cards = page.locator(f".tool:has(.tool-name:text-is('{name}'))")
    before = await cards.count()
    await send(page, f"/tool {name} " + json.dumps(arguments))
    card = cards.nth(before)
    await card.and_(page.locator(".tool[data-state=done]")).wait_for(timeout=WAIT_MS)
    await wait_idle(page)
    return card


async def _row(page: Any, name: str, state: str) -> Any:
    row = page.locator(f".mcp-server:has(.mcp-name:text-is('{name}'))")
    await row.and_(page.locator(f".mcp-server[data-state={state}]")).wait_for(timeout=WAIT_MS)
    return row


async def test_an_mcp_card_names_its_server_and_the_sidebar_follows_the_servers(
    page: Any, daemon: ControlPlane, shot: Callable[[str], Path]
) -> None:
    await open_chat(page, daemon)
    # before any run: both configured, neither started (mcp.status)
    await page.locator("#mcp").wait_for(timeout=WAIT_MS)
    tiny = await _row(page, "tiny", "stopped")
    assert await tiny.locator(".mcp-state").inner_text() == "not started"
    await _row(page, "broken", "stopped")

    card = await _tool(page, "mcp_tiny_echo", {"text": "hello from the server"})
    label = card.locator(".tool-mcp")
    assert await label.is_visible()
    assert await label.inner_text() == "MCP tiny"
    assert await label.get_attribute("title") == "the tool echo of the MCP server tiny"
    assert await card.locator(".tool-name").inner_text() == "mcp_tiny_echo"
    await card.locator("summary").click()
    assert "hello from the server" in await card.locator(".tool-body").inner_text()

    # the run started both servers: the events moved the rows without a reload
    tiny = await _row(page, "tiny", "connected")
    assert await tiny.locator(".mcp-facts").inner_text() == "1 tool · stdio"
    broken = await _row(page, "broken", "failed")
    assert "no-such-mcp-command" in (await broken.get_attribute("title") or "")

    builtin = await _tool(page, "ls", {})
    assert not await builtin.locator(".tool-mcp").is_visible()
    await page.screenshot(path=shot("mcp-card-and-servers"))
    assert page.page_errors == []


async def test_a_reloaded_page_reads_the_servers_state_again(
    page: Any, daemon: ControlPlane
) -> None:
    # Self-contained (it may run alone or on another worker than the test above): a run
    # starts the servers, then a fresh load of the page must read their state again.
    await open_chat(page, daemon)
    await _tool(page, "mcp_tiny_echo", {"text": "start the servers"})
    await open_chat(page, daemon)
    tiny = await _row(page, "tiny", "connected")
    assert await tiny.locator(".mcp-facts").inner_text() == "1 tool · stdio"
    await _row(page, "broken", "failed")
    assert page.page_errors == []
