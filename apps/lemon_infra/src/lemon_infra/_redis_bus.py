"""The Redis bus backend: publications fan out across processes (``[bus] backend = "redis"``).

Design.

* **Local first.** A publication is offered to this process's own subscribers at once, in the
  publisher's thread, exactly as the local backend does (``deliver_local=True``, the default),
  and is also queued for Redis. Each other process receives it from Redis and offers it to its
  own subscribers through the same bounded, tagged per-subscriber delivery
  (:class:`~lemon_core.bus.Delivery`): a slow consumer in one process never slows the publisher
  or another process. A process skips its own publications when they come back.
* **Publishers never block.** ``publish`` encodes the item (the wire format of
  :mod:`lemon_infra._loopback_bus`: private fields never leave the process) and appends
  it to a bounded outbox; one writer thread sends the outbox to Redis in pipelined batches. A
  full outbox, or Redis being down (``running()`` false: either connection lost), drops the
  publication for the other processes (counted in ``statistics()``); local subscribers have it
  already.
* **One subscription per process.** A reader thread holds one pattern subscription to
  ``<prefix>:bus:*`` made before the backend reports running, so a subscription taken in this
  process is effective at once (no per-topic SUBSCRIBE to wait for); the bus's fan-out drops
  topics nobody here subscribed to. The cost: every process receives all publications of its
  prefix. The prefix is the store schema: one deployment per prefix.
* **Gaps are detected, then repaired from authority.** Each publication carries its process's
  origin id and a sequence number. A receiver that sees a number skipped (the sender's outbox
  dropped it, or Redis cut a slow subscriber), that hears a sender announce, first thing after
  its reconnection, that it dropped publications, or that itself reconnects after an outage,
  asks the bus to resync: every subscription of the bus is fenced with one ``Overflow`` marker
  (reason ``resync``) and its consumer recovers as after an overflow (replace the handle,
  re-read the store). The backend reports outages and recoveries to the bus
  (:meth:`watch`), which publishes ``bus_backend_changed`` to its own subscribers of
  ``system`` (``running()`` is false while either connection is down).

What it does not do: carry publications made while Redis is down to other processes later
(they are gone; the store is the authority), or order publications of different processes.
:meth:`flush` is a barrier (tests, benchmarks): it returns once every publication made before
it has come back through Redis to this process.

This module imports redis-py: it is imported only when a Redis bus is configured.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import threading
import uuid
from collections.abc import Callable
from typing import Any, Final

import msgspec
import redis

from lemon_core.backoff import Backoff
from lemon_core.config import redact_url
from lemon_core.errors import BusBackendUnavailableError, LifecycleError, UsageError
from lemon_infra._loopback_bus import decode_frame, encode_frame

__all__ = ["RedisBackend", "StatusCallback"]

_log = logging.getLogger(__name__)

#: ``callback(running, resync, reason)``: the backend went down (``running=False``), came back
#: (``running=True, resync=True``) or lost publications while up (``running=True, resync=True``).
StatusCallback = Callable[[bool, bool, str], None]

_DATA: Final = 0
_FLUSH: Final = 1
_GAP: Final = 2
_MAX_ORIGINS: Final = 4096
_BATCH: Final = 512
_REDIS_ERRORS: Final = (redis.ConnectionError, redis.TimeoutError, OSError)


class _Envelope(msgspec.Struct, array_like=True, frozen=True):
    """One message on the wire: origin, sequence number, kind, and the frame."""

    origin: str
    seq: int
    kind: int
    frame: msgspec.Raw


_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(_Envelope)


class RedisBackend:
    """Fan-out of a bus's publications through Redis pub/sub (see the module docstring).

    ``connect(timeout)`` establishes both connections (blocking; run it off the event loop)
    and raises :class:`~lemon_core.errors.BusBackendUnavailableError` when Redis cannot be
    reached; without it, :meth:`open` connects in the background.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "lemon",
        deliver_local: bool = True,
        max_outbox: int = 10_000,
        connect_timeout_s: float = 2.0,
        reconnect_max_s: float = 1.0,
        health_check_s: float = 2.0,
    ) -> None:
        if max_outbox < 1:
            raise UsageError(f"max_outbox must be a positive integer, got {max_outbox!r}")
        self._url = url
        self._where = redact_url(url)
        self._prefix = prefix
        self._channel_prefix = f"{prefix}:bus:"
        self._pattern = f"{self._channel_prefix}*"
        self._control = f"{prefix}:busctl"
        self._deliver_local = deliver_local
        self._max_outbox = max_outbox
        self._connect_timeout = connect_timeout_s
        # 40 ms doubling up to reconnect_max_s, jittered so daemons do not reconnect in step.
        self._reconnect_backoff = Backoff(initial=0.04, cap=reconnect_max_s)
        self._health_check = health_check_s
        self.origin = f"{os.getpid():x}-{uuid.uuid4().hex[:12]}"
        self._seq = 0  # the last sequence number given out (under self._cond)
        self._fanout: Callable[[str, Any], int] | None = None
        self._status: StatusCallback | None = None
        self._cond = threading.Condition()
        self._outbox: collections.deque[tuple[str, bytes]] = collections.deque()
        self._stop = threading.Event()
        self._reader_up = False
        self._writer_up = False
        self._reported_up = False
        self._ever_up = False
        self._down_since_up = False
        self._state_lock = threading.Lock()
        self._reader_ready = threading.Event()
        # Set by the reader when it lost its connection: the writer's is as suspect (its loss
        # is only seen at its next write), so the writer reconnects too before "up".
        self._relink = threading.Event()
        self._writer_ready = threading.Event()
        self._threads: list[threading.Thread] = []
        self._writer_client: redis.Redis | None = None
        self._last_seq: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._flush_waiters: dict[str, threading.Event] = {}
        self._closed = False
        # counters
        self.sent = 0
        self.received = 0
        self.dropped = 0
        self.gaps = 0
        self.reconnects = 0
        self.undecodable = 0

    # -- the BusBackend interface --------------------------------------------------------

    @property
    def name(self) -> str:
        return "redis"

    @property
    def prefix(self) -> str:
        return self._prefix

    def connect(self, timeout: float | None = None) -> None:
        """Start the reader and writer and wait until both are connected and subscribed;
        raise BusBackendUnavailableError (naming the server, password redacted) otherwise."""
        limit = self._connect_timeout if timeout is None else timeout
        probe = self._client()
        try:
            probe.ping()  # fails fast (refused, bad password) with the server's own reason
        except (redis.RedisError, OSError) as exc:
            self.close()
            raise BusBackendUnavailableError(
                f"Redis bus {self._where}: cannot connect ({type(exc).__name__}: {exc})"
            ) from exc
        finally:
            probe.close()
        self._start()
        if not (self._reader_ready.wait(limit) and self._writer_ready.wait(limit)):
            reason = self._last_error or "no answer"
            self.close()
            raise BusBackendUnavailableError(
                f"Redis bus {self._where}: cannot connect within {limit:g} s ({reason})"
            )

    def open(self, fanout: Callable[[str, Any], int]) -> None:
        if self._fanout is not None:
            raise LifecycleError("a RedisBackend serves one bus; create one per Bus")
        self._fanout = fanout
        self._start()

    def watch(self, callback: StatusCallback) -> None:
        """Report outages, recoveries and lost publications to ``callback`` (from the
        backend's threads)."""
        self._status = callback

    def publish(self, topic: str, item: Any) -> None:
        if self._closed:
            return
        fanout = self._fanout
        if self._deliver_local and fanout is not None:
            fanout(topic, item)
        # While either connection is down (running() false) a publication reaches this
        # process's subscribers only.
        up = self._reader_up and self._writer_up
        frame = msgspec.Raw(encode_frame(item)) if up else None
        with self._cond:
            # The number is taken under the outbox lock, so the outbox is in sequence order.
            self._seq += 1
            seq = self._seq
            if frame is None or len(self._outbox) >= self._max_outbox:
                self.dropped += 1  # the number is used anyway: receivers see the gap
                return
            data = _ENCODER.encode(_Envelope(origin=self.origin, seq=seq, kind=_DATA, frame=frame))
            self._outbox.append((self._channel_prefix + topic, data))
            self._cond.notify()

    def topic_added(self, topic: str) -> None:
        """Nothing to do: the process's pattern subscription covers every topic."""

    def topic_removed(self, topic: str) -> None:
        """Nothing to do: the process's pattern subscription covers every topic."""

    def running(self) -> bool:
        return not self._closed and self._reader_up and self._writer_up

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every publication made before this call came back through Redis to this
        process (a barrier); False when that did not happen within ``timeout``."""
        if not self.running():
            return False
        token = uuid.uuid4().hex
        done = threading.Event()
        self._flush_waiters[token] = done
        frame = msgspec.Raw(_ENCODER.encode(token))
        data = _ENCODER.encode(_Envelope(origin=self.origin, seq=0, kind=_FLUSH, frame=frame))
        with self._cond:
            self._outbox.append((self._control, data))
            self._cond.notify()
        try:
            return done.wait(timeout)
        finally:
            self._flush_waiters.pop(token, None)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        client = self._writer_client
        if client is not None and self._reader_up:
            # Wakes the reader's blocking read (before the writer, woken next, closes the
            # client).
            with contextlib.suppress(Exception):
                client.publish(self._control, b"")
        with self._cond:
            self._cond.notify_all()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(5)
        client = self._writer_client
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    def statistics(self) -> dict[str, Any]:
        """Counters of this backend (no address beyond the redacted one)."""
        with self._cond:
            queued = len(self._outbox)
        return {
            "backend": "redis",
            "server": self._where,
            "prefix": self._prefix,
            "origin": self.origin,
            "running": self.running(),
            "outbox": queued,
            "max_outbox": self._max_outbox,
            "sent": self.sent,
            "received": self.received,
            "dropped": self.dropped,
            "gaps": self.gaps,
            "reconnects": self.reconnects,
            "undecodable": self.undecodable,
        }

    # -- threads ---------------------------------------------------------------------------

    _last_error: str = ""

    def _start(self) -> None:
        if self._threads or self._closed:
            return
        for target, label in ((self._read, "reader"), (self._write, "writer")):
            thread = threading.Thread(target=target, name=f"lemon-redis-{label}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _client(self) -> redis.Redis:
        return redis.Redis.from_url(
            self._url,
            socket_connect_timeout=self._connect_timeout,
            socket_keepalive=True,
            health_check_interval=self._health_check,
            retry_on_timeout=False,
        )

    def _backoff(self, attempt: int) -> bool:
        """Wait before reconnecting; False when the backend is closing."""
        return not self._stop.wait(self._reconnect_backoff.delay(attempt))

    def _set_state(
        self, *, reader: bool | None = None, writer: bool | None = None, why: str = ""
    ) -> None:
        with self._state_lock:
            if reader is not None:
                self._reader_up = reader
            if writer is not None:
                self._writer_up = writer
            up = self._reader_up and self._writer_up and not self._closed
            if up == self._reported_up:
                return
            self._reported_up = up
            first = up and not self._ever_up
            if up:
                self._ever_up = True
        if self._closed:
            return
        if first:
            return  # the first connection is no recovery: nothing was missed
        if up:
            self.reconnects += 1
            _log.warning("Redis bus %s: reconnected; subscribers resync", self._where)
            self._announce_gap()
            self._report(True, True, "reconnected")
        else:
            _log.warning("Redis bus %s: down (%s)", self._where, why)
            self._report(False, False, why or "connection lost")

    def _announce_gap(self) -> None:
        # First in the outbox after a reconnection: "this process dropped publications up to
        # number N", so every other process resyncs even if it never heard from this one.
        with self._cond:
            frame = msgspec.Raw(b"null")
            envelope = _Envelope(origin=self.origin, seq=self._seq, kind=_GAP, frame=frame)
            self._outbox.appendleft((self._control, _ENCODER.encode(envelope)))
            self._cond.notify()

    def _report(self, running: bool, resync: bool, reason: str) -> None:
        callback = self._status
        if callback is None:
            return
        try:
            callback(running, resync, reason)
        except Exception:  # a broken observer must not kill the reader
            _log.exception("Redis bus status callback failed")

    def _read(self) -> None:
        attempt = 0
        while not self._stop.is_set():
            pubsub = None
            client: redis.Redis | None = None
            try:
                client = self._client()
                pubsub = client.pubsub(  # type: ignore[no-untyped-call]  # redis-py untyped
                    ignore_subscribe_messages=False
                )
                pubsub.psubscribe(self._pattern)
                pubsub.subscribe(self._control)
                confirmed = 0
                while confirmed < 2 and not self._stop.is_set():
                    message = pubsub.get_message(timeout=self._connect_timeout)
                    if message is None:
                        raise redis.TimeoutError("no subscription confirmation")
                    if message["type"] in ("psubscribe", "subscribe"):
                        confirmed += 1
                attempt = 0
                self._reader_ready.set()
                self._set_state(reader=True)
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=1.0)
                    if message is not None and message["type"] in ("pmessage", "message"):
                        self._arrived(message)
            except Exception as exc:
                if self._stop.is_set():
                    break
                if not isinstance(exc, _REDIS_ERRORS):
                    _log.exception("Redis bus %s: reader failed; reconnecting", self._where)
                self._last_error = f"{type(exc).__name__}: {exc}"
                self._relink.set()
                self._set_state(reader=False, writer=False, why=self._last_error)
                with self._cond:
                    self._cond.notify_all()
                attempt += 1
                if not self._backoff(attempt):
                    break
            finally:
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        pubsub.close()
                if client is not None:
                    with contextlib.suppress(Exception):
                        client.close()  # and its pool: no socket left to the collector

    def _arrived(self, message: dict[str, Any]) -> None:
        data = message["data"]
        if not data or self._stop.is_set():
            return
        try:
            envelope = _DECODER.decode(data)
        except (msgspec.DecodeError, TypeError):
            self.undecodable += 1
            return
        if envelope.kind == _FLUSH:
            if envelope.origin == self.origin:
                token = msgspec.json.decode(bytes(envelope.frame))
                waiter = self._flush_waiters.get(token)
                if waiter is not None:
                    waiter.set()
            return
        if envelope.kind == _GAP:
            if envelope.origin != self.origin:
                self._last_seq[envelope.origin] = envelope.seq
                self.gaps += 1
                self._report(True, True, "another process reconnected after losing publications")
            return
        if envelope.origin == self.origin and self._deliver_local:
            return  # delivered locally when published
        self._check_sequence(envelope.origin, envelope.seq)
        channel = message["channel"]
        if isinstance(channel, bytes):
            channel = channel.decode("utf-8", "replace")
        topic = channel[len(self._channel_prefix) :]
        fanout = self._fanout
        if fanout is None or not topic:
            return
        try:
            item = decode_frame(bytes(envelope.frame))
        except (msgspec.DecodeError, msgspec.ValidationError, TypeError, ValueError):
            self.undecodable += 1
            return
        self.received += 1
        fanout(topic, item)

    def _check_sequence(self, origin: str, seq: int) -> None:
        last = self._last_seq.get(origin)
        self._last_seq[origin] = seq
        self._last_seq.move_to_end(origin)
        if len(self._last_seq) > _MAX_ORIGINS:
            self._last_seq.popitem(last=False)
        if last is not None and seq != last + 1:
            self.gaps += 1
            self._report(True, True, f"{seq - last - 1} publication(s) of another process lost")

    def _write(self) -> None:
        # One connection with replies turned off (CLIENT REPLY OFF): a publication is one
        # socket write, never a wait for the server's answer, so the writer holds the GIL as
        # little as possible while the reader takes what arrives. A publication lost on a
        # connection that died under it is seen by receivers as a gap in the sequence numbers.
        attempt = 0
        while not self._stop.is_set():
            client: redis.Redis | None = None
            conn: Any = None
            batch: list[tuple[str, bytes]] = []
            try:
                client = self._client()
                client.ping()
                self._writer_client = client
                self._relink.clear()
                conn = client.connection_pool.get_connection()
                conn.send_command("CLIENT", "REPLY", "OFF")
                attempt = 0
                self._writer_ready.set()
                self._set_state(writer=True)
                while not self._stop.is_set():
                    with self._cond:
                        while (
                            not self._outbox
                            and not self._stop.is_set()
                            and not self._relink.is_set()
                        ):
                            self._cond.wait(1.0)
                            if not self._outbox:
                                break
                        batch = [
                            self._outbox.popleft() for _ in range(min(_BATCH, len(self._outbox)))
                        ]
                    # A server that closed the connection makes it readable (EOF), which
                    # raises ConnectionError here, before a write that would be lost unseen;
                    # nothing else is ever sent back on this link.
                    if self._relink.is_set():
                        raise redis.ConnectionError("the reader lost its connection")
                    if conn.can_read(timeout=0):
                        raise redis.ConnectionError("unexpected data on the publishing link")
                    if not batch:
                        continue
                    conn.send_packed_command(
                        conn.pack_commands([("PUBLISH", channel, data) for channel, data in batch]),
                        check_health=False,
                    )
                    control = self._control
                    self.sent += sum(1 for channel, _ in batch if channel != control)
                    batch = []
            except Exception as exc:
                if self._stop.is_set():
                    break
                if not isinstance(exc, _REDIS_ERRORS):
                    _log.exception("Redis bus %s: writer failed; reconnecting", self._where)
                self._last_error = f"{type(exc).__name__}: {exc}"
                with self._cond:
                    # What was in flight or queued is dropped (receivers see the gap).
                    self.dropped += len(batch) + len(self._outbox)
                    self._outbox.clear()
                self._set_state(writer=False, why=self._last_error)
                attempt += 1
                if not self._backoff(attempt):
                    break
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.disconnect()
                if client is not None:
                    with contextlib.suppress(Exception):
                        client.close()
