"""The other direction over Streamable HTTP: :func:`serve_http` offers a :class:`ToolHost`'s
tools at ``http://HOST:PORT/mcp`` (Starlette on uvicorn), the same protocol as
:func:`~lemon_mcp.serve_stdio` (each session is that server's ``_Session``).

- ``POST /mcp``: one JSON-RPC message (``Content-Type: application/json``, at most 16 MiB).
  ``initialize`` opens a session, named by the ``Mcp-Session-Id`` answer header that every
  later request must carry (a missing one is 400, an unknown or ended one 404). A request is
  answered with JSON, except ``tools/call`` which is answered with an SSE stream when the
  client accepts one: an approval asked through ``elicitation/create`` travels on it, and the
  call's result ends it. A notification or a response (an elicitation's answer) gets 202.
- ``GET /mcp`` (``Accept: text/event-stream``, the session's id) opens the session's stream
  for server-initiated messages: :meth:`McpHttpApp.tools_changed`'s
  ``notifications/tools/list_changed``, and what a call asks while its POST was answered with
  JSON. A new GET takes the stream over (the previous one ends): one stream per message.
  ``DELETE /mcp`` ends the session (and its streams).
- Resumption: every SSE event carries an id unique in its session; the session keeps the last
  256 events (at most 16 MiB) of its streams. A GET with ``Last-Event-ID`` replays what followed
  that event on the stream it belongs to, then goes on with that stream live: a ``tools/call``
  whose answer stream was cut gets the rest of it (its response included) on the GET. An id
  the session does not hold is 400. The call itself goes on when its stream is cut (a
  disconnection is not a cancellation).
- Bad input gets a clean JSON-RPC error with a 4xx status, never a traceback: a body that is
  not JSON -32700, a batch or a message that is not JSON-RPC 2.0 -32600, an unsupported
  ``MCP-Protocol-Version`` 400, a wrong content type 415, a body too large 413.
- DNS rebinding: on a loopback bind the ``Host`` header must name a loopback host, and an
  ``Origin``, when sent, must be a loopback origin or one of ``allowed_origins``: else 403.
  (A public bind takes any ``Host``: its bearer token is what a rebinding page lacks.)
- A bind that is not loopback needs a bearer ``token``; with one, every request must carry
  ``Authorization: Bearer <token>`` (compared in constant time), else 401.
- At most ``max_sessions`` sessions; a new one ends the least recently used idle session, and
  when every session has a call in flight the ``initialize`` is answered 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hmac
import ipaddress
import logging
import secrets
import socket
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Generator, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from lemon_mcp._server import ToolHost, _Session
from lemon_mcp._stdio import MAX_FRAME_BYTES
from lemon_mcp._wire import SUPPORTED_PROTOCOLS, decode
from lemon_mcp.errors import McpError, McpProtocolError

__all__ = ["HttpServeError", "McpHttpApp", "is_loopback_host", "parse_bind", "serve_http"]

log = logging.getLogger("lemon_mcp")

_SESSION_HEADER: Final = "mcp-session-id"
_OUTBOX: Final = 64
"""Messages one POST's stream holds before more are dropped (a response and a few asks)."""
_REPLY_TIMEOUT_S: Final = 30.0
_REPLAY_EVENTS: Final = 256
"""Events a session keeps for resumption (``Last-Event-ID``), and their byte bound."""
_REPLAY_BYTES: Final = 16 * 1024 * 1024
_POST_STREAMS: Final = 256
"""POST streams a session remembers (to resume them), the oldest forgotten first."""
_LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})

_OUTBOX_VAR: contextvars.ContextVar[_Stream | None] = contextvars.ContextVar(
    "lemon_mcp_http_outbox", default=None
)


class HttpServeError(McpError):
    """``serve_http`` cannot serve as asked (a bad bind, a public bind without a token)."""


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address, maybe bracketed) is a loopback host."""
    bare = host.strip().strip("[]").lower()
    if bare == "localhost":
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False


def _host_name(value: str) -> str:
    """The host of a ``Host`` header value (``name:port``, ``[v6]:port``)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _rpc_error(status: int, code: int, message: str, rid: Any = None) -> JSONResponse:
    body = {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status)


