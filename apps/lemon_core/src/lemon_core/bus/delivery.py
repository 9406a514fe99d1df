"""Bounded delivery: a handle that admits items before they are queued, and fences on overflow.

Guarantees (per handle):

* **Admission before queueing.** An item is queued only if the queue holds fewer than
  ``max_entries`` items and the item's size (encoded JSON plus the excess backing of retained
  buffer views, see :func:`lemon_core.bus.measure`) is at most ``max_message_bytes``.
* **Serialised, never waiting on the consumer.** Producers serialise admission on a lock the
  consumer never takes; a producer that finds another producer admitting does not wait: its item
  is refused and counted as overflow (``contended``).
* **Fence on first refusal.** The first refused item fences the handle for good and queues
  exactly one small :class:`Overflow` marker. Beside it, room for at most one compact
  :class:`TerminalNotice` is reserved, so a run's completion still reaches the consumer after
  overflow. Nothing else is admitted after the fence. The consumer recovers by calling
  :meth:`Delivery.replace` and re-reading authority.
* **Hard bound.** A handle never holds more than ``max_entries + 2`` items, and never more than
  ``max_entries * max_message_bytes`` bytes of data plus the two compact controls.
* **Release.** :meth:`close`, :meth:`replace`, or the end of the owner task (by default the task
  that created the handle) releases every subscription and the queued items.
* **Epochs.** Every handle has a unique, increasing ``epoch``. With ``tagged=True`` every item
  comes out as :class:`Tagged` (controls always carry the epoch), and :meth:`accepts` tells a
  consumer whether an item belongs to this handle: after a replacement, items taken from (or
  delayed on their way from) the old handle are rejected.

Not guaranteed: a bound on anything outside the handle (socket buffers, other queues of the
consumer), or delivery of anything after the fence besides the marker and one terminal notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import itertools
import threading
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from lemon_core.bus._measure import measure
from lemon_core.errors import DeliveryClosedError
from lemon_core.events.envelope import Event

if TYPE_CHECKING:
    from lemon_core.bus.bus import Subscription

__all__ = [
    "DELIVERY_DEFAULTS",
    "TERMINAL_EVENT_TYPES",
    "TERMINAL_NOTICE_MAX_BYTES",
    "AdmissionLock",
    "ConsumerClass",
    "Delivery",
    "DeliveryLimits",
    "DeliveryStatistics",
    "Overflow",
    "OverflowReason",
    "Tagged",
    "TerminalNotice",
]

#: Event types that end a run: a compact notice of one of them is admitted after the fence.
TERMINAL_EVENT_TYPES: frozenset[str] = frozenset({"run_completed", "run_failed"})
#: A :class:`TerminalNotice` encodes to at most this many bytes; the terminal event rides inside
#: it only when that fits.
TERMINAL_NOTICE_MAX_BYTES = 1024

_epochs = itertools.count(1)


class ConsumerClass(enum.StrEnum):
    """The consumer classes of the delivery boundary, each with named defaults."""

    SESSION_SUBSCRIBER = "session_subscriber"
    EXECUTOR_RUNNER = "executor_runner"
    EVENT_BRIDGE = "event_bridge"
    BROWSER_PANE = "browser_pane"
    ROUTER_COALESCER = "router_coalescer"


class DeliveryLimits(msgspec.Struct, frozen=True, kw_only=True):
    """The bounds of a handle."""

    max_entries: int = 256
    max_message_bytes: int = 1_048_576
    tagged: bool = False


#: Named defaults per consumer class (see docs/bus_events.md, "Delivery and recovery").
DELIVERY_DEFAULTS: Mapping[ConsumerClass, DeliveryLimits] = {
    ConsumerClass.SESSION_SUBSCRIBER: DeliveryLimits(max_entries=256, max_message_bytes=1_048_576),
    ConsumerClass.EXECUTOR_RUNNER: DeliveryLimits(max_entries=256, max_message_bytes=1_048_576),
    ConsumerClass.EVENT_BRIDGE: DeliveryLimits(
        max_entries=256, max_message_bytes=1_048_576, tagged=True
    ),
    ConsumerClass.BROWSER_PANE: DeliveryLimits(
        max_entries=256, max_message_bytes=65_536, tagged=True
    ),
    ConsumerClass.ROUTER_COALESCER: DeliveryLimits(
        max_entries=256, max_message_bytes=65_536, tagged=True
    ),
}


class OverflowReason(enum.StrEnum):
    """Why a handle fenced itself."""

    ENTRIES = "entries"
    BYTES = "bytes"
    CONTENDED = "contended"


class Overflow(msgspec.Struct, frozen=True, kw_only=True):
    """The one overflow marker of a fenced handle: replace the handle and re-read authority."""

    epoch: int
    reason: OverflowReason
    kind: str = "overflow"


class TerminalNotice(msgspec.Struct, frozen=True, kw_only=True):
    """A run's terminal event that arrived after the fence, in compact form.

    ``event`` is the terminal event itself when it encodes to at most
    ``TERMINAL_NOTICE_MAX_BYTES``; otherwise ``None`` and the consumer re-reads the run's
    completion from its owner.
    """

    epoch: int
    event_type: str
    run_id: str | None = None
    session_key: str | None = None
    event: Event | None = None
    kind: str = "terminal"


class Tagged(msgspec.Struct, frozen=True, kw_only=True):
    """A data item of a tagged handle, carrying the handle's epoch."""

    epoch: int
    item: Any


class DeliveryStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of a handle's counters."""

    epoch: int
    tagged: bool
    max_entries: int
    max_message_bytes: int
    admitted: int
    refused: int
    contended: int
    delivered: int
    queued: int
    bytes: int
    fenced: bool
    overflow_reason: OverflowReason | None
    terminal_reserved: bool
    closed: bool
    topics: tuple[str, ...]


class AdmissionLock(Protocol):
    """The lock producers serialise admission on (a ``threading.Lock`` by default)."""

    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...


_CONTROLS = (Overflow, TerminalNotice)


class Delivery:
    """A bounded, fencing delivery handle (see the module docstring).

    One handle may serve several topics and several buses; it has one consumer, which reads with
    ``await handle.get()`` or ``async for item in handle``.
    """

    def __init__(
        self,
        *,
        max_entries: int = 256,
        max_message_bytes: int = 1_048_576,
        tagged: bool = False,
        owner: asyncio.Task[Any] | None = None,
        bind_current_task: bool = True,
        lock: AdmissionLock | None = None,
    ) -> None:
        if not _positive_int(max_entries):
            raise ValueError(f"max_entries must be a positive int, got {max_entries!r}")
        if not _positive_int(max_message_bytes):
            raise ValueError(f"max_message_bytes must be a positive int, got {max_message_bytes!r}")
        self._max_entries = max_entries
        self._max_bytes = max_message_bytes
        self._tagged = tagged
        self._epoch = next(_epochs)
        self._lock: AdmissionLock = threading.Lock() if lock is None else lock
        self._queue: deque[tuple[Any, int]] = deque()
        self._fenced = False
        self._overflow_reason: OverflowReason | None = None
        self._terminal_used = False
        self._closed = False
        self._admitted = 0
        self._refused = 0
        self._contended = 0
        self._delivered = 0
        self._bytes_in = 0
        self._bytes_out = 0
        self._waiter: asyncio.Future[None] | None = None
        self._waiter_thread = 0
        self._wake_sent = False
        self._subscriptions: dict[Subscription, None] = {}
        self._closed_event: asyncio.Event | None = None
        if owner is None and bind_current_task:
            try:
                owner = asyncio.current_task()
            except RuntimeError:
                owner = None
        self._owner = owner
        if owner is not None:
            owner.add_done_callback(self._on_owner_done)

    @classmethod
    def for_consumer(cls, consumer: ConsumerClass | str, **overrides: Any) -> Delivery:
        """A handle with the named defaults of ``consumer`` (keyword ``overrides`` win)."""
        try:
            limits = DELIVERY_DEFAULTS[ConsumerClass(consumer)]
        except ValueError:
            known = ", ".join(c.value for c in ConsumerClass)
            raise ValueError(f"unknown consumer class {consumer!r}; known: {known}") from None
        settings: dict[str, Any] = {
            "max_entries": limits.max_entries,
            "max_message_bytes": limits.max_message_bytes,
            "tagged": limits.tagged,
        }
        settings.update(overrides)
        return cls(**settings)

    # -- properties ------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """This handle's unique epoch (a replacement always has a larger one)."""
        return self._epoch

    @property
    def tagged(self) -> bool:
        """Whether data items come out wrapped in :class:`Tagged`."""
        return self._tagged

    @property
    def limits(self) -> DeliveryLimits:
        """The handle's bounds."""
        return DeliveryLimits(
            max_entries=self._max_entries,
            max_message_bytes=self._max_bytes,
            tagged=self._tagged,
        )

    @property
    def fenced(self) -> bool:
        """Whether the handle refused an item and now admits nothing but one terminal notice."""
        return self._fenced

    @property
    def closed(self) -> bool:
        """Whether the handle was closed or replaced."""
        return self._closed

    def topics(self) -> tuple[str, ...]:
        """The topics this handle is currently subscribed to (on any bus)."""
        return tuple(sorted({sub.topic for sub in self._subscriptions}))

    # -- producer side -----------------------------------------------------------------------

    def offer(self, item: Any, *, terminal: bool | None = None) -> bool:
        """Admit ``item`` (measured here) or refuse it; never waits on the consumer.

        ``terminal`` defaults to whether ``item`` is an :class:`Event` of a terminal type.
        Returns whether the item itself was queued (a terminal item turned into a compact notice
        after the fence counts as not queued).
        """
        if terminal is None:
            terminal = type(item) is Event and item.type in TERMINAL_EVENT_TYPES
        return self._admit(item, measure(item), terminal)

    def _admit(self, item: Any, size: int, terminal: bool) -> bool:
        if self._fenced or self._closed:
            self._refuse_after_fence(item, size, terminal)
            return False
        lock = self._lock
        if not lock.acquire(False):
            self._refuse_contended(item, size, terminal)
            return False
        raced = admitted = False
        try:
            queue = self._queue
            if self._shut():
                raced = True  # fenced or closed between the unlocked check and the lock
            elif size > self._max_bytes:
                self._fence_locked(OverflowReason.BYTES, item, size, terminal)
            elif len(queue) >= self._max_entries:
                self._fence_locked(OverflowReason.ENTRIES, item, size, terminal)
            else:
                queue.append((item, size))
                self._admitted += 1
                self._bytes_in += size
                admitted = True
        finally:
            lock.release()
        if not admitted:
            if raced:
                self._refuse_after_fence(item, size, terminal)
            return False
        waiter = self._waiter
        if waiter is not None:
            self._wake(waiter)
        return True

    def _shut(self) -> bool:
        # A method (not an inline test) because another thread may have changed the flags.
        return self._fenced or self._closed

    def _fence_locked(self, reason: OverflowReason, item: Any, size: int, terminal: bool) -> None:
        # Caller holds the admission lock and the handle is open and not fenced.
        self._fenced = True
        self._overflow_reason = reason
        self._refused += 1
        marker = Overflow(epoch=self._epoch, reason=reason)
        control_size = measure(marker)
        self._queue.append((marker, control_size))
        self._bytes_in += control_size
        if terminal:
            self._queue_terminal_locked(item, size)
        waiter = self._waiter
        if waiter is not None:
            self._wake(waiter)

    def _queue_terminal_locked(self, item: Any, size: int) -> None:
        if self._terminal_used:
            return
        self._terminal_used = True
        meta = item.meta if type(item) is Event else {}
        payload = item.payload if type(item) is Event else None
        event_type = item.type if type(item) is Event else type(item).__name__
        run_id = meta.get("run_id") or _payload_run_id(payload)
        notice = TerminalNotice(
            epoch=self._epoch,
            event_type=event_type,
            run_id=run_id if isinstance(run_id, str) else None,
            session_key=_str_or_none(meta.get("session_key")),
            event=item if type(item) is Event and size <= TERMINAL_NOTICE_MAX_BYTES else None,
        )
        control_size = measure(notice)
        if control_size > TERMINAL_NOTICE_MAX_BYTES:
            # Compact means compact: drop the event (and over-long ids) rather than the notice.
            notice = TerminalNotice(epoch=self._epoch, event_type=event_type[:64])
            control_size = measure(notice)
        self._queue.append((notice, control_size))
        self._bytes_in += control_size

    def _refuse_contended(self, item: Any, size: int, terminal: bool) -> None:
        self._contended += 1
        # Another producer holds the lock for O(1) work; take it only to fence (once per
        # handle), never to queue the refused item.
        with _Held(self._lock):
            if self._closed:
                self._refused += 1
            elif self._fenced:
                self._refused += 1
                if terminal:
                    self._queue_terminal_locked(item, size)
            else:
                self._fence_locked(OverflowReason.CONTENDED, item, size, terminal)

    def _refuse_after_fence(self, item: Any, size: int, terminal: bool) -> None:
        if terminal and not self._terminal_used and not self._closed:
            with _Held(self._lock):
                if not self._closed:
                    self._queue_terminal_locked(item, size)
                    waiter = self._waiter
                    if waiter is not None:
                        self._wake(waiter)
        self._refused += 1

    def _wake(self, waiter: asyncio.Future[None]) -> None:
        if threading.get_ident() == self._waiter_thread:
            if not waiter.done():
                waiter.set_result(None)
        elif not self._wake_sent:
            self._wake_sent = True
            # A closed consumer loop raises RuntimeError: nobody is waiting any more.
            with contextlib.suppress(RuntimeError):
                waiter.get_loop().call_soon_threadsafe(_release_waiter, waiter)

    # -- consumer side -----------------------------------------------------------------------

    def get_nowait(self) -> Any:
        """The next item, or raise ``asyncio.QueueEmpty`` (``DeliveryClosedError`` if closed)."""
        queue = self._queue
        if queue:
            item, size = queue.popleft()
            self._bytes_out += size
            self._delivered += 1
            if self._tagged and type(item) not in _CONTROLS:
                return Tagged(epoch=self._epoch, item=item)
            return item
        if self._closed:
            raise DeliveryClosedError(
                f"delivery handle (epoch {self._epoch}) is closed; use its replacement"
            )
        raise asyncio.QueueEmpty

    async def get(self) -> Any:
        """Wait for the next item: data (``Tagged`` if tagged), ``Overflow`` or
        ``TerminalNotice``. Raises ``DeliveryClosedError`` once the handle is closed."""
        while True:
            try:
                return self.get_nowait()
            except asyncio.QueueEmpty:
                pass
            if self._waiter is not None:
                raise RuntimeError("a delivery handle has one consumer; get() is already waiting")
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiter_thread = threading.get_ident()
            self._wake_sent = False
            self._waiter = waiter
            try:
                if self._queue or self._closed:
                    continue
                await waiter
            finally:
                self._waiter = None

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        while True:
            try:
                item = await self.get()
            except DeliveryClosedError:
                return
            yield item

    def accepts(self, item: Any) -> bool:
        """Whether ``item`` (a ``Tagged`` item or a control) belongs to this handle's epoch."""
        epoch = getattr(item, "epoch", None)
        return isinstance(item, Tagged | Overflow | TerminalNotice) and epoch == self._epoch

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Release every subscription and the queued items; a waiting ``get()`` raises."""
        if self._closed:
            return
        with _Held(self._lock):
            self._closed = True
            self._bytes_out += sum(size for _item, size in self._queue)
            self._queue.clear()
        for subscription in list(self._subscriptions):
            subscription.cancel()
        self._subscriptions.clear()
        if self._owner is not None:
            self._owner.remove_done_callback(self._on_owner_done)
            self._owner = None
        waiter = self._waiter
        if waiter is not None:
            self._wake(waiter)
        if self._closed_event is not None:
            self._closed_event.set()

    async def wait_closed(self) -> None:
        """Return once the handle is closed (by close, replace or its owner task ending)."""
        if self._closed:
            return
        if self._closed_event is None:
            self._closed_event = asyncio.Event()
        await self._closed_event.wait()

    def replace(self) -> Delivery:
        """A fresh handle with the same bounds and a newer epoch, subscribed to the same topics
        (before this one is released, so nothing published meanwhile is missed by both); then
        this handle is closed. The consumer then re-reads authority."""
        replacement = Delivery(
            max_entries=self._max_entries,
            max_message_bytes=self._max_bytes,
            tagged=self._tagged,
            owner=self._owner,
            bind_current_task=False,
        )
        for subscription in list(self._subscriptions):
            subscription.bus.subscribe(subscription.topic, delivery=replacement)
        self.close()
        return replacement

    def _on_owner_done(self, _task: asyncio.Task[Any]) -> None:
        self._owner = None
        self.close()

    def _attach(self, subscription: Subscription) -> None:
        if self._closed:
            raise DeliveryClosedError(
                f"cannot subscribe a closed delivery handle (epoch {self._epoch}); "
                f"use its replacement or a new handle"
            )
        self._subscriptions[subscription] = None

    def _detach(self, subscription: Subscription) -> None:
        self._subscriptions.pop(subscription, None)

    # -- statistics --------------------------------------------------------------------------

    def statistics(self) -> DeliveryStatistics:
        """A snapshot of the handle's counters (``queued``/``bytes`` are current contents)."""
        return DeliveryStatistics(
            epoch=self._epoch,
            tagged=self._tagged,
            max_entries=self._max_entries,
            max_message_bytes=self._max_bytes,
            admitted=self._admitted,
            refused=self._refused,
            contended=self._contended,
            delivered=self._delivered,
            queued=len(self._queue),
            bytes=max(0, self._bytes_in - self._bytes_out),
            fenced=self._fenced,
            overflow_reason=self._overflow_reason,
            terminal_reserved=not self._terminal_used,
            closed=self._closed,
            topics=self.topics(),
        )

    def __repr__(self) -> str:
        state = "closed" if self._closed else "fenced" if self._fenced else "open"
        return (
            f"<Delivery epoch={self._epoch} {state} queued={len(self._queue)}"
            f"/{self._max_entries} max_message_bytes={self._max_bytes}>"
        )


class _Held:
    """``with _Held(lock)``: a blocking acquire for the O(1) fence/close sections."""

    __slots__ = ("_lock",)

    def __init__(self, lock: AdmissionLock) -> None:
        self._lock = lock

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(self, *_exc: object) -> None:
        self._lock.release()


def _release_waiter(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _payload_run_id(payload: Any) -> str | None:
    run_id = getattr(payload, "run_id", None)
    if run_id is None:
        completed = getattr(payload, "completed", None)
        run_id = getattr(completed, "run_id", None)
    if run_id is None and isinstance(payload, Mapping):
        run_id = payload.get("run_id")
    return _str_or_none(run_id)


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
