"""Bounded delivery: a handle that admits items before they are queued, and fences on overflow.

Guarantees (per handle):

* **Admission before queueing.** An item is queued only if the queue holds fewer than
  ``max_entries`` items and the item's size (encoded JSON plus the excess backing of retained
  buffer views, see :func:`lemon_core.bus.measure`) is at most ``max_message_bytes``.
* **Serialised, never waiting on the consumer.** Producers serialise admission on a lock the
  consumer never takes to read. A producer that finds another producer admitting waits for it
  at most ``contention_timeout`` seconds (default :data:`CONTENTION_TIMEOUT_S`; the holder's
  section is O(1), so the wait only covers a holder the GIL or the OS preempted). A producer
  whose wait runs out is refused and counted as overflow (``contended``), and the fence it
  requests is applied by the lock's holder as it leaves. No producer ever waits on the
  consumer; with ``contention_timeout=0`` none waits on another producer either.
* **Fence on first refusal.** The first refused item fences the handle for good and queues
  exactly one small :class:`Overflow` marker. Beside it, room for at most one compact
  :class:`TerminalNotice` is reserved, so a run's completion still reaches the consumer after
  overflow. Nothing else is admitted after the fence. The consumer recovers by calling
  :meth:`Delivery.replace` and re-reading authority.
* **Hard bound.** A handle never holds more than ``max_entries + 2`` items, and never more than
  ``max_entries * max_message_bytes`` bytes of data plus the two compact controls.
* **Ownership and release.** A handle is owned by the consumer that reads it: the first task
  that awaits :meth:`get` (or iterates the handle) claims it, unless a task claimed it first
  with :meth:`claim` or was given as ``owner``. A task that exists only to run one ``get()``
  (``asyncio.ensure_future(handle.get())``, ``asyncio.wait_for`` on 3.11, ``gather``) never
  claims: it is a helper of the consumer, not the consumer. The task that *creates* a handle
  does not own it. :meth:`close`, :meth:`replace` (the replacement keeps the owner), or the end
  of the owner task releases every subscription and the queued items.
* **Closed signal.** A consumer waiting in :meth:`get` wakes when the handle closes, and when
  the last bus it is subscribed to closes (:meth:`Bus.close <lemon_core.bus.Bus.close>`): it
  then reads what is still queued and gets ``DeliveryClosedError`` (``async for`` ends).
* **Wake-up.** A consumer parked in :meth:`get` is woken by every admission that happens after
  it parked, from any thread: a cross-thread wake is sent once per wait, and whether it was
  sent is recorded against that wait's own future, so a producer delayed with an old wait in
  hand can never mark a newer wait as already woken.
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
import types
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from lemon_core.bus._measure import measure
from lemon_core.errors import DeliveryClosedError, LifecycleError, UsageError
from lemon_core.events.envelope import Event

if TYPE_CHECKING:
    from lemon_core.bus.bus import Subscription

__all__ = [
    "CONTENTION_TIMEOUT_S",
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

#: How long a producer waits by default for another producer's O(1) admission section before
#: treating the contention as overflow. The wait covers a holder preempted by the GIL (a 5 ms
#: switch interval; a thread woken with the lock may still wait for the GIL, and several threads
#: hand the lock around) or briefly by the OS on a loaded machine; it never covers a consumer.
CONTENTION_TIMEOUT_S = 0.1

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
    RESYNC = "resync"


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
_OPEN, _FENCED, _CLOSED = 0, 1, 2


class Delivery:
    """A bounded, fencing delivery handle (see the module docstring).

    One handle may serve several topics and several buses; it has one consumer, which reads with
    ``await handle.get()`` or ``async for item in handle``. Producers call :meth:`offer` (the
    Bus does this for its subscribers) from any thread.
    """

    __slots__ = (
        "__weakref__",
        "_adoptable",
        "_claim_on_get",
        "_closed_event",
        "_contended",
        "_contention_timeout",
        "_discarded",
        "_discarded_controls",
        "_epoch",
        "_fence_request",
        "_limit",
        "_lock",
        "_lock_owner",
        "_max_bytes",
        "_max_entries",
        "_overflow_reason",
        "_owner",
        "_pending",
        "_pending_terminal",
        "_queue",
        "_refused",
        "_refused_unlocked",
        "_state",
        "_subscriptions",
        "_tagged",
        "_taken",
        "_taken_controls",
        "_terminal_used",
        "_waiter",
        "_waiter_thread",
        "_woken",
    )

    def __init__(
        self,
        *,
        max_entries: int = 256,
        max_message_bytes: int = 1_048_576,
        tagged: bool = False,
        owner: asyncio.Task[Any] | None = None,
        bind_current_task: bool = True,
        claim_on_get: bool | None = None,
        lock: AdmissionLock | None = None,
        contention_timeout: float = CONTENTION_TIMEOUT_S,
    ) -> None:
        """``owner``: the task whose end releases the handle (default: the first task that
        awaits ``get()``; see the module docstring). ``claim_on_get=False`` (or the older
        spelling ``bind_current_task=False``) turns that first-reader claim off: the handle is
        then released only by ``close``/``replace`` or an explicit :meth:`claim`.
        ``contention_timeout``: seconds a producer waits for another producer's admission
        before the contention counts as overflow (``0``: never wait)."""
        if not _positive_int(max_entries):
            raise UsageError(f"max_entries must be a positive int, got {max_entries!r}")
        if not _positive_int(max_message_bytes):
            raise UsageError(f"max_message_bytes must be a positive int, got {max_message_bytes!r}")
        if not _non_negative_number(contention_timeout):
            raise UsageError(
                f"contention_timeout must be a number of seconds >= 0, got {contention_timeout!r}"
            )
        self._max_entries = max_entries
        self._max_bytes = max_message_bytes
        self._contention_timeout = float(contention_timeout)
        self._tagged = tagged
        self._epoch = next(_epochs)
        self._lock: AdmissionLock = threading.Lock() if lock is None else lock
        # A handle with the default lock may adopt the lock of the first bus it joins (before
        # any producer used it): that bus then admits it under one lock per publication
        # instead of one per handle. Whoever else produces into it takes the same lock.
        self._adoptable = lock is None
        self._lock_owner: _PendingSink | None = None
        # The queue length below which the bus's fast path may append without looking at
        # anything else: max_entries while open with no control requested, else 0 (fenced,
        # closed, or a fence requested), which sends every producer to the full path.
        self._limit = max_entries
        # Entries are (item, size) tuples; the Bus shares one tuple among all its subscribers.
        self._queue: deque[tuple[Any, int]] = deque()
        self._state = _OPEN
        self._overflow_reason: OverflowReason | None = None
        self._terminal_used = False
        # Requests from producers that found the lock taken, applied by the next holder.
        self._pending = False
        self._fence_request: OverflowReason | None = None
        self._pending_terminal: tuple[Any, int] | None = None
        # Counters. The admission fast path updates none: admitted data is derived from what
        # the consumer took, what close() discarded and what is still queued.
        self._refused = 0
        self._refused_unlocked = 0  # refusals counted without the lock (see statistics())
        self._contended = 0
        self._taken = 0
        self._taken_controls = 0
        self._discarded = 0
        self._discarded_controls = 0
        self._waiter: asyncio.Future[None] | None = None
        self._waiter_thread = 0
        # The wait a cross-thread wake was last scheduled for. Compared by identity: a producer
        # holding an old wait can only ever mark that old wait, never the current one.
        self._woken: asyncio.Future[None] | None = None
        self._subscriptions: dict[Subscription, None] = {}
        self._closed_event: asyncio.Event | None = None
        self._claim_on_get = bind_current_task if claim_on_get is None else claim_on_get
        self._owner: asyncio.Task[Any] | None = None
        if owner is not None:
            self.claim(owner)

    @classmethod
    def for_consumer(cls, consumer: ConsumerClass | str, **overrides: Any) -> Delivery:
        """A handle with the named defaults of ``consumer`` (keyword ``overrides`` win)."""
        try:
            limits = DELIVERY_DEFAULTS[ConsumerClass(consumer)]
        except ValueError:
            known = ", ".join(c.value for c in ConsumerClass)
            raise UsageError(f"unknown consumer class {consumer!r}; known: {known}") from None
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
        return self._overflow_reason is not None

    @property
    def closed(self) -> bool:
        """Whether the handle was closed or replaced."""
        return self._state == _CLOSED

    @property
    def owner(self) -> asyncio.Task[Any] | None:
        """The task whose end releases this handle, if one has claimed it."""
        return self._owner

    def topics(self) -> tuple[str, ...]:
        """The topics this handle is currently subscribed to (on any bus)."""
        return tuple(sorted({sub.topic for sub in self._subscriptions}))

    # -- ownership ---------------------------------------------------------------------------

    def claim(self, task: asyncio.Task[Any] | None = None) -> Delivery:
        """Make ``task`` (default: the current task) the owner: its end releases the handle.

        Ownership moves from any previous owner. Consumers that hand reading to helper tasks
        call this once from the task that lives as long as the consumption. Returns the handle.
        """
        if self._state == _CLOSED:
            raise DeliveryClosedError(
                f"cannot claim a closed delivery handle (epoch {self._epoch}); use its "
                f"replacement or a new handle"
            )
        if task is None:
            task = asyncio.current_task()
            if task is None:
                raise LifecycleError("Delivery.claim() needs a task: call it from a coroutine")
        previous = self._owner
        if previous is task:
            return self
        if previous is not None:
            previous.remove_done_callback(self._on_owner_done)
        self._owner = task
        if task.done():
            self._on_owner_done(task)
        else:
            task.add_done_callback(self._on_owner_done)
        return self

    def _claim_by_reader(self) -> None:
        # The first task that awaits get() owns the handle, unless it is only a wrapper running
        # that one get() (ensure_future / wait_for / gather of handle.get()).
        task = asyncio.current_task()
        if task is None or _is_read_wrapper(task):
            return
        self.claim(task)

    # -- producer side -----------------------------------------------------------------------

    def offer(self, item: Any, *, terminal: bool | None = None) -> bool:
        """Admit ``item`` (measured here) or refuse it; never waits on the consumer.

        ``terminal`` defaults to whether ``item`` is an :class:`Event` of a terminal type.
        Returns whether the item itself was queued (a terminal item turned into a compact notice
        after the fence counts as not queued).
        """
        if terminal is None:
            terminal = type(item) is Event and item.type in TERMINAL_EVENT_TYPES
        size = measure(item)
        return self._admit((item, size), size, terminal)

    def _admit(self, entry: tuple[Any, int], size: int, terminal: bool) -> bool:
        # The full path (the Bus's own fast path is in Bus._deliver): one state test, one
        # non-blocking lock, two bound checks, one append.
        self._adoptable = False
        state = self._state
        if state:
            self._refuse(entry, size, terminal)
            return False
        lock = self._lock
        if not lock.acquire(False) and not (
            self._contention_timeout and lock.acquire(True, self._contention_timeout)
        ):
            self._refuse_contended(entry, terminal)
            return False
        if lock is not self._lock:  # a bus adopted the handle meanwhile: use its lock
            lock.release()
            return self._admit(entry, size, terminal)
        try:
            if self._pending:
                self._apply_pending_locked()
            state = self._state
            queue = self._queue
            if not state and size <= self._max_bytes and len(queue) < self._max_entries:
                queue.append(entry)
                admitted = True
            else:
                admitted = False
                if not state:
                    reason = (
                        OverflowReason.BYTES if size > self._max_bytes else OverflowReason.ENTRIES
                    )
                    self._fence_locked(reason)
                else:
                    self._refused += 1
                if terminal:
                    self._queue_terminal_locked(entry[0], size)
        finally:
            lock.release()
        if self._pending:
            self._settle()
        waiter = self._waiter
        if waiter is not None and not waiter.done():  # a done wait is woken already
            self._wake(waiter)
        return admitted

    def fence(self, reason: OverflowReason = OverflowReason.RESYNC) -> None:
        """Fence the handle now (one ``Overflow`` marker with ``reason``), as an overflow
        would: publications meant for it may have been lost upstream (a bus backend's outage
        or gap), so its consumer must replace it and re-read authority. Never waits (applied
        by whoever holds the admission lock next); a fenced or closed handle is left as is.
        Safe from any thread."""
        if self._state:
            return
        if self._fence_request is None:
            self._fence_request = reason
        self._limit = 0
        self._pending = True
        self._notify_lock_owner()
        self._settle()

    def _fence_locked(self, reason: OverflowReason) -> None:
        # Caller holds the admission lock and the handle is open: fence it for good and queue
        # the one marker.
        self._state = _FENCED
        self._limit = 0
        if self._overflow_reason is None:
            self._overflow_reason = reason
        self._refused += 1
        marker = Overflow(epoch=self._epoch, reason=self._overflow_reason)
        self._queue.append((marker, measure(marker)))

    def _queue_terminal_locked(self, item: Any, size: int) -> None:
        if self._terminal_used or self._state == _CLOSED:
            return
        self._terminal_used = True
        is_event = type(item) is Event
        meta = item.meta if is_event else {}
        run_id = meta.get("run_id") or _payload_run_id(item.payload if is_event else item)
        event_type = item.type if is_event else type(item).__name__
        notice = TerminalNotice(
            epoch=self._epoch,
            event_type=event_type,
            run_id=_str_or_none(run_id),
            session_key=_str_or_none(meta.get("session_key")),
            event=item if is_event and size <= TERMINAL_NOTICE_MAX_BYTES else None,
        )
        notice_size = measure(notice)
        if notice_size > TERMINAL_NOTICE_MAX_BYTES:
            # Compact means compact: drop the event (and over-long ids) rather than the notice.
            notice = TerminalNotice(epoch=self._epoch, event_type=event_type[:64])
            notice_size = measure(notice)
        self._queue.append((notice, notice_size))

    def _refuse_contended(self, entry: tuple[Any, int], terminal: bool) -> None:
        # Another producer is admitting. Do not wait for it: the item is refused and counted as
        # overflow, and the fence (with its marker, and the terminal notice if this item is
        # terminal) is requested; whoever holds the lock next applies it (see _settle).
        self._contended += 1
        self._refused_unlocked += 1
        if self._fence_request is None:
            self._fence_request = OverflowReason.CONTENDED
        if terminal and self._pending_terminal is None:
            self._pending_terminal = entry
        self._limit = 0
        self._pending = True
        self._notify_lock_owner()
        self._settle()

    def _refuse(self, entry: tuple[Any, int], size: int, terminal: bool) -> None:
        # Fenced or closed: count the refusal; a first terminal item still gets its compact
        # notice into the reserved slot. Never waits for another producer.
        lock = self._lock
        if lock.acquire(False):
            try:
                if self._pending:
                    self._apply_pending_locked()
                self._refused += 1
                if terminal:
                    self._queue_terminal_locked(entry[0], size)
            finally:
                lock.release()
        else:
            self._refused_unlocked += 1
            if terminal and not self._terminal_used and self._pending_terminal is None:
                self._pending_terminal = entry
                self._pending = True
                self._notify_lock_owner()
        if self._pending:
            self._settle()
        if terminal:
            self._wake_if_waiting()

    def _notify_lock_owner(self) -> None:
        # The lock may be a bus's (adopted): that bus settles its handles after each fan-out.
        owner = self._lock_owner
        if owner is not None:
            owner._pending_settle = True

    def _settle(self) -> None:
        # Apply requested controls if the lock is free. If it is not, its holder settles right
        # after releasing it (it tests _pending), so a request is never stranded.
        lock = self._lock
        while self._pending and lock.acquire(False):
            try:
                self._apply_pending_locked()
            finally:
                lock.release()
        self._wake_if_waiting()

    def _apply_pending_locked(self) -> None:
        self._pending = False
        pending_terminal, self._pending_terminal = self._pending_terminal, None
        if self._state == _CLOSED:
            return
        reason = self._fence_request
        if reason is not None and self._state == _OPEN:
            self._fence_locked(reason)
            self._refused -= 1  # the refusal was already counted by the contended producer
        if pending_terminal is not None:
            self._queue_terminal_locked(pending_terminal[0], pending_terminal[1])

    def _wake_if_waiting(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._wake(waiter)

    def _wake(
        self,
        waiter: asyncio.Future[None],
        batch: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] | None = None,
    ) -> None:
        # ``waiter`` was read from self._waiter by the caller, possibly long ago (a preempted
        # producer thread): it may be an old wait. Marking *that* future as woken never
        # suppresses the wake of a newer one. With ``batch`` (a bus fan-out), cross-thread
        # wakes are collected per consumer loop and sent with one call each (_send_wakes).
        if threading.get_ident() == self._waiter_thread:
            if not waiter.done():
                waiter.set_result(None)
        elif self._woken is not waiter:
            self._woken = waiter
            if batch is not None:
                batch.setdefault(waiter.get_loop(), []).append(waiter)
                return
            # A closed consumer loop raises RuntimeError: nobody is waiting any more.
            with contextlib.suppress(RuntimeError):
                waiter.get_loop().call_soon_threadsafe(_release_waiter, waiter)

    # -- consumer side -----------------------------------------------------------------------

    def get_nowait(self) -> Any:
        """The next item, or raise ``asyncio.QueueEmpty`` (``DeliveryClosedError`` if closed)."""
        queue = self._queue
        if queue:
            item = queue.popleft()[0]
            if type(item) in _CONTROLS:
                self._taken_controls += 1
                return item
            self._taken += 1
            if self._tagged:
                return Tagged(epoch=self._epoch, item=item)
            return item
        if self._state == _CLOSED:
            raise DeliveryClosedError(
                f"delivery handle (epoch {self._epoch}) is closed; use its replacement"
            )
        raise asyncio.QueueEmpty

    async def get(self) -> Any:
        """Wait for the next item: data (``Tagged`` if tagged), ``Overflow`` or
        ``TerminalNotice``. Raises ``DeliveryClosedError`` once the handle is closed.

        The first task to call this (unless it only runs this one call) claims the handle."""
        if self._owner is None and self._claim_on_get:
            self._claim_by_reader()
        while True:
            try:
                return self.get_nowait()
            except asyncio.QueueEmpty:
                pass
            if self._waiter is not None:
                raise LifecycleError("a delivery handle has one consumer; get() is already waiting")
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiter_thread = threading.get_ident()
            self._waiter = waiter
            try:
                # Re-test after publishing the waiter: a producer that appended before seeing
                # it will not wake us.
                if self._queue or self._state == _CLOSED:
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
        if isinstance(item, Tagged | Overflow | TerminalNotice):
            return item.epoch == self._epoch
        return False

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Release every subscription and the queued items; a waiting ``get()`` raises."""
        if self._state == _CLOSED and not self._queue:
            return
        self._end(discard=True)

    def _end(self, *, discard: bool) -> None:
        # Closed for admission; the queue is released (close) or left to drain (the last bus
        # closed: the consumer reads what it was sent, then gets the closed signal).
        with _Held(self._lock):
            self._state = _CLOSED
            self._limit = 0
            if discard:
                controls = sum(1 for item, _size in self._queue if type(item) in _CONTROLS)
                self._discarded_controls += controls
                self._discarded += len(self._queue) - controls
                self._queue.clear()
        for subscription in list(self._subscriptions):
            subscription.cancel()
        self._subscriptions.clear()
        if self._owner is not None:
            self._owner.remove_done_callback(self._on_owner_done)
            self._owner = None
        self._wake_if_waiting()
        if self._closed_event is not None:
            self._closed_event.set()

    async def wait_closed(self) -> None:
        """Return once the handle is closed (by close, replace or its owner task ending)."""
        if self._state == _CLOSED:
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
            claim_on_get=self._claim_on_get,
            contention_timeout=self._contention_timeout,
        )
        for subscription in list(self._subscriptions):
            subscription.bus.subscribe(subscription.topic, delivery=replacement)
        self.close()
        return replacement

    def _on_owner_done(self, _task: asyncio.Task[Any]) -> None:
        self._owner = None
        self.close()

    def _attach(self, subscription: Subscription, lock: AdmissionLock, owner: _PendingSink) -> bool:
        """Record ``subscription``; adopt the bus's ``lock`` if this handle never admitted
        anything and serves no other subscription. Returns whether the handle's lock is now
        ``lock`` (the bus may then admit it under its own lock)."""
        if self._state == _CLOSED:
            raise DeliveryClosedError(
                f"cannot subscribe a closed delivery handle (epoch {self._epoch}); "
                f"use its replacement or a new handle"
            )
        if self._adoptable and not self._subscriptions:
            self._adoptable = False
            self._lock = lock
            self._lock_owner = owner
        self._subscriptions[subscription] = None
        return self._lock is lock

    def _detach(self, subscription: Subscription) -> None:
        self._subscriptions.pop(subscription, None)

    def _bus_closed(self) -> None:
        # A bus this handle was subscribed to closed. With no subscription left on any bus
        # nothing can arrive any more: end the handle so a waiting consumer wakes.
        if not self._subscriptions and self._state != _CLOSED:
            self._end(discard=False)

    # -- statistics --------------------------------------------------------------------------

    def statistics(self) -> DeliveryStatistics:
        """A snapshot of the handle's counters; ``queued`` and ``bytes`` (data and controls,
        charged as admitted) describe what the handle holds now."""
        entries = list(self._queue)
        queued_controls = sum(1 for item, _size in entries if type(item) in _CONTROLS)
        return DeliveryStatistics(
            epoch=self._epoch,
            tagged=self._tagged,
            max_entries=self._max_entries,
            max_message_bytes=self._max_bytes,
            admitted=self._taken + self._discarded + len(entries) - queued_controls,
            refused=self._refused + self._refused_unlocked,
            contended=self._contended,
            delivered=self._taken + self._taken_controls,
            queued=len(entries),
            bytes=sum(size for _item, size in entries),
            fenced=self._overflow_reason is not None,
            overflow_reason=self._overflow_reason,
            terminal_reserved=not self._terminal_used,
            closed=self._state == _CLOSED,
            topics=self.topics(),
        )

    def __repr__(self) -> str:
        state = ("open", "fenced", "closed")[self._state]
        return (
            f"<Delivery epoch={self._epoch} {state} queued={len(self._queue)}"
            f"/{self._max_entries} max_message_bytes={self._max_bytes}>"
        )


class _PendingSink(Protocol):
    """What owns an adopted lock: told when a producer left a request for its holder."""

    _pending_settle: bool


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


def _release_waiters(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)


def _send_wakes(batch: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]]) -> None:
    """One ``call_soon_threadsafe`` per consumer loop for the wakes a fan-out collected."""
    for loop, waiters in batch.items():
        # A closed consumer loop raises RuntimeError: nobody is waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_release_waiters, waiters)


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


def _non_negative_number(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and value >= 0
        and value != float("inf")
    )


def _is_read_wrapper(task: asyncio.Task[Any]) -> bool:
    code = getattr(task.get_coro(), "cr_code", None)
    return code is not None and code in _READ_CODES


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


# The coroutines whose task, when it runs nothing else, is a helper of the consumer.
_READ_CODES: frozenset[types.CodeType] = frozenset({Delivery.get.__code__})


def _register_read_coroutine(code: types.CodeType) -> None:
    """Treat tasks that run only ``code`` (e.g. ``Subscription.get``) as read helpers."""
    global _READ_CODES
    _READ_CODES = _READ_CODES | {code}
