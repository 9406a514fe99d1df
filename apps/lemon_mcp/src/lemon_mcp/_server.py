"""The other direction: an MCP server over stdio exposing a :class:`ToolHost`'s tools.

:func:`serve_stdio` answers ``initialize`` (the client's protocol version when we speak it,
else our latest), ``ping``, ``tools/list`` (one page) and ``tools/call`` on newline-delimited
JSON-RPC; each call runs as its own task (at most ``max_concurrent`` at once, more wait) and
``notifications/cancelled`` cancels it. A malformed line gets a -32700 error, an unknown method
-32601, an unknown tool -32602; a line over 16 MiB ends the session. The host may ask the
person through the client (:meth:`ClientPeer.elicit`: ``elicitation/create``) when the client
declared the ``elicitation`` capability: that is how an approval reaches them. Nothing but
protocol is written to stdout; diagnostics go to the log (stderr).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Protocol

import msgspec

from lemon_mcp._stdio import MAX_FRAME_BYTES
from lemon_mcp._wire import (
    LATEST_PROTOCOL,
    SUPPORTED_PROTOCOLS,
    Incoming,
    decode,
    encode_error,
    encode_request,
    encode_result,
)
from lemon_mcp.errors import McpError, McpProtocolError

__all__ = [
    "ClientPeer",
    "ServedResult",
    "ServedTool",
    "ToolHost",
    "Writer",
    "serve_stdio",
    "serve_streams",
]

log = logging.getLogger("lemon_mcp")

SERVER_INFO: Final = {"name": "lemon", "version": "0.1.0"}


class ServedTool(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str
    input_schema: Mapping[str, Any]


class ServedResult(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    is_error: bool = False


class ClientPeer(Protocol):
    """The connected client, as a host sees it."""

    @property
    def capabilities(self) -> Mapping[str, Any]: ...

    async def elicit(
        self, message: str, schema: Mapping[str, Any], *, timeout_s: float
    ) -> Mapping[str, Any] | None:
        """The person's answer (``content``) when they accepted, else ``None``."""
        ...


class ToolHost(Protocol):
    """What the server exposes."""

    def tools(self) -> Sequence[ServedTool]: ...

    async def call(
        self, name: str, arguments: Mapping[str, Any], peer: ClientPeer, call_id: str
    ) -> ServedResult: ...


