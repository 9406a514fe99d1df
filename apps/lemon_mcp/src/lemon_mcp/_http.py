"""The Streamable HTTP transport: each message is a POST; the answer is JSON or an SSE stream.

``Mcp-Session-Id`` from the ``initialize`` answer is sent on every later request, as is
``MCP-Protocol-Version`` once negotiated; :meth:`aclose` ends the session with a DELETE.
Bounds: a body or an SSE event over ``max_frame_bytes`` (16 MiB) ends the connection; connect
and read have timeouts (a call's own deadline is the client's); redirects are refused (a
server must not send our headers elsewhere); TLS is verified. Header values (secrets read from
variables by the hub) are sent to this server only and never logged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Final

import httpx

from lemon_mcp._stdio import MAX_FRAME_BYTES
from lemon_mcp.errors import McpConnectionError, McpProtocolError

__all__ = ["HttpTransport"]

_SESSION: Final = "mcp-session-id"


class HttpTransport:
    """One MCP server over Streamable HTTP (loop-only)."""

    def __init__(
        self,
        *,
        name: str,
        url: str,
        headers: Mapping[str, str] | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        connect_timeout_s: float = 30.0,
        read_timeout_s: float = 300.0,
    ) -> None:
        self.name = name
        self.url = url
        self._headers = dict(headers or {})
        self._max_frame = max_frame_bytes
        self._timeout = httpx.Timeout(read_timeout_s, connect=connect_timeout_s)
        self._client: httpx.AsyncClient | None = None
        self._on_message: Callable[[bytes], None] | None = None
        self._on_close: Callable[[str], None] | None = None
        self.session_id: str | None = None
        self.protocol_version: str | None = None

    async def start(
        self, on_message: Callable[[bytes], None], on_close: Callable[[str], None]
    ) -> None:
        self._on_message = on_message
        self._on_close = on_close
        self._client = httpx.AsyncClient(
            timeout=self._timeout, follow_redirects=False, verify=True, trust_env=False
        )

    def _request_headers(self) -> dict[str, str]:
        headers = {
            **self._headers,
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    async def send(self, payload: bytes) -> None:
        client = self._client
        if client is None:
            raise McpConnectionError("the server's connection is closed")
        try:
            async with client.stream(
                "POST", self.url, content=payload, headers=self._request_headers()
            ) as response:
                await self._answer(response)
        except httpx.TimeoutException as exc:
            raise McpConnectionError(f"HTTP timeout: {type(exc).__name__}") from None
        except httpx.HTTPError as exc:
            raise McpConnectionError(f"HTTP error: {type(exc).__name__}: {exc}") from None

    async def _answer(self, response: httpx.Response) -> None:
        session = response.headers.get(_SESSION)
        if session:
            self.session_id = session
        status = response.status_code
        if 300 <= status < 400:
            raise McpConnectionError(
                f"the server redirected (HTTP {status}); redirects are refused"
            )
        if status == 404 and self.session_id is not None:
            self._lost("the server ended the session (HTTP 404)")
            raise McpConnectionError("the server ended the session (HTTP 404)")
        if status >= 400:
            raise McpConnectionError(f"the server answered HTTP {status}")
        if status == 202 or status == 204:
            return
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "text/event-stream":
            await self._events(response)
        elif kind == "application/json":
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > self._max_frame:
                    self._fault(f"a response body over {self._max_frame} bytes")
            self._deliver(bytes(body))
        else:
            raise McpProtocolError(f"unexpected content type {kind!r}")

    async def _events(self, response: httpx.Response) -> None:
        """Dispatch each SSE event's ``data`` (bounded) as one message."""
        buffer = bytearray()
        data: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            buffer += chunk
            if len(buffer) > self._max_frame:
                self._fault(f"an SSE line over {self._max_frame} bytes")
            while (cut := buffer.find(b"\n")) >= 0:
                line = bytes(buffer[:cut]).rstrip(b"\r")
                del buffer[: cut + 1]
                if not line:
                    if data:
                        self._deliver(b"\n".join(data))
                    data, size = [], 0
                elif line.startswith(b"data:"):
                    value = line[5:].removeprefix(b" ")
                    size += len(value)
                    if size > self._max_frame:
                        self._fault(f"an SSE event over {self._max_frame} bytes")
                    data.append(value)
        if data:
            self._deliver(b"\n".join(data))

    def _deliver(self, frame: bytes) -> None:
        if frame.strip() and self._on_message is not None:
            self._on_message(frame)

    def _fault(self, reason: str) -> None:
        self._lost(reason)
        raise McpProtocolError(reason)

    def _lost(self, reason: str) -> None:
        if self._on_close is not None:
            self._on_close(reason)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        if self.session_id is not None:
            with contextlib.suppress(httpx.HTTPError):
                await client.delete(self.url, headers=self._request_headers(), timeout=2.0)
        await client.aclose()
