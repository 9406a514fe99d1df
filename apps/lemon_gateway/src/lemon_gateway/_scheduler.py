"""Scheduler: a global pool of run slots, granted per conversation key.

Guarantees:

* At most ``max_concurrent_runs`` slots are held at once, and at most one per key.
* Waiters are served in FIFO order of their *ticket*. A re-request that carries its
  original ticket keeps its place, so a waiter that times out and retries is not sent to
  the back.
* Every request carries a generation token (per key, strictly increasing). A newer request
  supersedes an older one; :meth:`Scheduler.cancel` withdraws a generation (returning its
  slot if it was already granted); a grant or release for a stale generation is ignored
  and counted.
* :meth:`Scheduler.expire_waiters` times waiters out: their future resolves to ``None``
  and the waiter is expected to cancel that generation and request again with a new one
  (keeping its ticket). The gateway calls it periodically; tests call it directly. Until
  it does, its place is *reserved*: a slot released meanwhile (even in the same loop turn)
  is not given to a later waiter or a newcomer. Cancelling a reserved place hands it on one
  loop turn later, so the usual "cancel, then request again" keeps the place, and a waiter
  that dies instead releases it.

The scheduler is loop-only and never awaits: state changes are synchronous. A waiter's
future is only ever *resolved* by the scheduler (a grant, or ``None`` meaning "expired,
superseded or stale: request again"), never cancelled, so a CancelledError in the waiter
always means the waiter itself was cancelled.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Hashable
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["HeldSlot", "Scheduler", "SchedulerStatistics", "SlotGrant", "SlotWaiter"]


def _resolve(future: asyncio.Future[SlotGrant | None], value: SlotGrant | None) -> None:
    if not future.done():
        future.set_result(value)


class SlotGrant(NamedTuple):
    """A granted slot: which key, for which generation, and its unique id (immutable)."""

    key: Hashable
    generation: int
    slot_id: int


@dataclass(frozen=True, kw_only=True, slots=True)
class HeldSlot:
    """A slot in flight: its key and generation, and for how long it has been held."""

    key: Hashable
    generation: int
    slot_id: int
    held_s: float


@dataclass(frozen=True, kw_only=True, slots=True)
class SlotWaiter:
    """A waiter for a slot, with its FIFO ticket; ``reserved`` once it has timed out and its
    place is kept for its re-request."""

    key: Hashable
    generation: int
    ticket: int
    reserved: bool
    waited_s: float


@dataclass(frozen=True, kw_only=True, slots=True)
class SchedulerStatistics:
    """A snapshot of the slot pool: bounds, slots in flight, waiters in FIFO order, counters."""

    max_concurrent_runs: int
    in_flight: int
    waiting: int
    max_waiters: int
    generations_tracked: int
    slots: tuple[HeldSlot, ...]
    waiters: tuple[SlotWaiter, ...]
    granted: int
    released: int
    cancelled: int
    superseded: int
    expired: int
    stale_releases: int
    stale_requests: int


@dataclass(slots=True)
class _Waiter:
    key: Hashable
    generation: int
    ticket: int
    future: asyncio.Future[SlotGrant | None]
    since: float
    expired: bool = False


@dataclass(slots=True)
class _Held:
    grant: SlotGrant
    since: float


class Scheduler:
    """The slot pool. See the module docstring for the guarantees."""

    def __init__(self, max_concurrent_runs: int = 2, *, max_waiters: int = 100_000) -> None:
        if max_concurrent_runs < 1:
            raise ValueError(f"max_concurrent_runs must be >= 1, got {max_concurrent_runs}")
        self.max_concurrent_runs = max_concurrent_runs
        self.max_waiters = max_waiters
        self._held: dict[Hashable, _Held] = {}
        self._waiters: dict[Hashable, _Waiter] = {}
        self._heap: list[tuple[int, int, Hashable]] = []  # (ticket, generation, key), lazy
        self._latest_gen: dict[Hashable, int] = {}
        self._tickets = itertools.count(1)
        self._slot_ids = itertools.count(1)
        self.granted = 0
        self.released = 0
        self.stale_releases = 0
        self.stale_requests = 0
        self.superseded = 0
        self.cancelled = 0
        self.expired = 0

    # -- requests ------------------------------------------------------------------------

    def new_ticket(self) -> int:
        """A fresh FIFO position."""
        return next(self._tickets)

    def try_acquire(self, key: Hashable, generation: int) -> SlotGrant | None:
        """Grant at once if a slot is free, the key holds none and nobody waits; else None.

        Does not queue. Loop-only fast path.
        """
        if (
            len(self._held) < self.max_concurrent_runs
            and not self._waiters
            and key not in self._held
            and self._fresh(key, generation)
        ):
            return self._grant(key, generation)
        return None

    def request(
        self, key: Hashable, generation: int, *, ticket: int | None = None
    ) -> asyncio.Future[SlotGrant | None]:
        """Ask for a slot; the future resolves with the grant (or None: ask again).

        A request for a generation not newer than the key's latest is stale: its future
        resolves to None at once. An older waiting generation of the same key is
        superseded (its future resolves to None).
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[SlotGrant | None] = loop.create_future()
        if not self._fresh(key, generation):
            self.stale_requests += 1
            future.set_result(None)
            return future
        old = self._waiters.pop(key, None)
        if old is not None and not old.expired:
            self.superseded += 1
            _resolve(old.future, None)
        if ticket is None:
            ticket = self.new_ticket()
        if len(self._waiters) >= self.max_waiters:
            future.set_exception(
                OverflowError(
                    f"scheduler waiter bound {self.max_waiters} reached; raise "
                    "max_waiters or lower gateway.max_pending_runs"
                )
            )
            return future
        self._waiters[key] = _Waiter(key, generation, ticket, future, time.monotonic())
        heapq.heappush(self._heap, (ticket, generation, key))
        if len(self._held) < self.max_concurrent_runs:
            self._grant_waiters()
        return future

    def cancel(self, key: Hashable, generation: int) -> bool:
        """Withdraw ``generation``: drop its waiter, or return its slot if granted.

        Returns whether anything was withdrawn; a stale generation is ignored.
        """
        waiter = self._waiters.get(key)
        if waiter is not None and waiter.generation == generation:
            del self._waiters[key]
            self._compact()
            self._forget_generation(key)
            if waiter.expired:
                # A reserved place: hand it on next turn unless the waiter asks again now.
                self._grant_soon()
                return True
            _resolve(waiter.future, None)
            self.cancelled += 1
            return True
        held = self._held.get(key)
        if held is not None and held.grant.generation == generation:
            self.cancelled += 1
            self._release_held(key)
            return True
        self._forget_generation(key)
        return False

    def _forget_generation(self, key: Hashable) -> None:
        # A key with no slot and no waiter needs no fencing history (bounded state);
        # generations come from one counter, so a later request is always newer anyway.
        if key not in self._held and key not in self._waiters:
            self._latest_gen.pop(key, None)

    def release(self, grant: SlotGrant) -> bool:
        """Return a slot. A grant that is not the key's current one is ignored (stale)."""
        held = self._held.get(grant.key)
        if held is None or held.grant != grant:
            self.stale_releases += 1
            return False
        self.released += 1
        self._release_held(grant.key)
        return True

    def forget(self, key: Hashable) -> None:
        """Drop every trace of ``key`` (its owner is gone): waiter, slot and generation."""
        waiter = self._waiters.pop(key, None)
        if waiter is not None:
            _resolve(waiter.future, None)
        self._latest_gen.pop(key, None)
        if key in self._held:
            self._release_held(key)

    def expire_waiters(self, older_than_s: float) -> int:
        """Time out every waiter that has waited at least ``older_than_s``: its future
        resolves to None. Returns how many expired."""
        now = time.monotonic()
        expired = [
            w for w in self._waiters.values() if not w.expired and now - w.since >= older_than_s
        ]
        for w in expired:
            w.expired = True  # keeps its place (a reservation) until it asks again
            _resolve(w.future, None)
        self.expired += len(expired)
        return len(expired)

    def holds(self, key: Hashable) -> bool:
        """Whether ``key`` currently holds a slot."""
        return key in self._held

    # -- internals -----------------------------------------------------------------------

    def _fresh(self, key: Hashable, generation: int) -> bool:
        latest = self._latest_gen.get(key)
        if latest is not None and generation <= latest:
            return False
        self._latest_gen[key] = generation
        return True

    def _grant(self, key: Hashable, generation: int) -> SlotGrant:
        grant = SlotGrant(key=key, generation=generation, slot_id=next(self._slot_ids))
        self._held[key] = _Held(grant, time.monotonic())
        self.granted += 1
        return grant

    def _release_held(self, key: Hashable) -> None:
        del self._held[key]
        self._forget_generation(key)
        self._grant_waiters()

    def _grant_soon(self) -> None:
        try:
            asyncio.get_running_loop().call_soon(self._grant_waiters)
        except RuntimeError:  # no loop (a synchronous caller): nobody can ask again first
            self._grant_waiters()

    def _grant_waiters(self) -> None:
        if not self._heap:  # nobody waits (the common case on release): nothing to grant
            return
        skipped: list[tuple[int, int, Hashable]] = []
        reserved = 0
        while self._heap and len(self._held) + reserved < self.max_concurrent_runs:
            entry = heapq.heappop(self._heap)
            _, gen, key = entry
            waiter = self._waiters.get(key)
            if waiter is None or waiter.generation != gen:
                continue
            if waiter.expired:
                # Timed out and about to ask again: its slot is kept for it.
                reserved += 1
                skipped.append(entry)
                continue
            if waiter.future.done():
                # Its owner was cancelled while waiting: drop it.
                del self._waiters[key]
                continue
            if key in self._held:
                skipped.append(entry)
                continue
            del self._waiters[key]
            waiter.future.set_result(self._grant(key, gen))
        for entry in skipped:
            heapq.heappush(self._heap, entry)

    def _compact(self) -> None:
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._waiters):
            self._heap = [(w.ticket, w.generation, w.key) for w in self._waiters.values()]
            heapq.heapify(self._heap)

    def statistics(self) -> SchedulerStatistics:
        """Slots in flight with their generations, waiters in FIFO order, counters."""
        now = time.monotonic()
        waiters = sorted(self._waiters.values(), key=lambda w: w.ticket)
        return SchedulerStatistics(
            max_concurrent_runs=self.max_concurrent_runs,
            in_flight=len(self._held),
            waiting=len(self._waiters),
            max_waiters=self.max_waiters,
            generations_tracked=len(self._latest_gen),
            slots=tuple(
                HeldSlot(
                    key=h.grant.key,
                    generation=h.grant.generation,
                    slot_id=h.grant.slot_id,
                    held_s=round(now - h.since, 6),
                )
                for h in self._held.values()
            ),
            waiters=tuple(
                SlotWaiter(
                    key=w.key,
                    generation=w.generation,
                    ticket=w.ticket,
                    reserved=w.expired,
                    waited_s=round(now - w.since, 6),
                )
                for w in waiters
            ),
            granted=self.granted,
            released=self.released,
            cancelled=self.cancelled,
            superseded=self.superseded,
            expired=self.expired,
            stale_releases=self.stale_releases,
            stale_requests=self.stale_requests,
        )
