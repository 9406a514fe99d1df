"""A real HTTP/1.1 server on 127.0.0.1 for tests of the web tools: fixture pages, redirects,
slow and oversized bodies (asyncio streams, one connection per request); and :func:`make_pdf`,
a minimal valid PDF with text.

``async with FixtureSite() as site:`` listens on an ephemeral port; :meth:`FixtureSite.page`
adds a route answering fixed bytes, :meth:`FixtureSite.route` one answered by a handler
(``async (request, writer) -> None``). ``site.url("/path")`` is the URL; ``site.host_port``
what ``[web] allow_hosts`` needs; ``site.requests`` every request seen (method, path,
headers). Leaving the block closes the server and releases handlers waiting on
``site.closing``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

__all__ = ["FixtureSite", "SeenRequest", "make_pdf", "response_bytes"]


@dataclass(frozen=True, kw_only=True, slots=True)
class SeenRequest:
    """A request the site received."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes = b""


Handler = Callable[[SeenRequest, asyncio.StreamWriter], Awaitable[None]]


def response_bytes(status: int, headers: Mapping[str, str], body: bytes) -> bytes:
    """An HTTP/1.1 response with ``Content-Length`` and ``Connection: close``."""
    lines = [f"HTTP/1.1 {status} X"]
    merged = {"Content-Length": str(len(body)), "Connection": "close", **headers}
    lines += [f"{k}: {v}" for k, v in merged.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@dataclass
class FixtureSite:
    """See the module docstring."""

    host: str = "127.0.0.1"
    port: int = 0
    requests: list[SeenRequest] = field(default_factory=list)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    _routes: dict[str, Handler] = field(default_factory=dict)
    _server: asyncio.Server | None = None

    @property
    def host_port(self) -> str:
        return f"{self.host}:{self.port}"

    def url(self, path: str = "/") -> str:
        return f"http://{self.host_port}{path}"

    def page(
        self, path: str, body: bytes | str, *, content_type: str = "text/html; charset=utf-8",
        status: int = 200, headers: Mapping[str, str] | None = None,
    ) -> None:  # fmt: skip
        data = body.encode() if isinstance(body, str) else body
        extra = {"Content-Type": content_type, **(headers or {})}

        async def answer(request: SeenRequest, writer: asyncio.StreamWriter) -> None:
            writer.write(response_bytes(status, extra, data))

        self._routes[path] = answer

    def redirect(self, path: str, location: str, *, status: int = 302) -> None:
        self.page(path, b"", status=status, headers={"Location": location})

    def route(self, path: str, handler: Handler) -> None:
        self._routes[path] = handler

    async def __aenter__(self) -> FixtureSite:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.closing.set()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        first, *rest = head.decode("latin-1").split("\r\n")
        method, _, target = first.partition(" ")
        path = target.rpartition(" ")[0] or target
        headers = {}
        for line in rest:
            if ":" in line:
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
        length = headers.get("content-length", "0")
        body = b""
        if length.isdigit() and int(length):
            try:
                body = await reader.readexactly(int(length))
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()
                return
        request = SeenRequest(method=method, path=path, headers=headers, body=body)
        self.requests.append(request)
        handler = self._routes.get(path.split("?", 1)[0])
        try:
            if handler is None:
                writer.write(response_bytes(404, {"Content-Type": "text/plain"}, b"not found"))
            else:
                await handler(request, writer)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


def make_pdf(lines: list[str], *, hidden: str | None = None, title: str | None = None) -> bytes:
    """A one-page PDF showing ``lines``; ``hidden`` is drawn in render mode 3 (invisible)."""

    def esc(text: str) -> str:
        return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    ops = ["BT", "/F1 12 Tf", "72 720 Td"]
    for line in lines:
        ops += [f"({esc(line)}) Tj", "0 -16 Td"]
    if hidden is not None:
        ops += ["3 Tr", f"({esc(hidden)}) Tj", "0 Tr"]
    ops.append("ET")
    stream = "\n".join(ops).encode("latin-1")
    info = f"<< /Title ({esc(title)}) >>" if title else "<< >>"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        info.encode("latin-1"),
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info {len(objects)} 0 R >>\n"
        f"startxref\n{xref}\n%%EOF\n"
    ).encode()
    return bytes(out)
