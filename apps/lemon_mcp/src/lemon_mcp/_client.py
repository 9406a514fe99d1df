"""An MCP client session over one transport: ``initialize``, ``tools/list``, ``tools/call``.

Requests are matched to responses by id; a response for an id we never sent (or already
answered) is a protocol error that ends the connection, as does the transport losing it: every
pending request then fails with the reason. Requests from the server are answered: ``ping``
with an empty result, anything else with -32601 (this client offers no sampling, roots or
elicitation). ``notifications/tools/list_changed`` marks the tool list stale (the hub lists
again before the next run). A call that times out or is cancelled sends
``notifications/cancelled`` for its id.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

import msgspec

from lemon_core.backoff import Backoff
from lemon_mcp._wire import (
    CLIENT_CAPABILITIES_META,
    CLIENT_INFO_META,
    LATEST_PROTOCOL,
    MODERN_PROTOCOLS,
    PROTOCOL_VERSION_META,
    SERVER_INFO_META,
    SUPPORTED_PROTOCOLS,
    Incoming,
    decode,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
)
from lemon_mcp.errors import (
    McpConnectionError,
    McpError,
    McpHttpStatusError,
    McpProtocolError,
    McpRemoteError,
    McpTimeoutError,
)

__all__ = ["CLIENT_INFO", "McpClient", "Transport", "close_owned"]

log = logging.getLogger("lemon_mcp")

CLIENT_INFO: Final = {"name": "lemon", "version": "0.1.0"}
_MAX_PAGES: Final = 100
_LIST_BACKOFF: Final = Backoff(initial=0.2, cap=2.0, max_attempts=3)


class Transport(Protocol):
    """How bytes reach the server and come back (stdio or Streamable HTTP)."""

    async def start(
        self, on_message: Callable[[bytes], None], on_close: Callable[[str], None]
    ) -> None: ...

    async def send(self, payload: bytes) -> None: ...

    async def aclose(self) -> None: ...


class McpClient:
    """One session with one server (loop-only)."""

    def __init__(self, transport: Transport, *, name: str) -> None:
        self.name = name
        self.transport = transport
        self._ids = itertools.count(1)
        self._pending: dict[int | str, asyncio.Future[Any]] = {}
        self._closed_reason: str | None = None
        self.protocol_version: str | None = None
        self.server_info: Mapping[str, Any] = {}
        self.instructions: str = ""
        self.tools_stale = False
        self.on_lost: Callable[[str], None] | None = None
        self.on_tools_changed: Callable[[], None] | None = None
        """Called on ``notifications/tools/list_changed`` (the hub refreshes its list)."""
        self.capabilities: Mapping[str, Any] = {}
        self.on_elicit: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None
        """Set before :meth:`start`: the client declares the ``elicitation`` capability and
        answers each ``elicitation/create`` with what this returns for its params (an
        ``{"action": ...}`` result). Unset: the request gets -32601, as any other."""
        self._replies: set[asyncio.Task[None]] = set()
        # Ids given up on (timed out, cancelled): a late answer to one is dropped, not a fault.
        self._abandoned: deque[int | str] = deque(maxlen=256)
        # The stateless era's per-request ``_meta`` (None: the initialize handshake's era).
        self._envelope: dict[str, Any] | None = None

    @property
    def closed_reason(self) -> str | None:
        return self._closed_reason

    @property
    def stateless(self) -> bool:
        """The server speaks the stateless era (``server/discover``; no session)."""
        return self._envelope is not None

    async def start(self) -> None:
        """Start the transport, then over Streamable HTTP try the stateless era
        (``server/discover``), and run the ``initialize`` handshake when the server does not
        speak it (a JSON-RPC error, e.g. -32601, or HTTP 400)."""
        await self.transport.start(self._on_message, self._lost)
        if getattr(self.transport, "stateless_capable", False) and await self._discover():
            return
        result = await self.request(
            "initialize",
            {
                "protocolVersion": LATEST_PROTOCOL,
                "capabilities": self._capabilities(),
                "clientInfo": CLIENT_INFO,
            },
        )
        version = result.get("protocolVersion") if isinstance(result, Mapping) else None
        if version not in SUPPORTED_PROTOCOLS:
            raise McpProtocolError(
                f"the server speaks protocol {version!r}; this client speaks "
                f"{', '.join(SUPPORTED_PROTOCOLS)}"
            )
        self.protocol_version = version
        if hasattr(self.transport, "protocol_version"):
            self.transport.protocol_version = version  # the HTTP transport sends it
        self.server_info = result.get("serverInfo") or {}
        caps = result.get("capabilities")
        self.capabilities = caps if isinstance(caps, Mapping) else {}
        self.instructions = str(result.get("instructions") or "")
        await self.notify("notifications/initialized")
        listen = getattr(self.transport, "listen", None)
        if callable(listen):
            listen()  # Streamable HTTP: the GET stream for server-initiated messages

    def _capabilities(self) -> dict[str, Any]:
        return {"elicitation": {}} if self.on_elicit is not None else {}

    async def _discover(self) -> bool:
        """``server/discover`` at the newest stateless version: True when the server speaks
        it (the client then keeps to that era), False to fall back to ``initialize``."""
        version = MODERN_PROTOCOLS[0]
        envelope = {
            PROTOCOL_VERSION_META: version,
            CLIENT_CAPABILITIES_META: self._capabilities(),
            CLIENT_INFO_META: CLIENT_INFO,
        }
        self.transport.protocol_version = version  # type: ignore[attr-defined]  # stateless_capable: HttpTransport
        self._envelope = envelope
        try:
            result = await self.request("server/discover", deadline_s=30.0)
        except McpRemoteError as exc:
            log.info("mcp server %s: server/discover answered %s; initialize", self.name, exc)
            result = None
        except McpHttpStatusError as exc:
            if exc.status not in (400, 404, 405):
                raise
            log.info("mcp server %s: HTTP %d to server/discover; initialize", self.name, exc.status)
            result = None
        supported = result.get("supportedVersions") if isinstance(result, Mapping) else None
        if not isinstance(result, Mapping) or version not in (supported or ()):
            self._envelope = None
            self.transport.protocol_version = None  # type: ignore[attr-defined]
            return False
        self.protocol_version = version
        meta = result.get("_meta")
        info = meta.get(SERVER_INFO_META) if isinstance(meta, Mapping) else None
        self.server_info = info if isinstance(info, Mapping) else {}
        caps = result.get("capabilities")
        self.capabilities = caps if isinstance(caps, Mapping) else {}
        self.instructions = str(result.get("instructions") or "")
        return True

    async def request(
        self, method: str, params: dict[str, Any] | None = None, *, deadline_s: float | None = None
    ) -> Any:
        """Send a request and wait for its result (or raise what went wrong)."""
        if self._closed_reason is not None:
            raise McpConnectionError(self._closed_reason)
        if self._envelope is not None:  # the stateless era: each request says who asks
            params = dict(params or {})
            params["_meta"] = {**(params.get("_meta") or {}), **self._envelope}
        rid = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            async with asyncio.timeout(deadline_s):
                await self.transport.send(encode_request(rid, method, params))
                return await future
        except TimeoutError:
            await self._cancel(rid, f"no answer within {deadline_s} s")
            raise McpTimeoutError(f"{method}: no answer within {deadline_s:g} s") from None
        except asyncio.CancelledError:
            await asyncio.shield(self._cancel(rid, "the run was aborted"))
            raise
        finally:
            self._pending.pop(rid, None)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self.transport.send(encode_notification(method, params))

    async def _cancel(self, rid: int, reason: str) -> None:
        self._abandoned.append(rid)
        if self._closed_reason is None:
            with contextlib.suppress(McpError, OSError):
                await self.notify("notifications/cancelled", {"requestId": rid, "reason": reason})

    async def ping(self, *, deadline_s: float | None = 10.0) -> None:
        """Liveness: the server answers ``ping`` (or this raises). The stateless era has no
        ``ping`` (-32601): ``server/discover`` is its liveness check."""
        await self.request("server/discover" if self.stateless else "ping", deadline_s=deadline_s)

    async def list_tools(self) -> list[Mapping[str, Any]]:
        """Every tool, following ``nextCursor`` (at most 100 pages), each page retried with
        backoff on a timeout or a JSON-RPC error."""
        self.tools_stale = False  # a change announced while listing marks it stale again
        return await self._list_all("tools/list", "tools")

    async def list_resources(self) -> list[Mapping[str, Any]]:
        """Every resource (``resources/list``, paginated); empty when the server has none."""
        if "resources" not in self.capabilities:
            return []
        return await self._list_all("resources/list", "resources")

    async def list_prompts(self) -> list[Mapping[str, Any]]:
        """Every prompt (``prompts/list``, paginated); empty when the server has none."""
        if "prompts" not in self.capabilities:
            return []
        return await self._list_all("prompts/list", "prompts")

    async def _list_all(self, method: str, key: str) -> list[Mapping[str, Any]]:
        items: list[Mapping[str, Any]] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await self._list_page(method, cursor)
            items.extend(t for t in page.get(key) or () if isinstance(t, Mapping))
            nxt = page.get("nextCursor")
            if not isinstance(nxt, str) or not nxt:
                break
            cursor = nxt
        return items

    async def _list_page(self, method: str, cursor: str | None) -> Mapping[str, Any]:
        attempt = 1
        while True:
            try:
                result = await self.request(
                    method, {"cursor": cursor} if cursor else None, deadline_s=30.0
                )
                return result if isinstance(result, Mapping) else {}
            except (McpTimeoutError, McpRemoteError) as exc:
                if _LIST_BACKOFF.exhausted(attempt):
                    raise
                log.info("mcp server %s: %s failed (%s), retrying", self.name, method, exc)
                await asyncio.sleep(_LIST_BACKOFF.delay(attempt))
                attempt += 1

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], *, deadline_s: float | None
    ) -> Mapping[str, Any]:
        result = await self.request(
            "tools/call", {"name": name, "arguments": dict(arguments)}, deadline_s=deadline_s
        )
        return result if isinstance(result, Mapping) else {}

    async def aclose(self) -> None:
        self._lost("the client closed the connection")
        await self.transport.aclose()

    # -- incoming --------------------------------------------------------------------------

    def _on_message(self, frame: bytes) -> None:
        try:
            message = decode(frame)
        except McpProtocolError as exc:
            self._protocol_fault(str(exc))
            return
        if message.is_response:
            self._on_response(message)
        elif message.method is not None and message.id is not None:
            self._on_request(message)
        elif message.method == "notifications/tools/list_changed":
            self.tools_stale = True
            if self.on_tools_changed is not None:
                self.on_tools_changed()

    def _on_response(self, message: Incoming) -> None:
        assert message.id is not None
        future = self._pending.get(message.id)
        if future is None and message.id in self._abandoned:
            return
        if future is None:
            self._protocol_fault(f"a response for an unknown request id {message.id!r}")
            return
        if future.done():
            return
        if message.error is not None:
            future.set_exception(McpRemoteError(message.error.code, message.error.message))
        else:
            result = message.result
            future.set_result(None if result is msgspec.UNSET else result)

    def _on_request(self, message: Incoming) -> None:
        assert message.id is not None
        assert message.method is not None
        if message.method == "ping":
            reply = encode_result(message.id, {})
        elif message.method == "elicitation/create" and self.on_elicit is not None:
            params = message.params if isinstance(message.params, Mapping) else {}
            reply = encode_result(message.id, dict(self.on_elicit(params)))
        else:
            reply = encode_error(message.id, -32601, f"method not supported: {message.method}")
        task = asyncio.get_running_loop().create_task(self._reply(reply))
        self._replies.add(task)
        task.add_done_callback(self._replies.discard)

    async def _reply(self, payload: bytes) -> None:
        with contextlib.suppress(McpError, OSError):
            await self.transport.send(payload)

    def _protocol_fault(self, reason: str) -> None:
        log.warning("mcp server %s: %s; its connection is ended", self.name, reason)
        self._lost(reason)

    def _lost(self, reason: str) -> None:
        if self._closed_reason is not None:
            return
        self._closed_reason = reason
        for future in self._pending.values():
            if not future.done():
                future.set_exception(McpConnectionError(reason))
        if self.on_lost is not None:
            self.on_lost(reason)


async def close_owned(client: McpClient, owner: set[asyncio.Task[object]]) -> None:
    """Close ``client`` in a task kept in ``owner`` until it is done; the owner's ``aclose``
    waits for every task left there. A caller cancelled midway (the idle timer or a background
    start cancelled by ``aclose``, an aborted run) stops waiting, but the stop goes on and is
    still waited for, so no server process outlives its owner (a stop left running when the
    event loop ends leaves its asyncio transport open: a ResourceWarning at some later
    garbage collection)."""

    async def close() -> None:
        with contextlib.suppress(McpError, OSError):
            await client.aclose()

    task: asyncio.Task[object] = asyncio.ensure_future(close())
    owner.add(task)
    task.add_done_callback(owner.discard)
    await asyncio.shield(task)
