"""The Bus: exact-match topics, typed publication, bounded delivery to every subscriber.

* ``subscribe(topic, delivery=handle)`` attaches a bounded :class:`Delivery` handle (one handle
  may serve several topics); without a handle a default bounded one is created. There is no
  unbounded raw subscription.
* ``broadcast(topic, item)`` measures the item once and offers it to every handle on the topic;
  each handle admits or refuses without waiting (see :mod:`lemon_core.bus.delivery`).
* ``broadcast_event(topic, type, payload, meta)`` validates a registered type's payload at the
  publisher: with :attr:`PayloadValidation.RAISE` (dev and test) anything but the registered
  record raises; with :attr:`PayloadValidation.COERCE` (prod) it is coerced leniently.
  Unregistered types pass through.
* ``broadcast_threadsafe`` / ``broadcast_event_threadsafe`` are the twins for publishers on other
  threads (the fan-out runs in the calling thread; consumers are woken on their own loops).
"""

from __future__ import annotations

import asyncio
import enum
import os
import threading
import time
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any, Self

import msgspec

from lemon_core.bus._measure import measure
from lemon_core.bus.backends import BusBackend
from lemon_core.bus.backends.local import LocalBackend
from lemon_core.bus.delivery import (
    CONTENTION_TIMEOUT_S as _CONTENTION_TIMEOUT_S,
)
from lemon_core.bus.delivery import (
    TERMINAL_EVENT_TYPES,
    ConsumerClass,
    Delivery,
    OverflowReason,
    _non_negative_number,
    _register_read_coroutine,
    _send_wakes,
)
from lemon_core.bus.topics import SYSTEM, check_topic
from lemon_core.errors import BusClosedError, EventPayloadError, UsageError, UsageTypeError
from lemon_core.events.bus_backend_changed import BusBackendChanged
from lemon_core.events.envelope import Event
from lemon_core.events.registry import coerce, payload_class, registry

__all__ = [
    "Bus",
    "BusStatistics",
    "PayloadValidation",
    "Subscription",
    "validation_from_env",
]


class PayloadValidation(enum.StrEnum):
    """What ``broadcast_event`` does with a registered type's payload that is not its record."""

    RAISE = "raise"
    COERCE = "coerce"


_PAYLOAD_CLASSES = dict(registry())
_time_ns = time.time_ns

_ENV_VALIDATION = {
    "dev": PayloadValidation.RAISE,
    "test": PayloadValidation.RAISE,
    "prod": PayloadValidation.COERCE,
}


def validation_from_env(environ: Mapping[str, str] | None = None) -> PayloadValidation:
    """``RAISE`` when ``LEMON_ENV`` is ``dev`` (the default) or ``test``, ``COERCE`` for
    ``prod``; any other value is a ``ValueError``."""
    env = (os.environ if environ is None else environ).get("LEMON_ENV", "dev").strip() or "dev"
    try:
        return _ENV_VALIDATION[env]
    except KeyError:
        raise UsageError(f"LEMON_ENV must be one of dev, test, prod; got {env!r}") from None


class BusStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of a bus: publications, and sums over its currently attached handles
    (``admitted``, ``refused``, ``queued``, ``bytes``: a detached handle's history leaves)."""

    backend: str
    running: bool
    validation: PayloadValidation
    topics: int
    subscriptions: int
    handles: int
    published: int
    admitted: int
    refused: int
    fenced_handles: int
    queued: int
    bytes: int


class Subscription:
    """One handle's subscription to one topic; ``cancel()`` (or leaving ``with``) ends it."""

    __slots__ = ("__weakref__", "_active", "bus", "delivery", "topic")

    def __init__(self, bus: Bus, topic: str, delivery: Delivery) -> None:
        self.bus = bus
        self.topic = topic
        self.delivery = delivery
        self._active = True

    @property
    def active(self) -> bool:
        """Whether the subscription still receives publications."""
        return self._active

    def cancel(self) -> None:
        """Stop receiving ``topic`` on this handle; idempotent. Queued items stay queued."""
        if self._active:
            self._active = False
            self.bus._detach(self)

    async def get(self) -> Any:
        """``await self.delivery.get()``."""
        return await self.delivery.get()

    def claim(self, task: asyncio.Task[Any] | None = None) -> Subscription:
        """``self.delivery.claim(task)``: make ``task`` (default: the current one) the owner."""
        self.delivery.claim(task)
        return self

    def __aiter__(self) -> AsyncIterator[Any]:
        return self.delivery.__aiter__()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cancel()

    def __repr__(self) -> str:
        state = "active" if self._active else "cancelled"
        return f"<Subscription {self.topic!r} {state} epoch={self.delivery.epoch}>"


class Bus:
    """Publication to exact-match topics with bounded delivery (see the module docstring)."""

    def __init__(
        self,
        *,
        backend: BusBackend | None = None,
        validation: PayloadValidation | str | None = None,
        default_consumer: ConsumerClass = ConsumerClass.SESSION_SUBSCRIBER,
        contention_timeout: float = _CONTENTION_TIMEOUT_S,
    ) -> None:
        """``contention_timeout``: seconds a publisher waits for another publisher's fan-out
        under the bus's shared admission lock before that contention counts as overflow on
        each subscriber (``0``: never wait)."""
        if not _non_negative_number(contention_timeout):
            raise UsageError(
                f"contention_timeout must be a number of seconds >= 0, got {contention_timeout!r}"
            )
        self._contention_timeout = float(contention_timeout)
        self._backend: BusBackend = LocalBackend() if backend is None else backend
        self._validation = (
            validation_from_env() if validation is None else PayloadValidation(validation)
        )
        self._default_consumer = ConsumerClass(default_consumer)
        self._table: dict[str, tuple[Delivery, ...]] = {}
        # Per topic: the handles admitted under this bus's own lock (adopted at subscribe),
        # the others (admitted one by one under their own locks), and the smallest
        # max_message_bytes of the first group.
        self._routes: dict[str, tuple[tuple[Delivery, ...], tuple[Delivery, ...], int]] = {}
        self._subscriptions: dict[tuple[str, Delivery], Subscription] = {}
        self._table_lock = threading.Lock()
        # The admission lock of every handle that adopted it: one acquisition per publication
        # serialises the producers of all of them.
        self._lock = threading.Lock()
        self._pending_settle = False
        self._closed = False
        self._published = 0
        self._backend.open(self._fanout)
        watch = getattr(self._backend, "watch", None)
        if callable(watch):  # a networked backend reports its outages and lost publications
            watch(self._backend_changed)
        # Every publication is measured at the publisher (an unencodable item fails there,
        # subscribed or not). The local backend's fan-out is this bus's own, so it is handed
        # the measured size directly; any other backend carries the item and its receiving
        # side measures what arrives.
        self._local = self._backend if type(self._backend) is LocalBackend else None

    # -- properties ------------------------------------------------------------------------

    @property
    def backend(self) -> BusBackend:
        """The active backend."""
        return self._backend

    @property
    def validation(self) -> PayloadValidation:
        """What ``broadcast_event`` does with a registered type's non-record payload."""
        return self._validation

    def running(self) -> bool:
        """Whether the bus is open and its active backend is up."""
        return not self._closed and self._backend.running()

    def topics(self) -> tuple[str, ...]:
        """Topics that currently have at least one subscription."""
        return tuple(sorted(self._table))

    # -- subscriptions -----------------------------------------------------------------------

    def subscribe(self, topic: str, *, delivery: Delivery | None = None) -> Subscription:
        """Attach ``delivery`` (default: a new bounded handle for the bus's default consumer
        class, owned by the first task that reads it) to ``topic``. Subscribing the same handle
        to the same topic again returns the existing subscription."""
        check_topic(topic)
        if self._closed:
            raise BusClosedError("the bus is closed; create a new Bus to subscribe")
        if delivery is None:
            delivery = Delivery.for_consumer(self._default_consumer)
        key = (topic, delivery)
        with self._table_lock:
            existing = self._subscriptions.get(key)
            if existing is not None:
                return existing
            subscription = Subscription(self, topic, delivery)
            delivery._attach(subscription, self._lock, self)
            self._subscriptions[key] = subscription
            handles = self._table.get(topic, ())
            self._table[topic] = (*handles, delivery)
            self._route(topic)
        if not handles:
            self._backend.topic_added(topic)
        return subscription

    def _detach(self, subscription: Subscription) -> None:
        topic, delivery = subscription.topic, subscription.delivery
        with self._table_lock:
            if self._subscriptions.get((topic, delivery)) is not subscription:
                return
            del self._subscriptions[(topic, delivery)]
            remaining = tuple(h for h in self._table.get(topic, ()) if h is not delivery)
            if remaining:
                self._table[topic] = remaining
            else:
                self._table.pop(topic, None)
            self._route(topic)
        delivery._detach(subscription)
        if not remaining:
            self._backend.topic_removed(topic)

    def _route(self, topic: str) -> None:
        # Caller holds the table lock. Rebuilt on every (un)subscription, read lock-free.
        handles = self._table.get(topic, ())
        if not handles:
            self._routes.pop(topic, None)
            return
        lock = self._lock
        own = tuple(h for h in handles if h._lock is lock)
        other = tuple(h for h in handles if h._lock is not lock)
        smallest = min((h._max_bytes for h in own), default=0)
        self._routes[topic] = (own, other, smallest)

    # -- publication -------------------------------------------------------------------------

    def broadcast(self, topic: str, item: Any) -> None:
        """Offer ``item`` to every handle subscribed to ``topic``; never waits on a consumer.

        For publishers on an event loop; publishers on other threads use the
        ``broadcast_threadsafe`` twin. The item is measured once, at the publisher: an item
        that is not JSON-encodable (or holds a ``msgspec.Raw`` that does not own its bytes)
        raises ``UnencodableItemError`` before any handle sees it, whether or not anything is
        subscribed.
        """
        if self._closed:
            raise BusClosedError("the bus is closed; publications are refused")
        if not topic:
            check_topic(topic)
        size = measure(item)
        self._published += 1
        local = self._local
        if local is None:
            self._backend.publish(topic, item)
        elif not local._closed:
            self._deliver(topic, item, size)

    def broadcast_threadsafe(self, topic: str, item: Any) -> None:
        """``broadcast`` for publishers on any thread (with or without an event loop).

        The fan-out runs in the calling thread; each waiting consumer is woken on its own loop
        (``call_soon_threadsafe``), at most once per wait.
        """
        self.broadcast(topic, item)

    def broadcast_event(
        self,
        topic: str,
        type: str,
        payload: Any = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Event:
        """Validate ``payload`` for ``type``, wrap it in an :class:`Event`, broadcast it and
        return the event."""
        # The fast path inlines the registry lookup and the record check; mismatches go slow.
        cls = _PAYLOAD_CLASSES.get(type) if type.__class__ is str else None
        if cls is None or payload.__class__ is not cls:
            payload = self._validated(type, payload)
        event = Event(
            type=type,
            ts_ms=_time_ns() // 1_000_000,
            meta={} if meta is None else dict(meta),
            payload=payload,
        )
        # broadcast(), inlined: this is the hot publishing path.
        if self._closed:
            raise BusClosedError("the bus is closed; publications are refused")
        if not topic:
            check_topic(topic)
        size = measure(event)
        self._published += 1
        local = self._local
        if local is None:
            self._backend.publish(topic, event)
        elif not local._closed:
            self._deliver(topic, event, size)
        return event

    def broadcast_local_event(self, topic: str, type: str, payload: Any = None) -> Event | None:
        """Like :meth:`broadcast_event`, to this process's subscribers only (never over the
        backend): for what one process reports about itself (its store's server went away).
        ``None`` when the bus is closed (a report after shutdown is dropped, never raised)."""
        if self._closed:
            return None
        check_topic(topic)
        event = Event(
            type=type,
            ts_ms=_time_ns() // 1_000_000,
            meta={},
            payload=self._validated(type, payload),
        )
        self._deliver(topic, event, measure(event))
        return event

    def broadcast_event_threadsafe(
        self,
        topic: str,
        type: str,
        payload: Any = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Event:
        """``broadcast_event`` for publishers on any thread."""
        return self.broadcast_event(topic, type, payload, meta)

    def _validated(self, event_type: str, payload: Any) -> Any:
        if not _non_empty_str(event_type):
            raise UsageTypeError(f"event type must be a non-empty string, got {event_type!r}")
        cls = payload_class(event_type)
        if cls is None or type(payload) is cls or isinstance(payload, cls):
            return payload
        if self._validation is PayloadValidation.COERCE:
            return coerce(event_type, payload)
        raise EventPayloadError(
            f"{event_type!r} is registered with payload {cls.__name__}, got "
            f"{type(payload).__name__}; build it with {cls.__name__}.new(...) or "
            f"{cls.__name__}.from_map(...)"
        )

    def _fanout(self, topic: str, item: Any) -> int:
        # The backend-facing fan-out: what a backend carried is measured on arrival.
        if not self._table.get(topic):
            return 0
        return self._deliver(topic, item, measure(item))

    def _deliver(self, topic: str, item: Any, size: int) -> int:
        # One (item, size) entry shared by every handle on the topic. The hot path: handles that
        # adopted this bus's lock are admitted under one acquisition, each with one length
        # test and one append; anything unusual (a fenced or closed handle, a requested
        # control, an item too large for some handle) takes the handle's full path.
        route = self._routes.get(topic)
        if route is None:
            return 0
        own, other, smallest = route
        entry = (item, size)
        terminal = type(item) is Event and item.type in TERMINAL_EVENT_TYPES
        if own:
            lock = self._lock
            if size > smallest:
                slow: list[Delivery] | tuple[Delivery, ...] | None = own
            elif lock.acquire(False) or (
                self._contention_timeout and lock.acquire(True, self._contention_timeout)
            ):
                slow = None
                woken: list[Delivery] | None = None
                try:
                    for handle in own:
                        queue = handle._queue
                        if len(queue) < handle._limit:
                            queue.append(entry)
                            if handle._waiter is not None:
                                if woken is None:
                                    woken = [handle]
                                else:
                                    woken.append(handle)
                        elif slow is None:
                            slow = [handle]
                        else:
                            slow.append(handle)
                finally:
                    lock.release()
                if self._pending_settle:
                    self._settle()
                if woken is not None:
                    # Outside the lock: the waiter is read again here, after the append.
                    # Cross-thread wakes go out as one call per consumer loop.
                    batch: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
                    for handle in woken:
                        waiter = handle._waiter
                        if waiter is not None:
                            handle._wake(waiter, batch)
                    if batch:
                        _send_wakes(batch)
            else:
                for handle in own:  # another publisher stalled past the bound: contended
                    handle._refuse_contended(entry, terminal)
                slow = None
            if slow is not None:
                for handle in slow:
                    handle._admit(entry, size, terminal)
        for handle in other:
            handle._admit(entry, size, terminal)
        return len(own) + len(other)

    def resync(self, reason: OverflowReason = OverflowReason.RESYNC) -> int:
        """Fence every handle attached to this bus (one ``Overflow`` marker each): publications
        may have been lost, so every consumer replaces its handle and re-reads authority.
        Returns how many handles were fenced. Safe from any thread; never waits."""
        with self._table_lock:
            handles = {h: None for hs in self._table.values() for h in hs}
        for handle in handles:
            handle.fence(reason)
        return len(handles)

    def _backend_changed(self, running: bool, resync: bool, reason: str) -> None:
        # From a backend's thread: tell this process's subscribers of ``system`` (directly,
        # never through the backend that is reporting), then fence everything on a resync.
        if self._closed:
            return
        event = Event(
            type=BusBackendChanged.event_type,
            ts_ms=_time_ns() // 1_000_000,
            meta={},
            payload=BusBackendChanged(
                backend=self._backend.name, running=running, resync=resync, reason=reason
            ),
        )
        self._deliver(SYSTEM, event, measure(event))
        if resync:
            self.resync()

    def _settle(self) -> None:
        # A producer found this bus's lock taken and left a request (a fence, a terminal
        # notice) on a handle that adopted it: apply it now that the lock is free. Rare (a
        # holder stalled past the contention bound), so every adopted handle is looked at.
        self._pending_settle = False
        for own, _other, _smallest in list(self._routes.values()):
            for handle in own:
                if handle._pending:
                    handle._settle()

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Cancel every subscription and close the backend.

        A handle still subscribed on another bus stays open there. A handle left with no
        subscription is ended: its consumer reads what is queued, then ``get()`` raises
        ``DeliveryClosedError`` (a waiting consumer wakes at once). Safe from any thread.
        """
        if self._closed:
            return
        self._closed = True
        subscriptions = list(self._subscriptions.values())
        for subscription in subscriptions:
            subscription.cancel()
        self._backend.close()
        for delivery in {subscription.delivery: None for subscription in subscriptions}:
            delivery._bus_closed()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def statistics(self) -> BusStatistics:
        """Publication counters and the sums over currently attached handles."""
        handles = {h for hs in self._table.values() for h in hs}
        stats = [h.statistics() for h in handles]
        return BusStatistics(
            backend=self._backend.name,
            running=self.running(),
            validation=self._validation,
            topics=len(self._table),
            subscriptions=len(self._subscriptions),
            handles=len(handles),
            published=self._published,
            admitted=sum(s.admitted for s in stats),
            refused=sum(s.refused for s in stats),
            fenced_handles=sum(1 for s in stats if s.fenced),
            queued=sum(s.queued for s in stats),
            bytes=sum(s.bytes for s in stats),
        )

    def __repr__(self) -> str:
        state = "running" if self.running() else "closed"
        return f"<Bus {self._backend.name} {state} topics={len(self._table)}>"


_register_read_coroutine(Subscription.get.__code__)


def _non_empty_str(value: object) -> bool:
    return isinstance(value, str) and bool(value)