#: What a stream's live reader gets: an event (its id, the message), or None: the stream ends.
_Live = tuple[int, bytes] | None


class _Stream:
    """One SSE stream of a session: a POST's (``rid``: the request it answers) or the GET's
    (``rid`` None). Its events go to the session's log; ``live`` is the reader attached now."""

    def __init__(self, key: str, rid: int | str | None, *, json_answer: bool = False) -> None:
        self.key = key
        self.rid = rid
        self.json_answer = json_answer  # a POST answered with JSON: no events, no log
        self.live: asyncio.Queue[_Live] | None = None
        self.answered = False

    def attach(self) -> asyncio.Queue[_Live]:
        """A new reader; a previous one ends (it may be a connection not yet seen gone)."""
        if self.live is not None:
            with contextlib.suppress(asyncio.QueueFull):
                self.live.put_nowait(None)
        self.live = asyncio.Queue(_OUTBOX)
        return self.live

    def detach(self, queue: asyncio.Queue[_Live]) -> None:
        if self.live is queue:
            self.live = None


class _HttpSession:
    def __init__(self, host: ToolHost, max_concurrent: int) -> None:
        self.id = secrets.token_urlsafe(24)
        self.protocol = _Session(host, self._emit, max_concurrent, list_changed=True)
        self.used = time.monotonic()
        self.standalone = _Stream("get", None)
        self._posts: OrderedDict[str, _Stream] = OrderedDict()
        self._events: deque[tuple[int, str, bytes]] = deque()
        self._event_bytes = 0
        self._n = 0
        self._streams = 0
        self.closed = False

    def post_stream(self, rid: int | str, *, json_answer: bool) -> _Stream:
        self._streams += 1
        stream = _Stream(f"post-{self._streams}", rid, json_answer=json_answer)
        if not json_answer:
            self._posts[stream.key] = stream
            while len(self._posts) > _POST_STREAMS:
                self._posts.popitem(last=False)
        return stream

    async def _emit(self, payload: bytes) -> None:
        self.send(_OUTBOX_VAR.get() or self.standalone, payload)

    def send(self, stream: _Stream, payload: bytes) -> None:
        """``payload`` on ``stream``: logged with the next id, and handed to its live reader."""
        if stream.json_answer:
            if stream.rid is not None and _answers(payload, stream.rid) and stream.live is not None:
                with contextlib.suppress(asyncio.QueueFull):
                    stream.live.put_nowait((0, payload))
                return
            stream = self.standalone  # an ask of a call answered with JSON: on the GET stream
        self._n += 1
        n = self._n
        self._events.append((n, stream.key, payload))
        self._event_bytes += len(payload)
        while len(self._events) > _REPLAY_EVENTS or (
            self._event_bytes > _REPLAY_BYTES and len(self._events) > 1
        ):
            self._event_bytes -= len(self._events.popleft()[2])
        if stream.rid is not None and _answers(payload, stream.rid):
            stream.answered = True
        if stream.live is None:
            if stream is self.standalone:
                log.info("mcp serve --http: no GET stream open; message %d kept for resuming", n)
            return
        try:
            stream.live.put_nowait((n, payload))
        except asyncio.QueueFull:
            # The reader is that far behind: its stream ends, and the client resumes from the
            # log (this event is in it).
            log.warning("mcp serve --http: a stream fell behind; it ends (resumable)")
            stream.live = None

    def resume(
        self, last_event_id: str
    ) -> tuple[_Stream, list[tuple[int, bytes]], asyncio.Queue[_Live]] | None:
        """The stream ``last_event_id`` belongs to, the events that followed it there, and a
        reader attached to it now (nothing can come between); None for an id not held."""
        try:
            after = int(last_event_id.strip())
        except ValueError:
            return None
        key = next((k for n, k, _p in self._events if n == after), None)
        if key is None:
            return None
        stream = self.standalone if key == "get" else self._posts.get(key)
        if stream is None:
            return None
        replay = [(n, p) for n, k, p in self._events if k == key and n > after]
        return stream, replay, stream.attach()

    async def aclose(self) -> None:
        self.closed = True
        for stream in (self.standalone, *self._posts.values()):
            if stream.live is not None:
                with contextlib.suppress(asyncio.QueueFull):
                    stream.live.put_nowait(None)
        await self.protocol.aclose()


