"""Resuming a cut POST answer stream (Streamable HTTP): a scripted server on 127.0.0.1 answers a
``tools/call`` with an SSE stream that carries a priming event (an id and a retry) and then is
cut mid-body or ends before the response. The client must resume it with a GET carrying
``Last-Event-ID`` and get the response replayed there; a stream that can never be resumed, or
one without any event id, fails the call with the reason (never a hang)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest

from lemon_mcp import McpClient, McpConnectionError
from lemon_mcp._http import HttpTransport


class _CuttingServer:
    """``mode``: ``cut`` (the body breaks off mid-chunk), ``end`` (the stream ends cleanly
    without the response), ``never`` (resumed streams never carry it either), ``no-id`` (the
    stream carries no event id)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.resumes: list[dict[str, str]] = []
        self.handlers: set[asyncio.Task[object]] = set()
        self.call_id: int | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.handlers.add(task)
        try:
            await self._handle(reader, writer)
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        method = head.split(" ", 1)[0]
        headers = {
            k.strip().lower(): v.strip()
            for k, _, v in (line.partition(":") for line in head.split("\r\n")[1:] if line)
        }
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        if method == "DELETE":
            writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        elif method == "GET":
            await self._get(headers, writer)
        elif "id" not in (message := json.loads(body)):
            writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
        elif message["method"] == "initialize":
            result = {"protocolVersion": message["params"]["protocolVersion"],
                      "capabilities": {"tools": {}},
                      "serverInfo": {"name": "cutting", "version": "1"}}  # fmt: skip
            payload = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: s1\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(payload), payload.encode())
            )
        else:
            self.call_id = message["id"]
            await self._call_stream(writer)
        await writer.drain()

    async def _call_stream(self, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        priming = b"data: \n\n" if self.mode == "no-id" else b"id: c1-1\nretry: 20\ndata: \n\n"
        writer.write(b"%x\r\n%s\r\n" % (len(priming), priming))
        if self.mode == "cut":
            partial = b'id: c1-2\ndata: {"jsonrpc":"2.0","id":'
            writer.write(b"%x\r\n%s" % (len(partial) + 40, partial))  # the chunk never completes
            await writer.drain()
            writer.transport.abort()
            return
        writer.write(b"0\r\n\r\n")  # a clean end, before the response

    async def _get(self, headers: dict[str, str], writer: asyncio.StreamWriter) -> None:
        if "last-event-id" not in headers:
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
            return
        self.resumes.append(headers)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        if self.mode == "never":
            writer.write(b"id: r%d\ndata: \n\n" % len(self.resumes))
            return
        result = {"content": [{"type": "text", "text": "resumed"}], "isError": False}
        payload = json.dumps({"jsonrpc": "2.0", "id": self.call_id, "result": result})
        writer.write(b"id: c1-3\ndata: " + payload.encode() + b"\n\n")


@contextlib.asynccontextmanager
async def _client(mode: str) -> AsyncIterator[tuple[_CuttingServer, McpClient]]:
    scripted = _CuttingServer(mode)
    server = await asyncio.start_server(scripted.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = McpClient(HttpTransport(name="cut", url=f"http://127.0.0.1:{port}/mcp"), name="cut")
    await client.start()
    try:
        yield scripted, client
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
        for task in list(scripted.handlers):
            with contextlib.suppress(asyncio.CancelledError):
                await task


@pytest.mark.parametrize("mode", ["cut", "end"])
async def test_a_cut_call_stream_is_resumed_with_last_event_id(mode: str) -> None:
    async with _client(mode) as (scripted, client):
        result = await client.call_tool("t", {}, deadline_s=10)
        assert result["content"] == [{"type": "text", "text": "resumed"}]
        assert len(scripted.resumes) == 1
        assert scripted.resumes[0]["last-event-id"] == "c1-1"
        assert scripted.resumes[0]["mcp-session-id"] == "s1"
        assert scripted.resumes[0]["accept"] == "text/event-stream"


async def test_a_stream_never_resumed_fails_the_call_with_the_reason() -> None:
    async with _client("never") as (scripted, client):
        with pytest.raises(McpConnectionError, match="resuming it failed 5 times"):
            await client.call_tool("t", {}, deadline_s=10)
        ids = [h["last-event-id"] for h in scripted.resumes]
        assert ids == ["c1-1", "r1", "r2", "r3", "r4"]  # each try resumes from the latest id


async def test_a_stream_without_an_event_id_cannot_be_resumed() -> None:
    async with _client("no-id") as (scripted, client):
        with pytest.raises(McpConnectionError, match="no event id"):
            await client.call_tool("t", {}, deadline_s=10)
        assert scripted.resumes == []
