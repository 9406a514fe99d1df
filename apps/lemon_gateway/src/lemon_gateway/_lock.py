"""EngineLock: per-session mutual exclusion, as defence in depth (not a second queue).

Guarantees:

* One owner per key. Waiters are served FIFO.
* A live owner is never displaced, however long it holds the lock (there is no reaper).
  Ownership moves only on an explicit release or on *confirmed* owner death: the owner is
  an asyncio task, and the lock moves when that task is done.
* A waiter that dies (is cancelled) while waiting leaves the queue; a grant that races
  with its death is handed on, never leaked.
* Every lease carries a fencing token; releasing with an old lease is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import deque
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from lemon_gateway.errors import GatewayError

__all__ = ["EngineLock", "EngineLockStatistics", "LockLease", "LockOwner", "LockTimeoutError"]


class LockTimeoutError(GatewayError, TimeoutError):
    """The lock was not granted within the timeout."""


class LockLease:
    """Ownership of one key (with its fencing ``token``). :meth:`release` is idempotent."""

    __slots__ = ("_lock", "acquired_at", "key", "owner", "released", "token")

    def __init__(
        self,
        key: Hashable,
        token: int,
        owner: asyncio.Task[Any] | None,
        acquired_at: float,
        lock: EngineLock,
    ) -> None:
        self.key = key
        self.token = token
        self.owner = owner
        self.acquired_at = acquired_at
        self._lock = lock
        self.released = False

    def __repr__(self) -> str:
        return f"LockLease(key={self.key!r}, token={self.token}, released={self.released})"

    def _owner_done(self, _task: asyncio.Task[Any]) -> None:
        self._lock._on_owner_done(self)

    def release(self) -> bool:
        """Give the lock up; return whether this lease still held it."""
        if self.released:
            return False
        self.released = True
        return self._lock._release(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class LockOwner:
    """A held key: its fencing token, the owning task's name, and for how long it is held."""

    key: Hashable
    token: int
    owner: str | None
    held_s: float


@dataclass(frozen=True, kw_only=True, slots=True)
class EngineLockStatistics:
    """A snapshot of the lock: owners, waiters per key (by ``str(key)``), counters."""

    held: int
    owners: tuple[LockOwner, ...]
    waiters: Mapping[str, int]
    waiting: int
    acquired: int
    released: int
    owner_deaths: int
    stale_releases: int
    timeouts: int


@dataclass(slots=True)
class _Waiter:
    owner: asyncio.Task[Any] | None
    future: asyncio.Future[LockLease]
    since: float


class EngineLock:
    """Keyed FIFO mutex owned by tasks. See the module docstring."""

    def __init__(
        self, *, max_waiters_per_key: int = 10_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_waiters_per_key = max_waiters_per_key
        self._clock = clock  # for held times only: age never moves ownership
        self._owners: dict[Hashable, LockLease] = {}
        self._waiters: dict[Hashable, deque[_Waiter]] = {}
        self._tokens = itertools.count(1)
        self.acquired = 0
        self.released = 0
        self.owner_deaths = 0
        self.stale_releases = 0
        self.timeouts = 0

    def try_acquire(self, key: Hashable) -> LockLease | None:
        """Own a free ``key`` for the current task at once, else None (does not queue)."""
        if key in self._owners:
            return None
        return self._grant(key, asyncio.current_task())

    async def acquire(self, key: Hashable, *, wait_s: float | None = None) -> LockLease:
        """Own ``key`` for the current task; wait FIFO at most ``wait_s`` seconds
        (None: no limit). Raise LockTimeoutError when not granted in time."""
        owner = asyncio.current_task()
        if key not in self._owners:
            return self._grant(key, owner)
        queue = self._waiters.setdefault(key, deque())
        if len(queue) >= self.max_waiters_per_key:
            raise OverflowError(
                f"engine lock waiter bound {self.max_waiters_per_key} reached for {key!r}"
            )
        future: asyncio.Future[LockLease] = asyncio.get_running_loop().create_future()
        waiter = _Waiter(owner, future, self._clock())
        queue.append(waiter)
        try:
            if wait_s is None:
                return await future
            done, _ = await asyncio.wait({future}, timeout=wait_s)
            if not done:
                self.timeouts += 1
                raise LockTimeoutError(f"engine lock {key!r} not granted within {wait_s}s")
            return future.result()
        except BaseException:
            self._abandon(key, waiter)
            raise

    def _abandon(self, key: Hashable, waiter: _Waiter) -> None:
        """A waiter gave up (timeout or death): leave the queue, hand on a raced grant."""
        if waiter.future.done() and not waiter.future.cancelled():
            waiter.future.result().release()
            return
        waiter.future.cancel()
        queue = self._waiters.get(key)
        if queue is not None:
            with contextlib.suppress(ValueError):
                queue.remove(waiter)
            if not queue:
                del self._waiters[key]

    def _grant(self, key: Hashable, owner: asyncio.Task[Any] | None) -> LockLease:
        lease = LockLease(key, next(self._tokens), owner, self._clock(), self)
        self._owners[key] = lease
        self.acquired += 1
        if owner is not None:
            owner.add_done_callback(lease._owner_done)
        return lease

    def _on_owner_done(self, lease: LockLease) -> None:
        if self._owners.get(lease.key) is lease:
            self.owner_deaths += 1
            lease.released = True
            self._handoff(lease.key)

    def _release(self, lease: LockLease) -> bool:
        if self._owners.get(lease.key) is not lease:
            self.stale_releases += 1
            return False
        self.released += 1
        if lease.owner is not None:
            lease.owner.remove_done_callback(lease._owner_done)
        self._handoff(lease.key)
        return True

    def _handoff(self, key: Hashable) -> None:
        del self._owners[key]
        queue = self._waiters.get(key)
        while queue:
            waiter = queue.popleft()
            if waiter.future.done():
                continue
            if waiter.owner is not None and waiter.owner.done():
                # Confirmed dead waiter: skip it.
                waiter.future.cancel()
                continue
            waiter.future.set_result(self._grant(key, waiter.owner))
            break
        if queue is not None and not queue:
            del self._waiters[key]

    def owner_of(self, key: Hashable) -> LockLease | None:
        """The current lease of ``key``, if held."""
        return self._owners.get(key)

    def statistics(self) -> EngineLockStatistics:
        """Owners (with how long they held), waiters per key, counters."""
        now = self._clock()
        return EngineLockStatistics(
            held=len(self._owners),
            owners=tuple(
                LockOwner(
                    key=lease.key,
                    token=lease.token,
                    owner=None if lease.owner is None else lease.owner.get_name(),
                    held_s=round(now - lease.acquired_at, 6),
                )
                for lease in self._owners.values()
            ),
            waiters={str(k): len(q) for k, q in self._waiters.items()},
            waiting=sum(len(q) for q in self._waiters.values()),
            acquired=self.acquired,
            released=self.released,
            owner_deaths=self.owner_deaths,
            stale_releases=self.stale_releases,
            timeouts=self.timeouts,
        )