class McpHttpApp:
    """The ASGI app (``.asgi``) serving one host's tools at ``/mcp``."""

    def __init__(
        self,
        host: ToolHost,
        *,
        bound_host: str = "127.0.0.1",
        token: str | None = None,
        allowed_origins: Sequence[str] = (),
        max_sessions: int = 64,
        max_concurrent: int = 8,
        max_body_bytes: int = MAX_FRAME_BYTES,
    ) -> None:
        self._host = host
        self._bound = bound_host.strip("[]").lower()
        # On loopback the Host check is the DNS-rebinding guard; a public bind has the token.
        self._loopback = is_loopback_host(self._bound)
        self._token = token
        self._origins = frozenset(o.rstrip("/").lower() for o in allowed_origins)
        self._max_sessions = max_sessions
        self._max_concurrent = max_concurrent
        self._max_body = max_body_bytes
        self._sessions: OrderedDict[str, _HttpSession] = OrderedDict()
        self.asgi = Starlette(routes=[
            Route("/mcp", self._endpoint, methods=["GET", "POST", "DELETE"]),
        ])  # fmt: skip

    @property
    def session_count(self) -> int:
        return len(self._sessions)

    # -- checks ------------------------------------------------------------------------------

    def _refused(self, request: Request) -> Response | None:
        host = _host_name(request.headers.get("host", ""))
        if self._loopback and not (is_loopback_host(host) or host == self._bound):
            return _rpc_error(403, -32000, f"host {host!r} is not allowed (DNS rebinding guard)")
        origin = request.headers.get("origin")
        if origin is not None and not self._origin_ok(origin):
            return _rpc_error(403, -32000, f"origin {origin!r} is not allowed")
        if self._token is not None:
            given = request.headers.get("authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                value.strip().encode(), self._token.encode()
            ):
                response = _rpc_error(401, -32000, "a bearer token is required")
                response.headers["WWW-Authenticate"] = "Bearer"
                return response
        version = request.headers.get("mcp-protocol-version")
        if version is not None and version not in SUPPORTED_PROTOCOLS:
            return _rpc_error(400, -32600, f"unsupported MCP-Protocol-Version {version!r}")
        return None

    def _origin_ok(self, origin: str) -> bool:
        if origin.rstrip("/").lower() in self._origins:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and is_loopback_host(parts.hostname or "")

    def _session(self, request: Request) -> _HttpSession | Response:
        sid = request.headers.get(_SESSION_HEADER)
        if not sid:
            return _rpc_error(400, -32600, "missing Mcp-Session-Id (send initialize first)")
        session = self._sessions.get(sid)
        if session is None:
            return _rpc_error(404, -32001, "unknown or ended session")
        self._sessions.move_to_end(sid)
        session.used = time.monotonic()
        return session

    async def _new_session(self) -> _HttpSession | None:
        while len(self._sessions) >= self._max_sessions:
            idle = next((s for s in self._sessions.values() if not s.protocol.busy), None)
            if idle is None:
                return None
            del self._sessions[idle.id]
            await idle.aclose()
        session = _HttpSession(self._host, self._max_concurrent)
        self._sessions[session.id] = session
        return session

    # -- the endpoint ------------------------------------------------------------------------

    async def _endpoint(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        if request.method == "GET":
            return self._get(request)
        if request.method == "DELETE":
            found = self._session(request)
            if isinstance(found, Response):
                return found
            del self._sessions[found.id]
            await found.aclose()
            return Response(status_code=204)
        return await self._post(request)

    def _get(self, request: Request) -> Response:
        """The session's stream of server-initiated messages, or the rest of a stream after
        ``Last-Event-ID``."""
        if "text/event-stream" not in request.headers.get("accept", "").lower():
            return _rpc_error(406, -32600, "GET wants Accept: text/event-stream")
        found = self._session(request)
        if isinstance(found, Response):
            return found
        session = found
        headers = {"Mcp-Session-Id": session.id, "Cache-Control": "no-cache"}
        last = request.headers.get("last-event-id")
        if last is None:
            stream, queue = session.standalone, session.standalone.attach()
            events = _sse(session, stream, [], queue, None)
            return StreamingResponse(events, media_type="text/event-stream", headers=headers)
        resumed = session.resume(last)
        if resumed is None:
            return _rpc_error(400, -32000, f"event {last[:64]!r} is not held by this session")
        stream, replay, queue = resumed
        task = session.protocol.call_task(stream.rid) if stream.rid is not None else None
        events = _sse(session, stream, replay, queue, task)
        return StreamingResponse(events, media_type="text/event-stream", headers=headers)

    async def tools_changed(self) -> None:
        """Tell every session's client that the tools changed
        (``notifications/tools/list_changed`` on its GET stream, kept for resuming)."""
        payload = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'
        for session in list(self._sessions.values()):
            session.send(session.standalone, payload)

    async def aclose(self) -> None:
        """End every session (their streams end too)."""
        sessions = list(self._sessions.values())
        self._sessions.clear()
        for session in sessions:
            await session.aclose()

    async def _body(self, request: Request) -> bytes | Response:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            return _rpc_error(415, -32600, "Content-Type must be application/json")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self._max_body:
                return _rpc_error(413, -32600, f"a body over {self._max_body} bytes")
        return bytes(body)

    async def _post(self, request: Request) -> Response:
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        try:
            raw = msgspec.json.decode(body)
        except msgspec.DecodeError:
            return _rpc_error(400, -32700, "parse error: the body is not JSON")
        if isinstance(raw, list):
            return _rpc_error(400, -32600, "batches are not supported")
        if not isinstance(raw, dict) or raw.get("jsonrpc") != "2.0":
            return _rpc_error(400, -32600, "invalid request: not a JSON-RPC 2.0 object")
        try:
            message = decode(body)
        except McpProtocolError as exc:
            return _rpc_error(400, -32600, f"invalid request: {exc}", raw.get("id"))
        if message.method == "initialize" and message.id is not None:
            session = await self._new_session()
            if session is None:
                return _rpc_error(503, -32000, "too many sessions with calls in flight")
        else:
            found = self._session(request)
            if isinstance(found, Response):
                return found
            session = found
        if message.id is None or message.method is None:
            session.protocol.on_frame(body)  # a notification, or an answer to our ask
            return Response(status_code=202)
        accept = request.headers.get("accept", "").lower()
        sse = message.method == "tools/call" and "text/event-stream" in accept
        stream = session.post_stream(message.id, json_answer=not sse)
        queue = stream.attach()
        token = _OUTBOX_VAR.set(stream)
        try:
            session.protocol.on_frame(body)  # the tasks it starts carry this stream
        finally:
            _OUTBOX_VAR.reset(token)
        headers = {"Mcp-Session-Id": session.id}
        task = session.protocol.call_task(message.id)
        if task is not None and sse:
            events = _sse(session, stream, [], queue, task)
            return StreamingResponse(events, media_type="text/event-stream", headers=headers)
        reply = await _reply(queue, task)
        if reply is None:
            return Response(status_code=204, headers=headers)  # a cancelled call
        return Response(reply, media_type="application/json", headers=headers)


def _answers(payload: bytes, rid: int | str) -> bool:
    try:
        message = decode(payload)
    except McpProtocolError:
        return False
    return message.is_response and message.id == rid


async def _next(
    queue: asyncio.Queue[_Live], task: asyncio.Task[None] | None, timeout_s: float | None
) -> _Live:
    """The next event for this reader, or None once the stream (or the call) ended."""
    if not queue.empty() or task is None or task.done():
        try:
            return await asyncio.wait_for(queue.get(), timeout_s)
        except TimeoutError:
            return None
    getter = asyncio.ensure_future(queue.get())
    try:
        await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not getter.done():
            getter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await getter
    if getter.done() and not getter.cancelled():
        return getter.result()
    return queue.get_nowait() if not queue.empty() else None


async def _reply(queue: asyncio.Queue[_Live], task: asyncio.Task[None] | None) -> bytes | None:
    """A JSON answer: the response (the stream forwards anything else to the GET stream)."""
    item = await _next(queue, task, None if task is not None else _REPLY_TIMEOUT_S)
    return None if item is None else item[1]


def _event(n: int, payload: bytes) -> bytes:
    return b"event: message\nid: " + str(n).encode() + b"\ndata: " + payload + b"\n\n"


async def _sse(
    session: _HttpSession,
    stream: _Stream,
    replay: list[tuple[int, bytes]],
    queue: asyncio.Queue[_Live],
    task: asyncio.Task[None] | None,
) -> AsyncIterator[bytes]:
    """One SSE response: ``replay`` first, then what comes live. A POST stream ends with its
    response (or when its call ended without one); the GET stream when the session ends or a
    new GET takes it over."""
    try:
        for n, payload in replay:
            yield _event(n, payload)
            if stream.rid is not None and _answers(payload, stream.rid):
                return
        if stream.rid is not None and (stream.answered or task is None or task.done()):
            # Its response went out before the id resumed from, or its call ended silently;
            # what is still queued (sent since the replay was cut) comes first.
            while not queue.empty():
                item = queue.get_nowait()
                if item is None:
                    return
                yield _event(*item)
                if _answers(item[1], stream.rid):
                    return
            return
        while not session.closed:
            item = await _next(queue, task if stream.rid is not None else None, None)
            if item is None:
                return
            yield _event(*item)
            if stream.rid is not None and _answers(item[1], stream.rid):
                return
    finally:
        stream.detach(queue)


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers (the command owns them)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def parse_bind(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) as a pair, or :class:`HttpServeError`."""
    host, sep, port = value.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise HttpServeError(f"--http wants HOST:PORT (e.g. 127.0.0.1:8765), not {value!r}")
    return host.strip("[]"), int(port)


async def serve_http(
    host: ToolHost,
    bind: str,
    *,
    token: str | None = None,
    allowed_origins: Sequence[str] = (),
    on_listening: Callable[[str], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve ``host``'s tools at ``http://bind/mcp`` until ``stop`` is set (or cancelled).

    ``on_listening`` gets the URL once the socket is bound (the actual port for ``:0``).
    """
    name, port = parse_bind(bind)
    if not is_loopback_host(name) and not token:
        raise HttpServeError(
            f"{name} is not a loopback address: a bearer token is required "
            "(--token-env NAME, the variable holding it)"
        )
    family = socket.AF_INET6 if ":" in name else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((name, port))
        sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    except OSError as exc:
        sock.close()
        raise HttpServeError(f"cannot listen on {bind}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    app = McpHttpApp(host, bound_host=name, token=token, allowed_origins=allowed_origins)
    config = uvicorn.Config(
        app.asgi, log_config=None, access_log=False, lifespan="off", server_header=False,
        timeout_graceful_shutdown=2,
    )  # fmt: skip
    server = _Server(config)
    actual = sock.getsockname()[1]
    shown = f"[{name}]" if ":" in name else name
    if on_listening is not None:
        on_listening(f"http://{shown}:{actual}/mcp")

    async def watch() -> None:
        if stop is not None:
            await stop.wait()
            await app.aclose()  # the open GET streams end, so the shutdown does not wait
            server.should_exit = True

    watcher = asyncio.get_running_loop().create_task(watch())
    try:
        await server.serve(sockets=[sock])
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        await app.aclose()
        sock.close()
