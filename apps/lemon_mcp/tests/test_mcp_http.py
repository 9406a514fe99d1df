"""The Streamable HTTP client against the official SDK's server on 127.0.0.1 (a real
process), and the frame cap against a small local server sending an oversized SSE event."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from lemon_core.config import Config
from lemon_mcp import McpClient, McpConnectionError, McpHubImpl
from lemon_mcp._http import HttpTransport

SDK = str(Path(__file__).parent / "servers" / "sdk_mcp_server.py")
ConfigFor = Callable[..., tuple[Config, Path, Path]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def sdk_url() -> AsyncIterator[str]:
    port = _free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        SDK,
        "http",
        str(port),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        for _ in range(300):  # ready when it accepts connections (bounded: 30 s)
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            await asyncio.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)


async def test_the_hub_lists_and_calls_tools_over_streamable_http(
    sdk_url: str, config_for: ConfigFor
) -> None:
    config, home, work = config_for(
        f'[mcp.servers.web]\nurl = "{sdk_url}"\nbearer_token_env = "WEB_TOKEN"\n'
    )
    hub = McpHubImpl(home=home, environ={"WEB_TOKEN": "t0ken"})
    try:
        found = await hub.discover(config, cwd=work)
        assert found.unavailable == {}
        by_name = {t.name: t for t in found.tools}
        assert set(by_name) == {"mcp_web_echo", "mcp_web_add"}
        out = await hub.call(by_name["mcp_web_echo"], {"text": "over http"})
        assert (out.content, out.is_error) == ("over http", False)
        assert (await hub.call(by_name["mcp_web_add"], {"a": 1, "b": 2})).content == "3"
    finally:
        await hub.aclose()


async def test_the_session_id_is_kept_and_the_version_sent(sdk_url: str) -> None:
    transport = HttpTransport(name="w", url=sdk_url)
    client = McpClient(transport, name="w")
    await client.start()
    try:
        assert transport.session_id
        assert transport.protocol_version == client.protocol_version
        assert len(await client.list_tools()) == 2
    finally:
        await client.aclose()


async def _oversized_sse_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
    chunk = b"data: " + b"x" * 65536 + b"\n"
    with contextlib.suppress(ConnectionError):
        for _ in range(64):  # 4 MiB in one event, over the 1 MiB cap below
            writer.write(chunk)
            await writer.drain()
    writer.close()


async def test_an_sse_event_over_the_cap_ends_the_connection() -> None:
    server = await asyncio.start_server(_oversized_sse_server, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport = HttpTransport(name="big", url=f"http://127.0.0.1:{port}/mcp",
                              max_frame_bytes=1024 * 1024)  # fmt: skip
    client = McpClient(transport, name="big")
    try:
        with pytest.raises(McpConnectionError, match="over 1048576 bytes"):
            await client.start()
        assert "over 1048576 bytes" in (client.closed_reason or "")
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()


async def test_a_dual_era_server_is_spoken_to_in_the_stateless_era(sdk_url: str) -> None:
    """The SDK's server speaks both eras: ``server/discover`` answers, so there is no
    ``initialize``, no session and no GET stream; every request carries the ``_meta``
    envelope and the ``Mcp-Method`` / ``Mcp-Name`` headers (the server checks each against
    the body and refuses a mismatch)."""
    transport = HttpTransport(name="w", url=sdk_url, stateless=True)
    client = McpClient(transport, name="w")
    await client.start()
    try:
        assert client.stateless
        assert client.protocol_version == transport.protocol_version == "2026-07-28"
        assert transport.session_id is None
        assert "tools" in client.capabilities
        assert sorted(t["name"] for t in await client.list_tools()) == ["add", "echo"]
        result = await client.call_tool("echo", {"text": "hi"}, deadline_s=10)
        assert result["content"][0]["text"] == "hi"
        await client.ping()
        assert transport.get_stream_state == "closed"  # none in this era
    finally:
        await client.aclose()
