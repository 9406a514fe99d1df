"""A :class:`~lemon_core.sessions.SessionPort` over the control plane's WebSocket.

``async with WebSocketSessionPort(ws_url) as port`` connects, completes the handshake, and
then speaks the ``port.*`` methods: the same API as the in-process port, so a client (the
terminal chat, a test kit) does not know which one it holds.

Streams: :meth:`WebSocketSessionPort.watch` queues the ``port.watch`` request at once (frames
leave in order and the server subscribes before it reads the next frame, so a ``submit`` sent
after ``watch`` is seen by the stream). Each stream holds at most ``stream_max_entries``
undelivered events; when the reader falls further behind, or the server says the connection
fell behind (``stream.resync``), or the connection ends, the stream ends with one
:class:`~lemon_core.sessions.StreamOverflow` (recover with :meth:`snapshot`, as with the
in-process port).

The daemon's other wire events (``task.started``, ``run.graph.changed``...) go to the handlers
given to :meth:`WebSocketSessionPort.on_event`, on the reader, in arrival order.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import ssl as _ssl
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

import msgspec
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from lemon_control_plane._params import (
    ApprovalParams,
    CancelParams,
    CompactParams,
    HistoryParams,
    KeyParams,
    LimitParams,
    NoParams,
    Params,
    PatchParams,
    RunsParams,
    SteerParams,
    SubmitParams,
    WatchParams,
    wire_params,
)
from lemon_control_plane._port_wire import request_params
from lemon_control_plane.errors import ControlPlaneError, WireError, WireUsageError
from lemon_core.errors import UsageError
from lemon_core.events import ApprovalDecision
from lemon_core.execution import Receipt, RouterUnavailableError, RunRequest
from lemon_core.sessions import (
    ALL_SESSIONS,
    ApprovalResult,
    CancelResult,
    CompactResult,
    RunRecord,
    SessionChange,
    SessionEvent,
    SessionPort,
    SessionPortStatistics,
    SessionSettings,
    SessionSnapshot,
    SessionStreamBase,
    SessionSummary,
    SteerResult,
    StreamOverflow,
    TranscriptPage,
    check_session_key,
)

__all__ = ["WebSocketSessionPort", "WebSocketSessionStream"]

_DEFAULT_STREAM_ENTRIES: Final = 4096
_REQUEST_TIMEOUT_S: Final = 60.0
_MAX_HANDLERS: Final = 16
_log = logging.getLogger("lemon_control_plane.client")

EventHandler = Callable[[str, dict[str, Any]], None]


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of a request nobody awaits (see ``_post``)."""
    if not future.cancelled():
        future.exception()


class WebSocketSessionStream(SessionStreamBase):
    """One ``port.watch`` (see the module docstring): the shared stream mechanics of
    :class:`lemon_core.sessions.SessionStreamBase`, fed by the connection's reader."""

    def __init__(
        self, owner: WebSocketSessionPort, watch_id: str, session_key: str, bound: int
    ) -> None:
        super().__init__(session_key)
        self.watch_id = watch_id
        self._owner = owner
        self._bound = bound
        self._wake = asyncio.Event()

    def _offer(self, event: SessionEvent) -> None:
        if self._finished or self._closed:
            return
        if isinstance(event, StreamOverflow):
            self._end(event.reason)
            return
        if len(self._ready) >= self._bound:
            self._end("this stream fell behind (its bounded buffer overflowed)")
            return
        self._ready.append(event)
        self._wake.set()

    def _end(self, reason: str) -> None:
        self._overflow(reason)

    def _on_overflow(self) -> None:
        self._wake.set()
        self._owner._forget(self)

    async def _more(self) -> None:
        self._wake.clear()
        await self._wake.wait()

    def _on_close(self) -> None:
        self._wake.set()
        self._owner._unwatch(self)