class Writer(Protocol):
    """Where the server's lines go (an ``asyncio.StreamWriter`` or stdout)."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class _Session:
    """One client's protocol state; what it sends goes to ``emit`` (one message, no newline)."""

    def __init__(
        self,
        host: ToolHost,
        emit: Callable[[bytes], Awaitable[None]],
        max_concurrent: int,
        *,
        list_changed: bool = False,
    ) -> None:
        self._host = host
        self._list_changed = list_changed  # whether it may send notifications/tools/list_changed
        self._emit = emit
        self._calls: dict[int | str, asyncio.Task[None]] = {}
        self._replies: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(max_concurrent)
        self._ids = itertools.count(1)
        self._asked: dict[int | str, asyncio.Future[Incoming]] = {}
        self._write_lock = asyncio.Lock()
        self.client_capabilities: Mapping[str, Any] = {}
        self.protocol_version: str | None = None

    @property
    def capabilities(self) -> Mapping[str, Any]:
        return self.client_capabilities

    async def _send(self, payload: bytes) -> None:
        async with self._write_lock:
            await self._emit(payload)

    def call_task(self, rid: int | str) -> asyncio.Task[None] | None:
        """The running ``tools/call`` of request ``rid`` (None once it ended)."""
        return self._calls.get(rid)

    @property
    def busy(self) -> bool:
        """Whether a call is in flight."""
        return bool(self._calls)

    async def elicit(
        self, message: str, schema: Mapping[str, Any], *, timeout_s: float
    ) -> Mapping[str, Any] | None:
        if "elicitation" not in self.client_capabilities:
            return None
        rid = f"lemon-{next(self._ids)}"
        future: asyncio.Future[Incoming] = asyncio.get_running_loop().create_future()
        self._asked[rid] = future
        try:
            params = {"message": message, "requestedSchema": dict(schema)}
            await self._send(encode_request(rid, "elicitation/create", params))
            answer = await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            return None
        finally:
            self._asked.pop(rid, None)
        result = answer.result
        if answer.error is not None or not isinstance(result, Mapping):
            return None
        if result.get("action") != "accept":
            return None
        content = result.get("content")
        return content if isinstance(content, Mapping) else {}

    def on_frame(self, frame: bytes) -> None:
        try:
            message = decode(frame)
        except McpProtocolError as exc:
            self._spawn_reply(encode_error(None, -32700, str(exc)))
            return
        if message.is_response:
            assert message.id is not None
            future = self._asked.get(message.id)
            if future is not None and not future.done():
                future.set_result(message)
            return
        if message.method is None:
            return
        if message.id is None:
            self._notification(message)
            return
        self._request(message)

    def _notification(self, message: Incoming) -> None:
        if message.method == "notifications/cancelled" and isinstance(message.params, Mapping):
            asked = message.params.get("requestId")
            task = self._calls.get(asked) if isinstance(asked, int | str) else None
            if task is not None:
                task.cancel()

    def _request(self, message: Incoming) -> None:
        assert message.id is not None
        rid, method = message.id, message.method
        params = message.params if isinstance(message.params, Mapping) else {}
        if method == "initialize":
            asked = params.get("protocolVersion")
            self.protocol_version = asked if asked in SUPPORTED_PROTOCOLS else LATEST_PROTOCOL
            caps = params.get("capabilities")
            self.client_capabilities = caps if isinstance(caps, Mapping) else {}
            self._spawn_reply(encode_result(rid, {
                "protocolVersion": self.protocol_version,
                "capabilities": {"tools": {"listChanged": self._list_changed}},
                "serverInfo": SERVER_INFO,
                "instructions": "Lemon's coding tools, under the approval policy of the "
                "serving home.",
            }))  # fmt: skip
        elif method == "ping":
            self._spawn_reply(encode_result(rid, {}))
        elif method == "tools/list":
            tools = [
                {"name": t.name, "description": t.description, "inputSchema": dict(t.input_schema)}
                for t in self._host.tools()
            ]
            self._spawn_reply(encode_result(rid, {"tools": tools}))
        elif method == "tools/call":
            name = params.get("name")
            arguments = params.get("arguments") or {}
            if not isinstance(name, str) or name not in {t.name for t in self._host.tools()}:
                self._spawn_reply(encode_error(rid, -32602, f"unknown tool: {name!r}"))
            elif not isinstance(arguments, Mapping):
                self._spawn_reply(encode_error(rid, -32602, "arguments must be an object"))
            elif rid in self._calls:
                self._spawn_reply(encode_error(rid, -32600, f"request id {rid!r} is in use"))
            else:
                task = asyncio.get_running_loop().create_task(self._call(rid, name, arguments))
                self._calls[rid] = task
                task.add_done_callback(lambda _t: self._calls.pop(rid, None))
        else:
            self._spawn_reply(encode_error(rid, -32601, f"method not found: {method}"))

    async def _call(self, rid: int | str, name: str, arguments: Mapping[str, Any]) -> None:
        try:
            async with self._slots:
                out = await self._host.call(name, arguments, self, str(rid))
        except asyncio.CancelledError:
            return  # cancelled by the client: no answer is sent (the spec's rule)
        payload = {"content": [{"type": "text", "text": out.text}], "isError": out.is_error}
        with contextlib.suppress(OSError):
            await self._send(encode_result(rid, payload))

    def _spawn_reply(self, payload: bytes) -> None:
        task = asyncio.get_running_loop().create_task(self._reply(payload))
        self._replies.add(task)
        task.add_done_callback(self._replies.discard)

    async def _reply(self, payload: bytes) -> None:
        with contextlib.suppress(OSError):
            await self._send(payload)

    async def aclose(self) -> None:
        tasks = [*self._calls.values(), *self._replies]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


class _StdoutWriter:
    """stdout as a writer (a pipe or a file: written in a thread, never blocking the loop)."""

    def __init__(self) -> None:
        self._out = sys.stdout.buffer
        self._pending = bytearray()

    def write(self, data: bytes) -> None:
        self._pending += data

    async def drain(self) -> None:
        data, self._pending = bytes(self._pending), bytearray()
        await asyncio.to_thread(self._flush, data)

    def _flush(self, data: bytes) -> None:
        self._out.write(data)
        self._out.flush()


async def serve_streams(
    host: ToolHost,
    reader: asyncio.StreamReader,
    writer: Writer,
    *,
    max_concurrent: int = 8,
) -> None:
    """Serve one client on ``reader`` / ``writer`` until it closes its side."""

    async def emit(payload: bytes) -> None:
        writer.write(payload + b"\n")
        await writer.drain()

    session = _Session(host, emit, max_concurrent)
    try:
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                if exc.partial.strip():
                    session.on_frame(exc.partial)
                break
            except asyncio.LimitOverrunError:
                log.warning("mcp serve: a line over %d bytes; the session ends", MAX_FRAME_BYTES)
                break
            if line.strip():
                session.on_frame(line)
    finally:
        await session.aclose()


async def serve_stdio(host: ToolHost, *, max_concurrent: int = 8) -> None:
    """Serve one client on this process's stdin and stdout."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_FRAME_BYTES + 1)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer
    )
    try:
        await serve_streams(host, reader, _StdoutWriter(), max_concurrent=max_concurrent)
    except McpError as exc:
        log.warning("mcp serve: %s", exc)
    finally:
        transport.close()
