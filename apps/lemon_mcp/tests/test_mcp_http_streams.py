"""Server-initiated messages and the legacy transport, against the official SDK's servers on
127.0.0.1 (real processes): the Streamable HTTP GET stream carries a ``list_changed`` sent
after every POST was answered, the hub refreshes its list in the background (telling only the
difference), and a legacy HTTP+SSE server is reached at the same URL by falling back."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from lemon_core.config import Config
from lemon_mcp import McpClient, McpConnectionError, McpHubImpl
from lemon_mcp._http import HttpTransport, SseTransport

SDK = str(Path(__file__).parent / "servers" / "sdk_mcp_server.py")
ConfigFor = Callable[..., tuple[Config, Path, Path]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def _sdk(mode: str) -> AsyncIterator[int]:
    port = _free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, SDK, mode, str(port), "extras",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        for _ in range(600):  # ready when it accepts connections (bounded: 60 s)
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            await asyncio.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)


@pytest.fixture
async def http_port() -> AsyncIterator[int]:
    async with _sdk("http") as port:
        yield port


@pytest.fixture
async def sse_port() -> AsyncIterator[int]:
    async with _sdk("sse") as port:
        yield port


async def test_list_changed_on_the_get_stream_refreshes_the_tools_in_the_background(
    http_port: int, config_for: ConfigFor, caplog: pytest.LogCaptureFixture
) -> None:
    config, home, work = config_for(
        f'[mcp.servers.web]\nurl = "http://127.0.0.1:{http_port}/mcp"\n'
    )
    hub = McpHubImpl(home=home, environ={})
    changed = asyncio.Event()
    unsubscribe = hub.subscribe(
        lambda name, change: changed.set() if change == "tools_changed" else None
    )
    try:
        found = await hub.discover(config, cwd=work)
        by_name = {t.name: t for t in found.tools}
        assert "mcp_web_late" not in by_name
        [status] = hub.status()
        assert status.detail == "streamable-http"
        caplog.set_level("INFO", logger="lemon_mcp")
        out = await hub.call(by_name["mcp_web_grow"], {})
        assert out.content == "growing"
        await asyncio.wait_for(changed.wait(), 10)  # sent after the POST was answered
        told = [r.getMessage() for r in caplog.records if "tools changed" in r.getMessage()]
        assert told == ["mcp server web: tools changed (+late -none)"]  # the difference only
        again = await hub.discover(config, cwd=work)
        assert "mcp_web_late" in {t.name for t in again.tools}
        late = {t.name: t for t in again.tools}["mcp_web_late"]
        assert (await hub.call(late, {})).content == "late"
    finally:
        unsubscribe()
        await hub.aclose()


async def test_the_get_stream_is_open_after_initialization(http_port: int) -> None:
    transport = HttpTransport(name="w", url=f"http://127.0.0.1:{http_port}/mcp")
    client = McpClient(transport, name="w")
    await client.start()
    try:
        assert transport.get_stream_state == "open"
        assert client.protocol_version == "2025-11-25"  # the newest initialize-era version
        assert transport.protocol_version == "2025-11-25"
        assert {r["name"] for r in await client.list_resources()} == {"readme"}
        assert {p["name"] for p in await client.list_prompts()} == {"greet"}
    finally:
        await client.aclose()
    assert transport.get_stream_state == "open"
    assert not transport._tasks  # the GET stream's task was ended


async def test_a_legacy_sse_server_is_reached_by_falling_back(
    sse_port: int, config_for: ConfigFor
) -> None:
    config, home, work = config_for(f'[mcp.servers.old]\nurl = "http://127.0.0.1:{sse_port}/sse"\n')
    hub = McpHubImpl(home=home, environ={})
    try:
        found = await hub.discover(config, cwd=work)
        assert found.unavailable == {}
        by_name = {t.name: t for t in found.tools}
        assert (await hub.call(by_name["mcp_old_echo"], {"text": "legacy"})).content == "legacy"
        assert (await hub.call(by_name["mcp_old_add"], {"a": 4, "b": 5})).content == "9"
        [status] = hub.status()
        assert status.detail == "sse (legacy)"
    finally:
        await hub.aclose()


async def test_streamable_http_only_does_not_fall_back(
    sse_port: int, config_for: ConfigFor
) -> None:
    config, home, work = config_for(
        f'[mcp.servers.old]\nurl = "http://127.0.0.1:{sse_port}/sse"\n'
        'http_transport = "streamable-http"\n'
    )
    hub = McpHubImpl(home=home, environ={})
    try:
        found = await hub.discover(config, cwd=work)
        assert "HTTP 405" in found.unavailable["old"]
    finally:
        await hub.aclose()


async def test_the_legacy_client_lists_and_its_stream_ending_ends_the_connection(
    sse_port: int,
) -> None:
    transport = SseTransport(name="o", url=f"http://127.0.0.1:{sse_port}/sse")
    client = McpClient(transport, name="o")
    await client.start()
    try:
        assert transport.endpoint is not None
        assert transport.endpoint.startswith(f"http://127.0.0.1:{sse_port}/messages/")
        assert client.protocol_version is not None
        assert {t["name"] for t in await client.list_tools()} >= {"echo", "add", "grow"}
    finally:
        await client.aclose()
    with pytest.raises(McpConnectionError):
        await client.ping()


_handlers: set[asyncio.Task[object]] = set()


async def _handlers_done() -> None:
    """Wait for the scripted servers' connection handlers (no writer outlives its loop)."""
    pending = [t for t in _handlers if not t.done()]
    await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 10)
    _handlers.clear()


