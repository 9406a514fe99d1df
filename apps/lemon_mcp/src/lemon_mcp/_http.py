"""The HTTP transports: Streamable HTTP (each message a POST, the answer JSON or an SSE
stream, plus the GET stream for server-initiated messages) and the legacy HTTP+SSE transport
of protocol 2024-11-05 (a GET ``/sse`` stream whose ``endpoint`` event names where to POST).

``Mcp-Session-Id`` from the ``initialize`` answer is sent on every later request, as is
``MCP-Protocol-Version`` once negotiated; :meth:`HttpTransport.aclose` ends the session with a
DELETE. After ``notifications/initialized`` the client calls :meth:`HttpTransport.listen`,
which opens the GET stream (a server answering 405 offers none); when it ends it is reopened
with ``Last-Event-ID`` after the server's ``retry`` (or a backoff), at most
``_GET_RETRIES`` times in a row, and a POST keeps working meanwhile.

A request answered with an SSE stream that ends (or is cut) before its response arrived is
resumed as the spec says: a GET with ``Last-Event-ID`` set to that stream's last event id, after
the stream's ``retry`` (or a backoff), at most ``_RESUME_RETRIES`` times; the server replays what
followed on the new stream. A stream that carried no event id cannot be resumed, and a server
that offers no GET (405) cannot resume it either: the request then fails with the reason.

Bounds: a body or an SSE event over ``max_frame_bytes`` (16 MiB) ends the connection; connect
and read have timeouts (a call's own deadline is the client's); redirects are refused (a
server must not send our headers elsewhere), and a legacy ``endpoint`` on another origin is
refused for the same reason; TLS is verified. Header values (secrets read from variables by
the hub, or an OAuth token from :class:`HttpAuth`) go to this server only and are never logged.
A 401 asks :class:`HttpAuth` once for a fresh token and retries the request once.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Final, Protocol
from urllib.parse import urljoin, urlsplit

import httpx

from lemon_core.backoff import Backoff
from lemon_mcp._sse import sse_events
from lemon_mcp._stdio import MAX_FRAME_BYTES
from lemon_mcp._wire import MODERN_PROTOCOLS, decode
from lemon_mcp.errors import McpConnectionError, McpHttpStatusError, McpProtocolError

__all__ = ["HttpAuth", "HttpTransport", "SseTransport"]

log = logging.getLogger("lemon_mcp")

_SESSION: Final = "mcp-session-id"
_GET_RETRIES: Final = 5
_GET_BACKOFF: Final = Backoff(initial=1.0, cap=30.0, jitter=0.0)
_RESUME_RETRIES: Final = 5


class _StreamOutcome:
    """What one SSE answer stream gave: whether the awaited response came, where it stopped."""

    __slots__ = ("answered", "event_id", "retry_ms")

    def __init__(self) -> None:
        self.answered = False
        self.event_id: str | None = None
        self.retry_ms: int | None = None


def _request_id(payload: bytes) -> int | str | None:
    """The id of a request (None for a notification or a response)."""
    try:
        message = decode(payload)
    except McpProtocolError:
        return None
    return message.id if message.method is not None else None


class HttpAuth(Protocol):
    """Where an HTTP transport gets its ``Authorization`` header (OAuth)."""

    async def authorization(self) -> str | None:
        """The header value to send (``Bearer ...``), refreshed if it is about to expire."""
        ...

    async def unauthorized(self, www_authenticate: str | None) -> bool:
        """The server answered 401: True when a new token was obtained (retry once)."""
        ...


# The params key each named method mirrors as ``Mcp-Name`` (the stateless era).
_NAME_PARAM: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def _routing_headers(payload: bytes) -> dict[str, str]:
    """``Mcp-Method`` (and ``Mcp-Name``) of a stateless-era request, from its body. A name
    that is not visible ASCII goes base64-encoded (``=?base64?...?=``), as the spec says."""
    try:
        message = decode(payload)
    except McpProtocolError:
        return {}
    if message.method is None:
        return {}
    headers = {"Mcp-Method": message.method}
    key = _NAME_PARAM.get(message.method)
    name = message.params.get(key) if key and isinstance(message.params, dict) else None
    if isinstance(name, str):
        if name.isascii() and name.isprintable():
            headers["Mcp-Name"] = name
        else:
            headers["Mcp-Name"] = f"=?base64?{base64.b64encode(name.encode()).decode()}?="
    return headers


def _answers(data: bytes, rid: int | str) -> bool:
    try:
        message = decode(data)
    except McpProtocolError:
        return False
    return message.is_response and message.id == rid


_ERROR_BODY_BYTES: Final = 64 * 1024


async def _rpc_error(response: httpx.Response) -> tuple[int | None, str | None]:
    """The JSON-RPC error an HTTP error answer carries (its code and message), if its body is
    one: JSON, read up to 64 KiB (a longer body is not one: neither is kept)."""
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        return None, None
    body = bytearray()
    with contextlib.suppress(httpx.HTTPError):
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > _ERROR_BODY_BYTES:
                return None, None
    try:
        message = decode(bytes(body))
    except McpProtocolError:
        return None, None
    if message.error is None:
        return None, None
    return message.error.code, message.error.message


class _HttpBase:
    def __init__(
        self,
        *,
        name: str,
        url: str,
        headers: Mapping[str, str] | None,
        auth: HttpAuth | None,
        max_frame_bytes: int,
        connect_timeout_s: float,
        read_timeout_s: float,
    ) -> None:
        self.name = name
        self.url = url
        self._headers = dict(headers or {})
        self._auth = auth
        self._max_frame = max_frame_bytes
        self._timeout = httpx.Timeout(read_timeout_s, connect=connect_timeout_s)
        self._client: httpx.AsyncClient | None = None
        self._on_message: Callable[[bytes], None] | None = None
        self._on_close: Callable[[str], None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def _open(self, on_message: Callable[[bytes], None], on_close: Callable[[str], None]) -> None:
        self._on_message = on_message
        self._on_close = on_close
        self._client = httpx.AsyncClient(
            timeout=self._timeout, follow_redirects=False, verify=True, trust_env=False
        )

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            raise McpConnectionError("the server's connection is closed")
        return self._client

    async def _auth_headers(self, headers: dict[str, str]) -> dict[str, str]:
        if self._auth is not None:
            value = await self._auth.authorization()
            if value:
                headers["Authorization"] = value
        return headers

    async def _retry_401(self, response: httpx.Response, attempt: int) -> bool:
        """A first 401 (or a 403 asking for a wider scope: ``insufficient_scope``) with OAuth
        configured: True once a new token was obtained."""
        challenge = response.headers.get("www-authenticate")
        step_up = response.status_code == 403 and "insufficient_scope" in (challenge or "")
        if (response.status_code != 401 and not step_up) or attempt != 1 or self._auth is None:
            return False
        return await self._auth.unauthorized(challenge)

    async def _check_status(self, response: httpx.Response) -> None:
        status = response.status_code
        if 300 <= status < 400:
            raise McpConnectionError(
                f"the server redirected (HTTP {status}); redirects are refused"
            )
        if status >= 400:
            code, message = await _rpc_error(response)
            raise McpHttpStatusError(
                status, f"the server answered HTTP {status}", rpc_code=code, rpc_message=message
            )

    def _deliver(self, frame: bytes) -> None:
        if frame.strip() and self._on_message is not None:
            self._on_message(frame)

    def _lost(self, reason: str) -> None:
        if self._on_close is not None:
            self._on_close(reason)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _close_tasks(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


class HttpTransport(_HttpBase):
    """One MCP server over Streamable HTTP (loop-only)."""

    def __init__(
        self,
        *,
        name: str,
        url: str,
        headers: Mapping[str, str] | None = None,
        auth: HttpAuth | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        connect_timeout_s: float = 30.0,
        read_timeout_s: float = 300.0,
        stateless: bool = False,
    ) -> None:
        super().__init__(
            name=name, url=url, headers=headers, auth=auth, max_frame_bytes=max_frame_bytes,
            connect_timeout_s=connect_timeout_s, read_timeout_s=read_timeout_s,
        )  # fmt: skip
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.stateless_capable = stateless
        """The client tries the stateless era (``server/discover``) first over this transport.
        Off by default: that era has no GET stream, and the server-to-client notifications it
        offers instead (``list_changed``) are not read yet, so the hub keeps the handshake era."""
        self.get_stream_state = "closed"
        """``closed`` | ``open`` | ``not offered`` (405) | ``gave up`` (the GET stream)."""
        self._last_event_id: str | None = None

    async def start(
        self, on_message: Callable[[bytes], None], on_close: Callable[[str], None]
    ) -> None:
        self._open(on_message, on_close)

    def _request_headers(
        self, accept: str = "application/json, text/event-stream", payload: bytes | None = None
    ) -> dict[str, str]:
        headers = {**self._headers, "Content-Type": "application/json", "Accept": accept}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
            if self.protocol_version in MODERN_PROTOCOLS and payload is not None:
                headers.update(_routing_headers(payload))
        return headers

    async def send(self, payload: bytes) -> None:
        client = self._http()
        rid = _request_id(payload)
        for attempt in (1, 2):
            try:
                headers = await self._auth_headers(self._request_headers(payload=payload))
                async with client.stream("POST", self.url, content=payload, headers=headers) as r:
                    if await self._retry_401(r, attempt):
                        continue
                    outcome = await self._answer(r, rid)
                break
            except httpx.TimeoutException as exc:
                raise McpConnectionError(f"HTTP timeout: {type(exc).__name__}") from None
            except httpx.HTTPError as exc:
                raise McpConnectionError(f"HTTP error: {type(exc).__name__}: {exc}") from None
        else:
            return
        if rid is not None and outcome is not None and not outcome.answered:
            await self._resume(rid, outcome)

    async def _answer(
        self, response: httpx.Response, rid: int | str | None
    ) -> _StreamOutcome | None:
        """Deliver the answer; for an SSE answer, what the stream gave (else None)."""
        session = response.headers.get(_SESSION)
        if session:
            self.session_id = session
        if response.status_code == 404 and self.session_id is not None:
            self._lost("the server ended the session (HTTP 404)")
            raise McpConnectionError("the server ended the session (HTTP 404)")
        await self._check_status(response)
        if response.status_code in (202, 204):
            return None
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "text/event-stream":
            return await self._events(response, rid)
        if kind == "application/json":
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > self._max_frame:
                    self._fault(f"a response body over {self._max_frame} bytes")
            self._deliver(bytes(body))
            return None
        raise McpProtocolError(f"unexpected content type {kind!r}")

    async def _events(
        self, response: httpx.Response, rid: int | str | None, outcome: _StreamOutcome | None = None
    ) -> _StreamOutcome:
        """Dispatch each SSE event's ``data`` (bounded) as one message; a cut stream (an HTTP
        error mid-body) is an outcome, not an error, so that it can be resumed."""
        outcome = outcome or _StreamOutcome()
        try:
            async for event in sse_events(response.aiter_bytes(), max_bytes=self._max_frame):
                if event.id is not None:
                    outcome.event_id = event.id
                if event.retry_ms is not None:
                    outcome.retry_ms = event.retry_ms
                if event.event == "message" and event.data.strip():
                    if rid is not None and not outcome.answered:
                        outcome.answered = _answers(event.data, rid)
                    self._deliver(event.data)
                if outcome.answered:
                    break  # the stream's purpose is served (the spec lets the client close it)
        except McpProtocolError as exc:
            self._fault(str(exc))
        except httpx.HTTPError as exc:
            if rid is None:
                raise
            log.info("mcp server %s: an answer's stream was cut: %s", self.name, type(exc).__name__)
        return outcome

    async def _resume(self, rid: int | str, outcome: _StreamOutcome) -> None:
        """Resume a cut answer stream with ``Last-Event-ID`` until the response arrives."""
        if outcome.event_id is None:
            raise McpConnectionError(
                "the server ended the answer's stream before the response, with no event id "
                "to resume it from"
            )
        for attempt in range(1, _RESUME_RETRIES + 1):
            retry_ms = outcome.retry_ms
            wait = retry_ms / 1000 if retry_ms is not None else _GET_BACKOFF.delay(attempt)
            await asyncio.sleep(wait)
            headers = self._request_headers(accept="text/event-stream")
            headers.pop("Content-Type")
            headers["Last-Event-ID"] = outcome.event_id
            try:
                headers = await self._auth_headers(headers)
                async with self._http().stream("GET", self.url, headers=headers) as r:
                    if r.status_code == 404 and self.session_id is not None:
                        self._lost("the server ended the session (HTTP 404)")
                        raise McpConnectionError("the server ended the session (HTTP 404)")
                    if r.status_code == 405:
                        raise McpConnectionError(
                            "the answer's stream was cut and the server offers no GET stream "
                            "to resume it"
                        )
                    await self._check_status(r)
                    outcome = await self._events(r, rid, outcome)
            except httpx.HTTPError as exc:
                log.info("mcp server %s: resuming failed: %s", self.name, type(exc).__name__)
            if outcome.answered:
                return
        raise McpConnectionError(
            f"the answer's stream was cut; resuming it failed {_RESUME_RETRIES} times"
        )

    def _fault(self, reason: str) -> None:
        self._lost(reason)
        raise McpProtocolError(reason)

    # -- the GET stream ----------------------------------------------------------------------

    def listen(self) -> None:
        if self.protocol_version in MODERN_PROTOCOLS:
            return  # the stateless era has no session, so no GET stream
        """Open the GET stream for server-initiated messages (once, after initialization)."""
        if self._client is not None and self.get_stream_state == "closed":
            self.get_stream_state = "open"
            self._spawn(self._get_stream())

    async def _get_stream(self) -> None:
        failures = 0
        delay_ms: int | None = None
        while self._client is not None:
            headers = self._request_headers(accept="text/event-stream")
            headers.pop("Content-Type")
            if self._last_event_id is not None:
                headers["Last-Event-ID"] = self._last_event_id
            try:
                headers = await self._auth_headers(headers)
                timeout = httpx.Timeout(None, connect=self._timeout.connect)
                async with self._http().stream(
                    "GET", self.url, headers=headers, timeout=timeout
                ) as r:
                    if r.status_code == 405:
                        self.get_stream_state = "not offered"
                        return
                    if r.status_code == 404 and self.session_id is not None:
                        self._lost("the server ended the session (HTTP 404)")
                        return
                    await self._check_status(r)
                    failures = 0
                    async for event in sse_events(r.aiter_bytes(), max_bytes=self._max_frame):
                        if event.id is not None:
                            self._last_event_id = event.id
                        if event.retry_ms is not None:
                            delay_ms = event.retry_ms
                        if event.event == "message":
                            self._deliver(event.data)
            except McpProtocolError as exc:
                self._lost(str(exc))
                return
            except (McpConnectionError, httpx.HTTPError) as exc:
                failures += 1
                log.info("mcp server %s: GET stream failed: %s", self.name, type(exc).__name__)
            else:
                failures += 1  # the server ended the stream: reopen it (resuming)
            if failures > _GET_RETRIES:
                self.get_stream_state = "gave up"
                log.warning("mcp server %s: the GET stream keeps failing; not reopened", self.name)
                return
            wait = delay_ms / 1000 if delay_ms is not None else _GET_BACKOFF.delay(failures)
            await asyncio.sleep(wait)

    async def aclose(self) -> None:
        await self._close_tasks()
        client, self._client = self._client, None
        if client is None:
            return
        if self.session_id is not None:
            with contextlib.suppress(httpx.HTTPError, McpConnectionError):
                headers = await self._auth_headers(self._request_headers())
                await client.delete(self.url, headers=headers, timeout=2.0)
        await client.aclose()


class SseTransport(_HttpBase):
    """One MCP server over the legacy HTTP+SSE transport (protocol 2024-11-05; loop-only)."""

    def __init__(
        self,
        *,
        name: str,
        url: str,
        headers: Mapping[str, str] | None = None,
        auth: HttpAuth | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        connect_timeout_s: float = 30.0,
        read_timeout_s: float = 300.0,
    ) -> None:
        super().__init__(
            name=name, url=url, headers=headers, auth=auth, max_frame_bytes=max_frame_bytes,
            connect_timeout_s=connect_timeout_s, read_timeout_s=read_timeout_s,
        )  # fmt: skip
        self.endpoint: str | None = None
        self._endpoint_ready: asyncio.Future[str] | None = None

    async def start(
        self, on_message: Callable[[bytes], None], on_close: Callable[[str], None]
    ) -> None:
        """Open the GET stream and wait for its ``endpoint`` event (the caller bounds it)."""
        self._open(on_message, on_close)
        self._endpoint_ready = asyncio.get_running_loop().create_future()
        self._spawn(self._stream())
        self.endpoint = await self._endpoint_ready

    async def _stream(self) -> None:
        ready = self._endpoint_ready
        assert ready is not None
        reason = "the SSE stream ended"
        try:
            await self._read_stream(ready)
        except (McpConnectionError, httpx.HTTPError) as exc:
            failure = (
                exc
                if isinstance(exc, McpConnectionError)
                else McpConnectionError(f"HTTP error: {type(exc).__name__}")
            )
            reason = str(failure)
            if not ready.done():
                ready.set_exception(failure)
        finally:  # whatever ended the stream, start() never waits on a stream that is gone
            if not ready.done():
                ready.set_exception(McpConnectionError("the SSE stream ended before its endpoint"))
        self._lost(reason)

    async def _read_stream(self, ready: asyncio.Future[str]) -> None:
        timeout = httpx.Timeout(None, connect=self._timeout.connect)
        http = self._http()
        for attempt in (1, 2):
            headers = await self._auth_headers({**self._headers, "Accept": "text/event-stream"})
            r = await http.send(
                http.build_request("GET", self.url, headers=headers, timeout=timeout), stream=True
            )
            if not await self._retry_401(r, attempt):
                break
            await r.aclose()
        try:
            await self._check_status(r)
            kind = r.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind != "text/event-stream":
                raise McpProtocolError(f"the SSE endpoint answered {kind!r}")
            async for event in sse_events(r.aiter_bytes(), max_bytes=self._max_frame):
                if event.event == "endpoint" and not ready.done():
                    ready.set_result(self._resolve(event.data.decode("utf-8", "replace")))
                elif event.event == "message" and ready.done():
                    self._deliver(event.data)
        finally:
            await r.aclose()

    def _resolve(self, endpoint: str) -> str:
        target = urljoin(self.url, endpoint.strip())
        ours, theirs = urlsplit(self.url), urlsplit(target)
        if (ours.scheme, ours.netloc) != (theirs.scheme, theirs.netloc):
            raise McpProtocolError(
                f"the SSE endpoint is on another origin ({theirs.scheme}://{theirs.netloc}); "
                "refused"
            )
        return target

    async def send(self, payload: bytes) -> None:
        if self.endpoint is None:
            raise McpConnectionError("the SSE endpoint is not known yet")
        headers = {**self._headers, "Content-Type": "application/json"}
        try:
            for attempt in (1, 2):
                r = await self._http().post(
                    self.endpoint, content=payload, headers=await self._auth_headers(headers)
                )
                if await self._retry_401(r, attempt):
                    continue
                await self._check_status(r)
                return
        except httpx.TimeoutException as exc:
            raise McpConnectionError(f"HTTP timeout: {type(exc).__name__}") from None
        except httpx.HTTPError as exc:
            raise McpConnectionError(f"HTTP error: {type(exc).__name__}: {exc}") from None

    async def aclose(self) -> None:
        await self._close_tasks()
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
