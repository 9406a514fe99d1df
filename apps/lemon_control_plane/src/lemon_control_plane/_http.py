"""uvicorn's h11 protocol with a deadline for each request's headers.

uvicorn closes a keep-alive connection that stays idle between requests (``timeout_keep_alive``)
but has no deadline for the headers themselves: a connection that sends nothing, or a few bytes
of a request line and then nothing, holds its socket for as long as the client likes (a
"slow-header" client; many of them exhaust the daemon's file descriptors). Here each request's
headers must be complete within ``header_timeout_s`` of the connection opening or of the
previous response ending; else the client is answered ``408 Request Timeout`` and the
connection is closed. A request whose headers arrived is never cut by this deadline (a long
response, a WebSocket after its upgrade).

The plane always names this protocol (``http=``), so the deadline holds whether or not
``httptools`` is installed (uvicorn's ``auto`` would pick that instead).
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["header_deadline_protocol"]

_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\n"
    b"content-length: 29\r\n"
    b"\r\n"
    b"the request headers were late"
)


class _HeaderDeadline(H11Protocol):
    header_timeout_s: float = 10.0
    _header_deadline: asyncio.TimerHandle | None = None

    def connection_made(  # type: ignore[override]  # uvicorn narrows it to Transport too
        self, transport: asyncio.Transport
    ) -> None:
        super().connection_made(transport)
        self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_header_deadline()  # for the next request on this connection

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._disarm_header_deadline()  # the socket belongs to the WebSocket protocol now
        super().handle_websocket_upgrade(event)

    def _arm_header_deadline(self) -> None:
        self._disarm_header_deadline()
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _disarm_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        # IDLE: the request's headers are not complete (a request in progress is not cut).
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        self.transport.write(_TIMEOUT_RESPONSE)
        self.transport.close()


def header_deadline_protocol(header_timeout_s: float) -> type[H11Protocol]:
    """The h11 protocol class for uvicorn's ``http=`` with this header deadline."""
    return type(
        "HeaderDeadlineH11Protocol", (_HeaderDeadline,), {"header_timeout_s": header_timeout_s}
    )
