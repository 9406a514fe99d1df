"""JSON-RPC 2.0 over newline-delimited frames (ACP's stdio transport).

One :class:`RpcConnection` reads frames from a reader and writes them to a writer: nothing
else ever writes to the writer, so the editor's stdout carries only frames. Each incoming
request runs as its own task (owned by the connection's task group: a ``session/cancel``
notification is read while a ``session/prompt`` runs); the agent's own requests to the client
(``session/request_permission``) are matched to their answers by id. A frame that is not JSON
is answered -32700, a request for a method nobody handles -32601.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from lemon_acp.errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RpcError,
)

__all__ = ["AfterAnswer", "FrameReader", "FrameWriter", "Handler", "RpcConnection"]

log = logging.getLogger("lemon_acp.rpc")

Handler = Callable[[str, dict[str, Any]], Awaitable[Any]]
"""``(method, params) -> result``; raises :class:`RpcError` (or ``LookupError`` for an unknown
method: -32601)."""


@dataclass(frozen=True, slots=True)
class AfterAnswer:
    """A result, and what to do once it was sent (notifications that must follow the answer,
    such as ``available_commands_update`` after ``session/new`` names the session)."""

    result: Any
    then: Callable[[], Awaitable[None]]


class FrameReader(Protocol):
    async def readline(self) -> bytes: ...


class FrameWriter(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class RpcConnection:
    """See the module docstring."""

    def __init__(
        self,
        reader: FrameReader,
        writer: FrameWriter,
        *,
        requests: Handler,
        notifications: Handler,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._requests = requests
        self._notifications = notifications
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    async def send(self, frame: dict[str, Any]) -> None:
        data = json.dumps(frame, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        async with self._lock:
            self._writer.write(data)
            await self._writer.drain()

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Ask the client; its result, or :class:`RpcError` with its error."""
        if self._closed:
            raise RpcError(INTERNAL_ERROR, "the client disconnected")
        rid = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            return await future
        finally:
            self._pending.pop(rid, None)

    async def serve(self, *, drain_s: float = 30.0) -> None:
        """Read frames until the reader ends; let what runs then finish for ``drain_s`` (its
        answers still go out), then cancel the rest."""
        try:
            while line := await self._reader.readline():
                if line.strip():
                    await self._frame(line)
            self._disconnected()  # nothing the client could answer will come now
            if self._tasks:
                await asyncio.wait(set(self._tasks), timeout=drain_s)
        finally:
            self._disconnected()
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.wait(self._tasks)

    def _disconnected(self) -> None:
        """The client's input ended: every question to it fails now, and every later one."""
        self._closed = True
        for future in self._pending.values():
            if not future.done():
                future.set_exception(RpcError(INTERNAL_ERROR, "the client disconnected"))

    async def _frame(self, line: bytes) -> None:
        try:
            frame = json.loads(line)
        except ValueError:
            await self.send(
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": PARSE_ERROR, "message": "not JSON"},
                }
            )
            return
        if not isinstance(frame, dict):
            await self._error(None, RpcError(INVALID_REQUEST, "a frame is a JSON object"))
            return
        if "method" not in frame:  # an answer to one of ours
            future = self._pending.get(frame.get("id"))  # type: ignore[arg-type]  # any JSON id
            if future is not None and not future.done():
                if "error" in frame:
                    error = frame["error"] or {}
                    future.set_exception(
                        RpcError(int(error.get("code", INTERNAL_ERROR)), str(error.get("message")))
                    )
                else:
                    future.set_result(frame.get("result"))
            return
        method = frame.get("method")
        params = frame.get("params")
        if params is None:
            params = {}
        rid = frame.get("id")
        is_request = "id" in frame
        if not isinstance(method, str) or not isinstance(params, dict):
            if is_request:
                await self._error(
                    rid, RpcError(INVALID_REQUEST, "method must be a string, params an object")
                )
            return
        task = asyncio.get_running_loop().create_task(
            self._handle(rid, method, params, is_request), name=f"acp:{method}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(
        self, rid: Any, method: str, params: dict[str, Any], is_request: bool
    ) -> None:
        handler = self._requests if is_request else self._notifications
        try:
            result = await handler(method, params)
        except RpcError as exc:
            if is_request:
                await self._error(rid, exc)
            return
        except LookupError:
            if is_request:
                await self._error(rid, RpcError(METHOD_NOT_FOUND, f"method not found: {method}"))
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug or a gone daemon: answered, logged to stderr
            log.exception("%s failed", method)
            if is_request:
                await self._error(rid, RpcError(INTERNAL_ERROR, f"{method} failed: {exc}"))
            return
        then = None
        if isinstance(result, AfterAnswer):
            result, then = result.result, result.then
        if is_request:
            await self.send({"jsonrpc": "2.0", "id": rid, "result": result})
        if then is not None:
            await then()

    async def _error(self, rid: Any, error: RpcError) -> None:
        await self.send({"jsonrpc": "2.0", "id": rid, "error": error.wire()})
