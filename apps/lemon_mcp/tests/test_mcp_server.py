"""The server side's wire (``serve_streams``) with a small host: bad lines get JSON-RPC errors,
unknown methods and tools are refused, a cancelled call gets no answer, and our own client
speaks to it (initialize, tools/list, tools/call, ping)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from lemon_mcp import ClientPeer, McpClient, ServedResult, ServedTool, serve_streams


class _Host:
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    def tools(self) -> Sequence[ServedTool]:
        return (
            ServedTool(name="echo", description="Echo.", input_schema={"type": "object"}),
            ServedTool(name="slow", description="Never ends.", input_schema={"type": "object"}),
        )

    async def call(
        self, name: str, arguments: Mapping[str, Any], peer: ClientPeer, call_id: str
    ) -> ServedResult:
        if name == "slow":
            self.started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        return ServedResult(text=str(arguments.get("text", "")))


class _Lines:
    def __init__(self) -> None:
        self.out: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._buffer = b""

    def write(self, data: bytes) -> None:
        self._buffer += data

    async def drain(self) -> None:
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            await self.out.put(json.loads(line))


async def test_bad_input_is_answered_and_a_cancelled_call_is_not() -> None:
    host, lines, reader = _Host(), _Lines(), asyncio.StreamReader()
    served = asyncio.ensure_future(serve_streams(host, reader, lines))
    try:
        reader.feed_data(b"not json\n")
        assert (await asyncio.wait_for(lines.out.get(), 5))["error"]["code"] == -32700
        reader.feed_data(b'{"jsonrpc":"2.0","id":1,"method":"nope"}\n')
        assert (await asyncio.wait_for(lines.out.get(), 5))["error"]["code"] == -32601
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "rm"}}
        reader.feed_data(json.dumps(call).encode() + b"\n")
        assert (await asyncio.wait_for(lines.out.get(), 5))["error"]["code"] == -32602
        slow = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "slow"}}
        reader.feed_data(json.dumps(slow).encode() + b"\n")
        await asyncio.wait_for(host.started.wait(), 5)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 3}}  # fmt: skip
        reader.feed_data(json.dumps(cancel).encode() + b"\n")
        await asyncio.wait_for(host.cancelled.wait(), 5)
        reader.feed_data(b'{"jsonrpc":"2.0","id":4,"method":"ping"}\n')
        assert await asyncio.wait_for(lines.out.get(), 5) == {"jsonrpc": "2.0", "id": 4,
                                                              "result": {}}  # fmt: skip
        assert lines.out.empty()  # the cancelled call was never answered
    finally:
        reader.feed_eof()
        await asyncio.wait_for(served, 5)


class _Pipe:
    """Our client's transport wired to the server's streams in one process."""

    def __init__(self, host: _Host) -> None:
        self._host = host
        self._reader = asyncio.StreamReader()
        self._task: asyncio.Task[None] | None = None

    async def start(self, on_message: Any, on_close: Any) -> None:
        client_side = self

        class _ToClient:
            def __init__(self) -> None:
                self._buffer = b""

            def write(self, data: bytes) -> None:
                self._buffer += data

            async def drain(self) -> None:
                *frames, self._buffer = self._buffer.split(b"\n")
                for frame in frames:
                    on_message(frame)

        self._task = asyncio.ensure_future(
            serve_streams(client_side._host, self._reader, _ToClient())
        )

    async def send(self, payload: bytes) -> None:
        self._reader.feed_data(payload + b"\n")

    async def aclose(self) -> None:
        self._reader.feed_eof()
        if self._task is not None:
            await asyncio.wait_for(self._task, 5)


async def test_our_client_speaks_to_our_server() -> None:
    client = McpClient(_Pipe(_Host()), name="self")
    await client.start()
    try:
        assert client.protocol_version == "2025-11-25"
        assert client.server_info["name"] == "lemon"
        assert [t["name"] for t in await client.list_tools()] == ["echo", "slow"]
        result = await client.call_tool("echo", {"text": "hi"}, deadline_s=5)
        assert result == {"content": [{"type": "text", "text": "hi"}], "isError": False}
        await client.ping()
    finally:
        await client.aclose()
