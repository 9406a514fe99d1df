"""The scripted provider server: real HTTP on 127.0.0.1, both wire formats, scripted answers.

A raw ASGI app served by uvicorn in a background thread with its own event loop, so it works the
same from async tests, sync tests and benchmark scripts. The socket is bound and listening before
:meth:`ScriptedProviderServer.start` returns, so there is no readiness race: the kernel queues
early connections until the server accepts them.

Endpoints: ``POST /v1/chat/completions`` (OpenAI format) and ``POST /v1/messages`` (Anthropic
format). Each request takes the next item of one shared FIFO script; an empty script answers 400
with a message saying so (a request the test did not expect is a test failure, not a hang).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from types import TracebackType
from typing import Any

import uvicorn

from lemon_platform_test.errors import PlatformTestError
from lemon_platform_test.providers._script import (
    RecordedRequest,
    RecordedStream,
    ScriptedError,
    ScriptedTurn,
    ScriptItem,
)
from lemon_platform_test.providers._wire import (
    Wire,
    anthropic_frames,
    error_body,
    error_frame,
    openai_frames,
)

__all__ = ["ScriptedProviderServer"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_ROUTES: dict[str, Wire] = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}


class _CutConnection(PlatformTestError):
    """Raised inside the app to drop the connection mid-response (uvicorn closes it)."""


class ScriptedProviderServer:
    """A fake model provider for tests and benchmarks (see the module docstring).

    Use as a context manager (``with ScriptedProviderServer() as server:``) or call
    :meth:`start` and :meth:`stop`. Queue answers with :meth:`script`; read what the server got
    with :attr:`requests`. The script and the records are bounded by what the test queues; a
    recording buffer keeps at most ``max_recorded`` requests (oldest dropped first).
    """

    def __init__(self, *, host: str = "127.0.0.1", max_recorded: int = 1000) -> None:
        self._host = host
        self._lock = threading.Lock()
        self._script: deque[ScriptItem] = deque()
        self._requests: deque[RecordedRequest] = deque(maxlen=max_recorded)
        self._served = 0
        self._cancelled = 0
        self._cancel_cond = threading.Condition(self._lock)
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._gates: list[Any] = []

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> ScriptedProviderServer:
        """Bind, listen and serve in a background thread; returns at once, ready for requests."""
        if self._thread is not None:
            raise RuntimeError("ScriptedProviderServer is already started")
        # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets whose
        # proto says TCP, and without it Nagle + delayed ACK stall each stream by ~40 ms.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, 0))
        sock.listen(128)
        sock.setblocking(False)
        config = uvicorn.Config(
            self._app,
            loop="asyncio",
            http="h11",
            ws="none",
            lifespan="off",
            interface="asgi3",
            log_level="critical",
            access_log=False,
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._socket = sock
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            name="scripted-provider-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Open every gate, stop serving and join the thread (idempotent)."""
        if self._thread is None or self._server is None:
            return
        for item in self._gates:
            item.open()
        self._server.should_exit = True
        self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._thread = None
        self._server = None

    def __enter__(self) -> ScriptedProviderServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (the Anthropic ``base_url``)."""
        if self._socket is None:
            raise RuntimeError("ScriptedProviderServer is not started")
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        """The OpenAI-compatible ``base_url`` (``<url>/v1``)."""
        return f"{self.url}/v1"

    # -- scripting and records ------------------------------------------------------------------

    def script(self, *items: ScriptItem) -> None:
        """Append answers to the script (served in order, one per request)."""
        with self._lock:
            for item in items:
                if isinstance(item, ScriptedTurn) and item.pause is not None:
                    self._gates.append(item.pause)
                self._script.append(item)

    def reset(self) -> None:
        """Forget the script, the records and the counters; open any pending gates."""
        with self._lock:
            gates, self._gates = self._gates, []
            self._script.clear()
            self._requests.clear()
            self._served = 0
            self._cancelled = 0
        for gate in gates:
            gate.open()

    @property
    def requests(self) -> list[RecordedRequest]:
        """The requests received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def pending(self) -> int:
        """Script items not served yet."""
        with self._lock:
            return len(self._script)

    @property
    def cancelled_streams(self) -> int:
        """Streams the client closed before their end."""
        with self._lock:
            return self._cancelled

    def statistics(self) -> dict[str, int]:
        """Counters: requests served, script items pending, records kept, streams cancelled."""
        with self._lock:
            return {
                "served": self._served,
                "pending": len(self._script),
                "recorded": len(self._requests),
                "record_capacity": self._requests.maxlen or 0,
                "cancelled_streams": self._cancelled,
            }

    def wait_cancelled(self, count: int = 1, timeout: float = 10.0) -> bool:
        """Block until at least ``count`` streams were closed early by the client."""
        with self._cancel_cond:
            return self._cancel_cond.wait_for(lambda: self._cancelled >= count, timeout)

    # -- the ASGI app ---------------------------------------------------------------------------

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        raw = b"".join(chunks)
        try:
            body: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        path = scope["path"]
        with self._lock:
            self._requests.append(
                RecordedRequest(method=scope["method"], path=path, headers=headers, body=body)
            )
            item = self._script.popleft() if self._script else None
            self._served += 1
            number = self._served
        wire = _ROUTES.get(path)
        if wire is None:
            await self._json(send, 404, {"error": {"message": f"no route {path}"}})
            return
        if item is None:
            error = ScriptedError.bad_request(
                "scripted provider server: no scripted answer left for this request"
            )
            await self._json(send, error.status, error_body(error, wire))
            return
        if isinstance(item, ScriptedError):
            extra = dict(item.headers)
            if item.retry_after is not None:
                extra["retry-after"] = f"{item.retry_after:g}"
            await self._json(send, item.status, error_body(item, wire), extra)
            return
        if isinstance(item, RecordedStream):
            await self._replay(send, item)
            return
        model = body.get("model", "scripted") if isinstance(body, dict) else "scripted"
        render = openai_frames if wire == "openai" else anthropic_frames
        frames = render(item, str(model), number)
        if item.error is not None:
            frames = [*frames[: item.error_after], error_frame(item.error, wire)]
        await self._stream(send, receive, item, frames)

    async def _json(
        self, send: Send, status: int, payload: Any, extra: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]
        headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    async def _stream(
        self, send: Send, receive: Receive, turn: ScriptedTurn, frames: list[bytes]
    ) -> None:
        async def disconnected() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        watcher = asyncio.create_task(disconnected())
        try:
            await send({
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"),
                            (b"cache-control", b"no-cache")],
            })  # fmt: skip
            for sent, frame in enumerate(frames):
                if turn.disconnect_after is not None and sent >= turn.disconnect_after:
                    raise _CutConnection
                if turn.pause is not None and sent == turn.pause_after:
                    pause = asyncio.ensure_future(turn.pause._pause())
                    await asyncio.wait({pause, watcher}, return_when=asyncio.FIRST_COMPLETED)
                    pause.cancel()
                elif turn.delay:
                    await asyncio.wait({watcher}, timeout=turn.delay)
                if watcher.done():
                    self._note_cancelled()
                    return
                await send({"type": "http.response.body", "body": frame, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        except OSError:  # the client went away while we wrote
            self._note_cancelled()
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def _replay(self, send: Send, recorded: RecordedStream) -> None:
        """Send a recorded response byte for byte (in ``recorded.chunk_size`` writes)."""
        await send({
            "type": "http.response.start",
            "status": recorded.status,
            "headers": [(b"content-type", recorded.content_type.encode()),
                        (b"cache-control", b"no-cache")],
        })  # fmt: skip
        try:
            for chunk in recorded.chunks():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        except OSError:  # the client went away while we wrote
            self._note_cancelled()

    def _note_cancelled(self) -> None:
        with self._cancel_cond:
            self._cancelled += 1
            self._cancel_cond.notify_all()
