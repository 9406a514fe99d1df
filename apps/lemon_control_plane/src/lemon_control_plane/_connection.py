"""One operator connection's outgoing side: a bounded, ordered queue, written inline.

Writing: a frame is handed to the socket by whoever queues it (the bridge's broadcast, a
request's reply), right away, while the socket takes it without waiting: the server's send
completes synchronously unless the socket's buffer is full. Only a send that must wait is
continued by a task of its own (one at a time per connection); frames queued meanwhile wait
behind it and are flushed by that task. So a broadcast to N connections writes N frames in one
step of the loop, as a bare loop would, and one slow socket never holds up the others.

Guarantees:

- Frames leave in the order they were queued; one send at a time per connection, so a ``res``
  and the events around it never race.
- At most ``max_entries`` events wait per connection, each at most ``max_event_bytes`` (an
  event above that is dropped and counted). Responses are never dropped: their number is
  bounded by the connection's requests in flight.
- While a ``chat.send`` is being answered (:meth:`Connection.holding`), events are parked and
  released right after its ``res``: a run's events can never overtake the reply that names it.
- A connection that falls behind gets its waiting events dropped and one ``stream.resync``
  event in their place (recover with ``sessions.snapshot``); falling behind again before it
  caught up closes it (code 4008).
- A client may lower its per-event bound (:meth:`Connection.limit_event_bytes`, a browser pane
  asks for 65,536 bytes); then an event above it is not silently dropped: one ``stream.resync``
  marker takes its place (at most one waits at a time), so the client recovers from a snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, Final

from lemon_control_plane._frames import encode, encode_event

__all__ = ["Connection", "ConnectionStatistics"]

#: The close code of a connection that stayed behind after a resync.
CLOSE_TOO_SLOW: Final = 4008
_RESYNC_NAME: Final = encode("stream.resync")
_OVERSIZED_PAYLOAD: Final = encode(
    {
        "reason": "an event larger than this connection's maxEventBytes was dropped",
        "scope": "connection",
        "sessionKey": None,
    }
)
_RESYNC_PAYLOAD: Final = encode(
    {
        "reason": "this connection fell behind; the events waiting for it were dropped",
        "scope": "connection",
        "sessionKey": None,
    }
)


#: The last event frame's parts: (name, payload, state, text before the seq, text after it).
#: Loop-only, like the producers that queue events.
_frame_parts: tuple[bytes | None, bytes | None, bytes | None, str, str] = (None, None, None, "", "")


def _frame_parts_of(
    name: bytes, payload: bytes, state: bytes | None
) -> tuple[bytes | None, bytes | None, bytes | None, str, str]:
    """What :func:`encode_event` writes around the seq, kept for the next connection."""
    global _frame_parts
    head, _, tail = encode_event(name, 0, payload, state).partition(',"seq":0,')
    _frame_parts = (name, payload, state, head + ',"seq":', "," + tail)
    return _frame_parts


@dataclass(frozen=True, kw_only=True, slots=True)
class ConnectionStatistics:
    conn_id: str
    queued: int
    sent: int
    dropped: int
    oversized: int
    resyncs: int
    lagging: bool


class Connection:
    """See the module docstring. ``send`` writes one text frame; ``close`` closes the socket."""

    def __init__(
        self,
        conn_id: str,
        *,
        send: Callable[[str], Coroutine[Any, Any, None]],
        close: Callable[[int, str], Coroutine[Any, Any, None]],
        max_entries: int = 256,
        max_event_bytes: int = 1024 * 1024,
        state_version: Callable[[], bytes] | None = None,
    ) -> None:
        self.conn_id = conn_id
        #: The ``stateVersion`` map each event frame carries (its counters when it is sent).
        self._state_version = state_version
        self.online = False
        self.token_hash: str | None = None
        self.token_id: str | None = None
        #: The sign-in id of the upgrade request's cookie (a browser page's), if it had one.
        self.cookie_session: str | None = None
        #: The peer's address (what failed authentications are counted by).
        self.client_address: str | None = None
        self.scopes: frozenset[str] = frozenset()
        #: ``None``: every event (the default); else only events of these sessions (and
        #: events of no session).
        self.sessions: frozenset[str] | None = None
        #: The opt-in topics it asked for (``events.subscribe {topics}``): the wire events of
        #: ``bridge.TOPIC_EVENTS`` reach only the connections that name their topic.
        self.topics: frozenset[str] = frozenset()
        self._send = send
        self._close = close
        self._max_entries = max_entries
        self._max_event_bytes = max_event_bytes
        self._frames: deque[tuple[bytes, bytes] | str] = deque()
        self._held: list[tuple[bytes, bytes]] = []
        self._events = 0  # events in _frames and _held
        self._hold = 0
        self._flushed = asyncio.Event()  # closing asked and every frame handed over
        self._pending: asyncio.Task[None] | None = None  # a send that had to wait
        self._closing: tuple[int, str] | None = None
        self._seq = 0
        self._sent = 0
        self._dropped = 0
        self._oversized = 0
        self._resyncs = 0
        self._lagging = False
        self._resync_oversized = False

    @property
    def max_event_bytes(self) -> int:
        return self._max_event_bytes

    def limit_event_bytes(self, limit: int) -> None:
        """Lower the per-event bound to ``limit`` (never raise it); an event above it then
        queues one ``stream.resync`` marker instead (see the module docstring)."""
        if limit < self._max_event_bytes:
            self._max_event_bytes = limit
            self._resync_oversized = True

    # -- loop-only producers ----------------------------------------------------------------

    def push_event(self, name_json: bytes, payload_json: bytes) -> None:
        """Queue an event (pre-encoded); never blocks; see the module docstring for bounds."""
        if not self.online or self._closing is not None:
            return
        if len(payload_json) > self._max_event_bytes:
            self._oversized += 1
            if self._resync_oversized and not self._marker_waiting():
                self._enqueue(_RESYNC_NAME, _OVERSIZED_PAYLOAD)
            return
        if self._events >= self._max_entries:
            self._fell_behind()
            return
        self._enqueue(name_json, payload_json)

    def _enqueue(self, name_json: bytes, payload_json: bytes) -> None:
        self._events += 1
        if self._hold:
            self._held.append((name_json, payload_json))
        else:
            self._frames.append((name_json, payload_json))
            self._flush()

    def _marker_waiting(self) -> bool:
        return any(
            not isinstance(f, str) and f[0] == _RESYNC_NAME for f in (*self._frames, *self._held)
        )

    def wants(self, session_key: str | None) -> bool:
        """Whether this connection's subscription covers an event of ``session_key``."""
        return self.sessions is None or session_key is None or session_key in self.sessions

    def push_text(self, text: str) -> None:
        """Queue a response or hello frame (never dropped)."""
        if self._closing is not None:
            return
        self._frames.append(text)
        self._flush()

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Park events while the body runs (it queues the ``res`` that must go first)."""
        self._hold += 1
        try:
            yield
        finally:
            self._hold -= 1
            if not self._hold and self._held:
                self._frames.extend(self._held)
                self._held.clear()
                self._flush()

    def close_soon(self, code: int, reason: str) -> None:
        """Ask the writer to send what is queued, then close the socket."""
        if self._closing is None:
            self._closing = (code, reason)
            self._flush()

    def _fell_behind(self) -> None:
        if self._lagging:
            self._dropped += self._events
            self._frames = deque(f for f in self._frames if isinstance(f, str))
            self._held.clear()
            self._events = 0
            self.close_soon(CLOSE_TOO_SLOW, "too slow: fell behind again after a resync")
            return
        self._lagging = True
        self._resyncs += 1
        self._dropped += self._events
        self._frames = deque(f for f in self._frames if isinstance(f, str))
        self._held.clear()
        self._events = 1
        self._frames.append((_RESYNC_NAME, _RESYNC_PAYLOAD))
        self._flush()

    # -- writing ----------------------------------------------------------------------------

    def _next_text(self) -> str:
        item = self._frames.popleft()
        if isinstance(item, str):
            return item
        self._events -= 1
        self._seq += 1
        state = None if self._state_version is None else self._state_version()
        name, payload = item
        # A broadcast hands every connection the same encoded name and payload: the frame
        # around this connection's seq is decoded once per event, not once per connection.
        cached = _frame_parts
        if cached[0] is not name or cached[1] is not payload or cached[2] is not state:
            cached = _frame_parts_of(name, payload, state)
        return cached[3] + str(self._seq) + cached[4]

    def _flush(self) -> None:
        """Hand queued frames to the socket until one send has to wait (then a task continues
        it and flushes the rest) or none is left."""
        if self._pending is not None:
            return
        while self._frames:
            send = self._send(self._next_text())
            try:
                waiting = send.send(None)
            except StopIteration:
                self._sent += 1
                continue
            except (Exception, asyncio.CancelledError):  # refused: the connection is ending
                continue
            self._pending = asyncio.get_running_loop().create_task(self._finish(send, waiting))
            return
        self._lagging = False
        if self._closing is not None:
            self._flushed.set()

    async def _finish(self, send: Coroutine[Any, Any, None], waiting: Any) -> None:
        """Drive ``send`` (suspended on ``waiting``) to its end, as a task would, then flush."""
        while True:
            try:
                if waiting is None:
                    await asyncio.sleep(0)
                else:
                    await waiting
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():  # this connection is going away
                    send.close()
                    raise
            except Exception:
                pass  # ``send`` reads the outcome of what it waited for itself
            try:
                waiting = send.send(None)
            except StopIteration:
                self._sent += 1
                break
            except (Exception, asyncio.CancelledError):
                break
        self._pending = None
        self._flush()

    async def run_writer(self) -> None:
        """Wait until the connection is asked to close and its frames are handed over, then
        close the socket with the asked code (cancelling it drops what still waits)."""
        try:
            await self._flushed.wait()
            if self._pending is not None:
                await self._pending
            assert self._closing is not None
            code, reason = self._closing
            await self._close(code, reason)
        finally:
            if self._pending is not None:
                self._pending.cancel()

    @property
    def closing_code(self) -> int | None:
        """The close code asked for (``None`` while the connection is open)."""
        return None if self._closing is None else self._closing[0]

    def statistics(self) -> ConnectionStatistics:
        return ConnectionStatistics(
            conn_id=self.conn_id,
            queued=self._events,
            sent=self._sent,
            dropped=self._dropped,
            oversized=self._oversized,
            resyncs=self._resyncs,
            lagging=self._lagging,
        )