def _tracked(task: asyncio.Task[object] | None) -> None:
    if task is not None:
        _handlers.add(task)


async def _endpoint_elsewhere(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    _tracked(asyncio.current_task())
    await reader.readuntil(b"\r\n\r\n")
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
        b"event: endpoint\ndata: http://evil.example/messages\n\n"
    )
    await writer.drain()
    with contextlib.suppress(ConnectionError):
        await reader.read()  # hold the stream until the client leaves
    writer.close()


async def test_a_legacy_endpoint_on_another_origin_is_refused() -> None:
    server = await asyncio.start_server(_endpoint_elsewhere, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = McpClient(SseTransport(name="x", url=f"http://127.0.0.1:{port}/sse"), name="x")
    try:
        with pytest.raises(McpConnectionError, match="another origin"):
            await asyncio.wait_for(client.start(), 10)
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
        await _handlers_done()


class _ResumingServer:
    """A scripted Streamable HTTP server: its first GET stream sends an event with an id and a
    retry, then ends; the second must carry ``Last-Event-ID`` and gets ``list_changed``."""

    def __init__(self) -> None:
        self.gets: list[dict[str, str]] = []
        self.second_get = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _tracked(asyncio.current_task())
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        method = head.split(" ", 1)[0]
        headers = {
            k.strip().lower(): v.strip()
            for k, _, v in (line.partition(":") for line in head.split("\r\n")[1:] if line)
        }
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        if method == "POST":
            message = json.loads(body)
            if "id" not in message:
                writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
            else:
                result = {"protocolVersion": message["params"]["protocolVersion"],
                          "capabilities": {"tools": {"listChanged": True}},
                          "serverInfo": {"name": "resuming", "version": "1"}}  # fmt: skip
                payload = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: s1\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(payload), payload.encode())
                )
            await writer.drain()
            writer.close()
            return
        self.gets.append(headers)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        if len(self.gets) == 1:
            writer.write(
                b'id: 7\nretry: 50\ndata: {"jsonrpc":"2.0","method":"notifications/x"}\n\n'
            )
            await writer.drain()
            writer.close()  # the stream ends: the client reopens it
            return
        note = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'
        writer.write(b"id: 8\ndata: " + note + b"\n\n")
        await writer.drain()
        self.second_get.set()
        with contextlib.suppress(ConnectionError):
            await reader.read()  # held open until the client leaves
        writer.close()


async def test_the_get_stream_is_reopened_with_last_event_id() -> None:
    scripted = _ResumingServer()
    server = await asyncio.start_server(scripted.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport = HttpTransport(name="r", url=f"http://127.0.0.1:{port}/mcp")
    client = McpClient(transport, name="r")
    changed = asyncio.Event()
    client.on_tools_changed = changed.set
    try:
        await client.start()
        await asyncio.wait_for(changed.wait(), 10)
        assert len(scripted.gets) == 2
        assert "last-event-id" not in scripted.gets[0]
        assert scripted.gets[1]["last-event-id"] == "7"
        assert scripted.gets[1]["mcp-session-id"] == "s1"
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
        await _handlers_done()