class WebSocketSessionPort:
    """See the module docstring. ``token`` goes to ``connect`` as ``params.auth.token``;
    ``ssl`` is how a ``wss://`` server is trusted (``None``: the system's CAs)."""

    def __init__(
        self,
        ws_url: str,
        *,
        token: str | None = None,
        stream_max_entries: int = _DEFAULT_STREAM_ENTRIES,
        ssl: _ssl.SSLContext | None = None,
    ) -> None:
        self._url = ws_url
        self._token = token
        self._ssl = ssl
        self._bound = stream_max_entries
        self._ws: ClientConnection | None = None
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[Any]] = {}
        self._streams: dict[str, WebSocketSessionStream] = {}
        self._outbox: asyncio.Queue[str | None] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._gone: str | None = None
        self.hello: dict[str, Any] = {}
        self._opened = 0
        self._submitted = 0
        self._overflowed = 0
        self._handlers: list[EventHandler] = []

    # -- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> WebSocketSessionPort:
        try:
            if self._ssl is not None:
                self._ws = await connect(self._url, max_size=None, ssl=self._ssl)
            else:
                self._ws = await connect(self._url, max_size=None)
        except (OSError, ConnectionClosed) as exc:
            raise ControlPlaneError(f"cannot connect to {self._url}: {exc}") from None
        params: dict[str, Any] = {"role": "operator", "client": {"id": "lemon-py-port"}}
        if self._token is not None:
            params["auth"] = {"token": self._token}
        await self._ws.send(
            json.dumps({"type": "req", "id": "connect", "method": "connect", "params": params})
        )
        hello = json.loads(await self._ws.recv())
        if hello.get("type") != "hello-ok":
            await self._ws.close()
            error = hello.get("error") or {}
            raise WireError(
                error.get("code", "UNAUTHORIZED"), error.get("message", "handshake refused")
            )
        self.hello = hello
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._reader()), loop.create_task(self._writer())]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the streams (they end, not overflow), then the connection."""
        if self._gone is None:
            self._gone = "the port was closed"
        for stream in list(self._streams.values()):
            stream.close()
        self._outbox.put_nowait(None)
        if self._ws is not None:
            await self._ws.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._lost("the port was closed")

    # -- the transport ------------------------------------------------------------------------

    async def _writer(self) -> None:
        assert self._ws is not None
        while (text := await self._outbox.get()) is not None:
            try:
                await self._ws.send(text)
            except ConnectionClosed:
                self._lost("the control plane closed the connection")
                return

    async def _reader(self) -> None:
        assert self._ws is not None
        try:
            async for raw in self._ws:
                frame = json.loads(raw)
                kind = frame.get("type")
                if kind == "res":
                    future = self._pending.pop(frame.get("id"), None)
                    if future is not None and not future.done():
                        future.set_result(frame)
                elif kind == "event":
                    self._event(frame.get("event"), frame.get("payload") or {})
        except ConnectionClosed:
            pass
        self._lost("the control plane closed the connection")

    def _event(self, name: object, payload: dict[str, Any]) -> None:
        if name == "port.event":
            stream = self._streams.get(payload.get("watchId", ""))
            if stream is not None:
                stream._offer(msgspec.convert(payload["event"], SessionEvent))
        elif name == "stream.resync" and payload.get("scope") == "connection":
            for stream in list(self._streams.values()):
                stream._end("the connection fell behind; the control plane dropped its events")
        elif name == "shutdown":
            self._lost("the daemon is shutting down")
        if isinstance(name, str) and name != "port.event":
            for handler in tuple(self._handlers):
                try:
                    handler(name, payload)
                except Exception:  # a handler's fault must not stop the reader (the streams)
                    _log.exception("an event handler failed on %s", name)

    def on_event(self, handler: EventHandler) -> Callable[[], None]:
        """Call ``handler(name, payload)`` for each wire event other than ``port.event`` (the
        streams' own), on the reader: it must not block (hand the work on). Returns the call
        that removes it. At most 16 handlers at once (a ``ValueError`` past that)."""
        if len(self._handlers) >= _MAX_HANDLERS:
            raise ValueError(f"at most {_MAX_HANDLERS} event handlers per port")
        self._handlers.append(handler)

        def remove() -> None:
            if handler in self._handlers:
                self._handlers.remove(handler)

        return remove

    def _lost(self, reason: str) -> None:
        """The connection ended: pending requests fail, open streams overflow (recover)."""
        if self._gone is None:
            self._gone = reason
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ControlPlaneError(f"the request got no answer: {reason}"))
        self._pending.clear()
        for stream in list(self._streams.values()):
            stream._end(reason)

    def _send(self, method: str, params: Params | dict[str, Any]) -> asyncio.Future[Any]:
        rid = f"p{next(self._ids)}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self._gone is not None:
            future.set_exception(ControlPlaneError(f"not connected: {self._gone}"))
            return future
        self._pending[rid] = future
        self._outbox.put_nowait(
            json.dumps(
                {
                    "type": "req",
                    "id": rid,
                    "method": method,
                    "params": wire_params(params) if isinstance(params, Params) else params,
                }
            )
        )
        return future

    def _post(self, method: str, params: Params | dict[str, Any]) -> None:
        """Send a request nobody awaits (``port.watch``, ``port.unwatch``): its answer, or the
        failure the connection's end gives it, is consumed here, so a port closed while such a
        request is unanswered leaves no "Future exception was never retrieved" behind."""
        self._send(method, params).add_done_callback(_consume)

    async def _call(self, method: str, params: Params | dict[str, Any]) -> Any:
        frame = await asyncio.wait_for(self._send(method, params), _REQUEST_TIMEOUT_S)
        if not frame.get("ok"):
            error = frame.get("error") or {}
            code, message = (
                error.get("code", "INTERNAL_ERROR"),
                error.get("message", "unknown error"),
            )
            if code in ("INVALID_PARAMS", "INVALID_REQUEST"):
                raise WireUsageError(code, message)
            raise WireError(code, message)
        return frame.get("payload")

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Any other wire method the daemon advertises (``models.list``, ``usage.status``,
        ``session.detail``...): its ``res`` payload, or :class:`WireError` (a bad request:
        :class:`WireUsageError`, a ``ValueError``)."""
        advertised = self.hello.get("features", {}).get("methods", ())
        if method not in advertised:
            raise WireError("METHOD_NOT_FOUND", f"the daemon does not offer {method}")
        return await self._call(method, params or {})

    # -- SessionPort ----------------------------------------------------------------------------

    async def submit(self, request: RunRequest) -> Receipt:
        try:
            data = await self._call("port.submit", SubmitParams(request=request_params(request)))
        except WireError as exc:
            if exc.code == "UNAVAILABLE":
                raise RouterUnavailableError(exc.message) from None
            raise
        self._submitted += 1
        return Receipt(**data)

    async def steer(self, session_key: str, text: str) -> SteerResult:
        data = await self._call("port.steer", SteerParams(session_key=session_key, text=text))
        return msgspec.convert(data, SteerResult)

    async def cancel(
        self,
        *,
        run_id: str | None = None,
        session_key: str | None = None,
        include_queued: bool = True,
    ) -> CancelResult:
        if (run_id is None) == (session_key is None):
            raise UsageError("cancel takes exactly one of run_id= or session_key=")
        params = CancelParams(run_id=run_id, session_key=session_key, include_queued=include_queued)
        return msgspec.convert(await self._call("port.cancel", params), CancelResult)

    async def resolve_approval(
        self, approval_id: str, decision: ApprovalDecision | str
    ) -> ApprovalResult:
        value = decision.value if isinstance(decision, ApprovalDecision) else str(decision)
        data = await self._call(
            "port.resolveApproval", ApprovalParams(approval_id=approval_id, decision=value)
        )
        return msgspec.convert(data, ApprovalResult)

    def watch(self, session_key: str, *, max_entries: int | None = None) -> WebSocketSessionStream:
        """Follow ``session_key`` from now on; ``max_entries`` overrides the stream bound.
        A malformed key raises ``InvalidSessionKeyError`` (a ``ValueError``) here, as the
        in-process port does."""
        check_session_key(session_key)
        return self._watch(session_key, max_entries)

    def _watch(self, session_key: str, max_entries: int | None) -> WebSocketSessionStream:
        watch_id = f"w{next(self._ids)}"
        bound = self._bound if max_entries is None else max(1, max_entries)
        stream = WebSocketSessionStream(self, watch_id, session_key, bound)
        if self._gone is not None:
            stream._end(f"not connected: {self._gone}")
            return stream
        self._streams[watch_id] = stream
        self._opened += 1
        self._post("port.watch", WatchParams(watch_id=watch_id, session_key=session_key))
        return stream

    def watch_all(self, *, max_entries: int | None = None) -> WebSocketSessionStream:
        """Follow every session from now on (each event names its session)."""
        return self._watch(ALL_SESSIONS, max_entries)

    def _forget(self, stream: WebSocketSessionStream) -> None:
        if stream.overflowed and stream.watch_id in self._streams:
            self._overflowed += 1
        if self._streams.pop(stream.watch_id, None) is not None and self._gone is None:
            self._post("port.unwatch", WatchParams(watch_id=stream.watch_id))

    def _unwatch(self, stream: WebSocketSessionStream) -> None:
        self._forget(stream)

    async def snapshot(self, session_key: str) -> SessionSnapshot:
        data = await self._call("port.snapshot", KeyParams(session_key=session_key))
        return msgspec.convert(data, SessionSnapshot)

    async def sessions(self, *, limit: int = 50) -> list[SessionSummary]:
        data = await self._call("port.sessions", LimitParams(limit=limit))
        return msgspec.convert(data, list[SessionSummary])

    async def runs(self, *, limit: int = 50, since_ms: int | None = None) -> list[RunRecord]:
        params = RunsParams(limit=limit, since_ms=since_ms)
        return msgspec.convert(await self._call("port.runs", params), list[RunRecord])

    async def transcript(
        self, session_key: str, *, limit: int = 50, before: int | None = None
    ) -> TranscriptPage:
        params = HistoryParams(session_key=session_key, limit=limit, before=before)
        return msgspec.convert(await self._call("port.transcript", params), TranscriptPage)

    async def compact(self, session_key: str, *, instructions: str | None = None) -> CompactResult:
        params = CompactParams(session_key=session_key, instructions=instructions)
        return msgspec.convert(await self._call("port.compact", params), CompactResult)

    async def settings(self, session_key: str) -> SessionSettings:
        check_session_key(session_key)
        data = await self._call("port.settings", KeyParams(session_key=session_key))
        return msgspec.convert(data, SessionSettings)

    async def patch(
        self,
        session_key: str,
        *,
        model: str | msgspec.UnsetType | None = msgspec.UNSET,
        label: str | msgspec.UnsetType | None = msgspec.UNSET,
        thinking_level: str | msgspec.UnsetType | None = msgspec.UNSET,
        workspace: str | msgspec.UnsetType | None = msgspec.UNSET,
    ) -> SessionSettings:
        check_session_key(session_key)
        params = PatchParams(
            session_key=session_key,
            model=model,
            label=label,
            thinking_level=thinking_level,
            workspace=workspace,
        )
        return msgspec.convert(await self._call("port.patch", params), SessionSettings)

    async def reset(self, session_key: str) -> SessionChange:
        check_session_key(session_key)
        data = await self._call("port.reset", KeyParams(session_key=session_key))
        return msgspec.convert(data, SessionChange)

    async def delete(self, session_key: str) -> SessionChange:
        check_session_key(session_key)
        data = await self._call("port.delete", KeyParams(session_key=session_key))
        return msgspec.convert(data, SessionChange)

    def statistics(self) -> SessionPortStatistics:
        """Counters of this client: its watchers, streams and submissions (the server's port
        counts all clients: :meth:`server_statistics`)."""
        return SessionPortStatistics(
            watchers=len(self._streams),
            streams_opened=self._opened,
            streams_overflowed=self._overflowed,
            snapshots=0,
            snapshot_retries=0,
            active_runs=0,
            conversations=0,
            submitted=self._submitted,
        )

    async def server_statistics(self) -> SessionPortStatistics:
        return msgspec.convert(
            await self._call("port.statistics", NoParams()), SessionPortStatistics
        )


if TYPE_CHECKING:  # the class satisfies the Protocol (checked by mypy)
    _check: type[SessionPort] = WebSocketSessionPort
