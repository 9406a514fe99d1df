"""uvicorn's h11 protocol with a deadline for each request's headers.

uvicorn closes a keep-alive connection that stays idle between requests (``timeout_keep_alive``)
but has no deadline for the headers themselves: a connection that sends nothing, or a few bytes
of a request line and then nothing, holds its socket for as long as the client likes (a
"slow-header" client; many of them exhaust the daemon's file descriptors). Here each request's
headers must be complete within ``header_timeout_s`` of the connection opening or of the
previous response ending; else the client is answered ``408 Request Timeout`` and the
connection is closed. A request whose headers arrived is never cut by this deadline (a long
response, a WebSocket after its upgrade).

While a connection waits for its headers it is counted by the plane's
:class:`~lemon_control_plane._admission.Admission`; over its caps (in total, per client address)
a new connection is answered ``503`` and closed at once.

The plane always names this protocol (``http=``), so the deadline holds whether or not
``httptools`` is installed (uvicorn's ``auto`` would pick that instead).
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from lemon_control_plane._admission import Admission

__all__ = ["header_deadline_protocol"]


def _plain(status: bytes, text: bytes) -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\n"
        b"content-type: text/plain; charset=utf-8\r\n"
        b"connection: close\r\n"
        b"content-length: " + str(len(text)).encode() + b"\r\n"
        b"\r\n" + text
    )


_TIMEOUT_RESPONSE = _plain(b"408 Request Timeout", b"the request headers were late")
_BUSY_RESPONSE = _plain(
    b"503 Service Unavailable", b"too many connections are waiting to send their request; retry"
)


class _HeaderDeadline(H11Protocol):
    header_timeout_s: float = 10.0
    admission: Admission
    _header_deadline: asyncio.TimerHandle | None = None
    _waiting = False
    _upgraded = False
    _had_request = False

    def connection_made(  # type: ignore[override]  # uvicorn narrows it to Transport too
        self, transport: asyncio.Transport
    ) -> None:
        super().connection_made(transport)
        self._start_waiting()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        self._sync_waiting()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._sync_waiting()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._upgraded = True  # the socket belongs to the WebSocket protocol now
        self._stop_waiting()
        super().handle_websocket_upgrade(event)

    def _sync_waiting(self) -> None:
        """Waiting (counted, under the deadline) exactly while the connection is open, not
        upgraded and has no complete request headers (h11's ``IDLE``: before the first request,
        and between requests on a keep-alive connection). Partial headers change nothing: the
        deadline runs from when the wait began."""
        if self._upgraded or self.transport.is_closing():
            self._stop_waiting()
        elif self.conn.their_state is h11.IDLE:
            self._start_waiting()
        else:
            self._had_request = True
            self._stop_waiting()

    def _address(self) -> str:
        return self.client[0] if self.client is not None else ""

    def _start_waiting(self) -> None:
        if self._waiting:
            return
        if not self.admission.start_waiting(self._address()):
            if not self._had_request:  # a keep-alive connection is just closed
                self.transport.write(_BUSY_RESPONSE)
            self.transport.close()
            return
        self._waiting = True
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _stop_waiting(self) -> None:
        if not self._waiting:
            return
        self._waiting = False
        self.admission.stop_waiting(self._address())
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


def header_deadline_protocol(header_timeout_s: float, admission: Admission) -> type[H11Protocol]:
    """The h11 protocol class for uvicorn's ``http=``: this header deadline, and the waiting
    connections counted (and capped) by ``admission``."""
    return type(
        "HeaderDeadlineH11Protocol",
        (_HeaderDeadline,),
        {"header_timeout_s": header_timeout_s, "admission": admission},
    )
