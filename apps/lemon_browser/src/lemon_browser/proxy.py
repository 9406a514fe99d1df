"""The browser's pinning proxy: Chromium connects only through it, to the address the guard
checked.

Chromium resolves names itself, so a check made before a navigation (the route handler in
:mod:`lemon_browser.browser`) could be answered with a public address and Chromium's own
lookup a moment later with a private one (DNS rebinding). :class:`PinningProxy` closes that
gap: Chromium is launched with it as its HTTP proxy (Playwright also makes Chromium proxy
loopback names, which it would otherwise reach directly), so Chromium never connects to a
web server itself. For every request the proxy asks :meth:`AddressGuard.check` and connects
to the :class:`~lemon_browser.guard.Target` address that check returned; there is no second
resolution.

* ``CONNECT host:port`` (HTTPS, WebSockets): checked, then a byte tunnel to the checked
  address. TLS stays end to end (Chromium verifies the certificate against the name).
* ``GET http://host/...`` (plain HTTP): checked, then the request is sent to the checked
  address in origin form with ``Connection: close``; the response is relayed and the client
  connection closed. Only the declared ``Content-Length`` of the body is forwarded, so a
  second request on the same connection can never reach the first server unchecked; a
  chunked request body is refused (411).
* A refused target gets ``403`` with an ``X-Lemon-Refused`` header (plain HTTP) or a failed
  tunnel (``CONNECT``); each refusal is kept (bounded, newest last) in :attr:`refusals`.
* The proxy listens on 127.0.0.1 only and asks for a random per-process credential
  (``Proxy-Authorization: Basic``; Playwright answers the challenge), so other local
  processes cannot use it.

Bounds: at most ``max_connections`` client connections at once (more are answered ``503``);
a request head of at most 64 KiB read within ``timeout_s``; a connect within ``timeout_s``; a
relay ends after ``idle_s`` without bytes either way.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
from collections import deque
from dataclasses import dataclass
from typing import Final

from lemon_browser.errors import WebError
from lemon_browser.guard import AddressGuard

__all__ = ["PinningProxy", "ProxyRefusal"]

_MAX_HEAD: Final = 64 * 1024
_CHUNK: Final = 64 * 1024
_HOP_HEADERS: Final = frozenset(
    {"proxy-authorization", "proxy-connection", "connection", "keep-alive"}
)


@dataclass(frozen=True, kw_only=True, slots=True)
class ProxyRefusal:
    """A request the proxy refused: where it was going and why."""

    target: str
    reason: str


class _Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class PinningProxy:
    """See the module docstring. ``async with PinningProxy(guard=...) as proxy:`` listens on
    an ephemeral port of 127.0.0.1 (:attr:`server`, :attr:`username`, :attr:`password` are
    what Chromium is given); leaving it closes every connection."""

    def __init__(
        self,
        *,
        guard: AddressGuard,
        timeout_s: float = 20.0,
        idle_s: float = 300.0,
        max_connections: int = 256,
        max_refusals: int = 64,
    ) -> None:
        self.guard = guard
        self.username = "lemon"
        self.password = secrets.token_urlsafe(24)
        self._expected = "Basic " + base64.b64encode(
            f"{self.username}:{self.password}".encode()
        ).decode("ascii")
        self._timeout_s = timeout_s
        self._idle_s = idle_s
        self._max_connections = max_connections
        self.refusals: deque[ProxyRefusal] = deque(maxlen=max_refusals)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[object]] = set()  # the server's connection tasks
        self._closing = False
        self._counts = {"connections": 0, "refused": 0, "tunnels": 0, "requests": 0, "busy": 0}

    @property
    def server(self) -> str:
        """The proxy's address for Chromium (``http://127.0.0.1:<port>``)."""
        if self._server is None:
            raise RuntimeError("the proxy is not started")
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def statistics(self) -> dict[str, int]:
        """Connections handled, open now, tunnels, plain requests, refused, turned away."""
        return {**self._counts, "open": len(self._writers)}

    async def __aenter__(self) -> PinningProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._closing = True
        server.close()
        for writer in list(self._writers):
            writer.close()
        handlers = list(self._handlers)
        for task in handlers:  # a lookup or a relay still running: ended, awaited here
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()

    # -- one client connection -----------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._counts["connections"] += 1
        if len(self._writers) >= self._max_connections:
            self._counts["busy"] += 1
            await _answer(writer, 503, "the browser proxy is busy")
            return
        self._writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            await self._handle(reader, writer)
        except _Refused as refused:
            await _answer(writer, refused.status, refused.reason)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # the client went away or stalled: nothing to answer
        except asyncio.CancelledError:
            if not self._closing:
                raise
            # aclose ended this connection: the server's callback must not see a cancellation
        finally:
            if task is not None:
                self._handlers.discard(task)
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self._timeout_s)
        if len(head) > _MAX_HEAD:
            raise _Refused(431, "the request head is too large")
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ")
        except ValueError:
            raise _Refused(400, "a malformed request line") from None
        headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers.append((name.strip(), value.strip()))
        by_name = {name.lower(): value for name, value in headers}
        if not secrets.compare_digest(by_name.get("proxy-authorization", ""), self._expected):
            await _answer(writer, 407, "proxy credentials needed",
                          extra={"Proxy-Authenticate": 'Basic realm="lemon-browser"'})  # fmt: skip
            return
        if method.upper() == "CONNECT":
            await self._tunnel(target, reader, writer)
        else:
            await self._forward(method, target, version, headers, by_name, reader, writer)

    async def _connect(self, url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            checked = await self.guard.check(url)
        except WebError as exc:
            self._counts["refused"] += 1
            self.refusals.append(ProxyRefusal(target=url, reason=str(exc)))
            raise _Refused(403, str(exc)) from None
        try:
            # The checked address, never the name again: the pin.
            return await asyncio.wait_for(
                asyncio.open_connection(checked.address, checked.port), self._timeout_s
            )
        except (OSError, TimeoutError) as exc:
            raise _Refused(502, f"could not connect to {checked.host}: {exc}") from None

    async def _tunnel(
        self, target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        host, sep, port = target.rpartition(":")
        if not sep or not port.isdigit():
            raise _Refused(400, f"CONNECT needs host:port, not {target!r}")
        upstream_reader, upstream_writer = await self._connect(f"https://{host}:{port}/")
        self._counts["tunnels"] += 1
        try:
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await writer.drain()
            await self._relay(reader, writer, upstream_reader, upstream_writer, None)
        finally:
            upstream_writer.close()

    async def _forward(
        self,
        method: str,
        target: str,
        version: str,
        headers: list[tuple[str, str]],
        by_name: dict[str, str],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        if not target.lower().startswith("http://"):
            raise _Refused(400, "a proxy request needs an absolute http:// URL")
        if "chunked" in by_name.get("transfer-encoding", "").lower():
            raise _Refused(411, "a chunked request body is not relayed; send Content-Length")
        length = by_name.get("content-length", "0").strip() or "0"
        if not length.isdigit():
            raise _Refused(400, "a malformed Content-Length")
        rest = target[len("http://") :]
        path = "/" + rest.partition("/")[2] if "/" in rest else "/"
        upstream_reader, upstream_writer = await self._connect(target)
        self._counts["requests"] += 1
        try:
            kept = [f"{n}: {v}" for n, v in headers if n.lower() not in _HOP_HEADERS]
            head = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close"])
            upstream_writer.write((head + "\r\n\r\n").encode("latin-1"))
            await upstream_writer.drain()
            await self._relay(reader, writer, upstream_reader, upstream_writer, int(length))
        finally:
            upstream_writer.close()

    async def _relay(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        upstream_reader: asyncio.StreamReader,
        upstream_writer: asyncio.StreamWriter,
        body: int | None,
    ) -> None:
        """Bytes both ways until the server side ends (``body``: forward only that many bytes
        of the client's, then stop reading it; ``None``: a tunnel, everything)."""

        async def pump(
            source: asyncio.StreamReader, sink: asyncio.StreamWriter, limit: int | None
        ) -> None:
            left = limit
            while left is None or left > 0:
                size = _CHUNK if left is None else min(_CHUNK, left)
                data = await asyncio.wait_for(source.read(size), self._idle_s)
                if not data:
                    break
                if left is not None:
                    left -= len(data)
                sink.write(data)
                await sink.drain()
            if limit is None and sink.can_write_eof():
                with contextlib.suppress(OSError):
                    sink.write_eof()

        up = asyncio.ensure_future(pump(reader, upstream_writer, body))
        try:
            await pump(upstream_reader, writer, None)  # the server's answer: until it ends
        except (OSError, TimeoutError):
            pass
        finally:
            up.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError, TimeoutError):
                await up


async def _answer(
    writer: asyncio.StreamWriter, status: int, reason: str, *, extra: dict[str, str] | None = None
) -> None:
    body = (reason + "\n").encode("utf-8", "replace")
    phrase = {400: "Bad Request", 403: "Forbidden", 407: "Proxy Authentication Required",
              411: "Length Required", 431: "Request Header Fields Too Large",
              502: "Bad Gateway", 503: "Service Unavailable"}.get(status, "Error")  # fmt: skip
    lines = [f"HTTP/1.1 {status} {phrase}", "Content-Type: text/plain; charset=utf-8",
             f"Content-Length: {len(body)}", "Connection: close"]  # fmt: skip
    if status == 403:
        shown = " ".join(reason.split()).encode("ascii", "replace").decode("ascii")
        lines.append("X-Lemon-Refused: " + shown[:300])
    lines += [f"{k}: {v}" for k, v in (extra or {}).items()]
    with contextlib.suppress(OSError):
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + body)
        await writer.drain()
