"""A TCP proxy a test controls: the way to lose a shared server without touching it.

``TcpProxy(host, port)`` listens on 127.0.0.1 (an ephemeral port: ``proxy.port``) and relays
every connection to the target. ``cut()`` closes every relayed connection at once (both ends
see the connection drop, as when a server restarts or the network partitions) and refuses new
ones until ``restore()``. The PostgreSQL and Redis servers of the machine are shared by several
people: tests point a client at a proxy and cut the proxy, never the server.

Threads, not an event loop, so it serves sync and async tests and subprocess daemons alike.
Bounded: at most ``max_connections`` relayed at once (beyond, a new connection is closed).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from typing import Self

__all__ = ["TcpProxy"]


class TcpProxy:
    """Relays 127.0.0.1:<port> to ``(host, target_port)``; ``cut()`` / ``restore()``."""

    def __init__(self, host: str, port: int, *, max_connections: int = 256) -> None:
        self._target = (host, port)
        self._max = max_connections
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._cut = False
        self._closed = False
        self.accepted = 0
        self.refused = 0
        self._acceptor = threading.Thread(target=self._accept, name="tcp-proxy", daemon=True)
        self._acceptor.start()

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def cut(self) -> None:
        """Drop every relayed connection now and refuse new ones until :meth:`restore`."""
        with self._lock:
            self._cut = True
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            _close(sock)

    def restore(self) -> None:
        """Relay new connections again."""
        with self._lock:
            self._cut = False

    def connections(self) -> int:
        """Relayed connections open now (two sockets each)."""
        with self._lock:
            return len(self._sockets) // 2

    def close(self) -> None:
        self._closed = True
        self.cut()
        _close(self._listener)
        self._acceptor.join(5)
        for thread in self._threads:
            thread.join(5)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                refuse = self._cut or len(self._sockets) // 2 >= self._max
            if refuse:
                self.refused += 1
                _close(client)
                continue
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                self.refused += 1
                _close(client)
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._cut:
                    _close(client)
                    _close(upstream)
                    continue
                self._sockets.update((client, upstream))
            self.accepted += 1
            self._threads = [t for t in self._threads if t.is_alive()]
            for src, dst in ((client, upstream), (upstream, client)):
                thread = threading.Thread(
                    target=self._pump, args=(src, dst), name="tcp-proxy-pump", daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._sockets.discard(src)
                self._sockets.discard(dst)
            _close(src)
            _close(dst)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
