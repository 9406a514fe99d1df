"""Leases with fencing tokens: ownership of a name shared by several processes.

A :class:`Lease` names an owner and a *fencing token*: a number that only grows, a new one at
every acquisition. Ownership moves only on :meth:`Leases.release` or when the lease expired
(its owner stopped renewing: dead, paused or partitioned) and another owner acquires it; a live
owner renews (:meth:`Leases.renew`) and is never displaced for age. Every durable write made
under a lease goes through :meth:`Leases.fenced`: a Store view whose writes check, atomically
with the write, that the token still holds the lease, and otherwise raise
:class:`~lemon_core.store.errors.StaleLeaseError` with nothing written. So a former owner
that wakes after losing the lease cannot overwrite what its successor wrote.

Implementations: :class:`MemoryLeases` (one process; the single-machine default needs none,
tests use it) and ``lemon_core.store.postgres.PostgresLeases`` (several daemons on one
PostgreSQL schema, expiry by the server's clock).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from lemon_core.clock import SYSTEM_CLOCK
from lemon_core.store import Store
from lemon_core.store._protocol import Clock, PutEntry
from lemon_core.store.errors import StaleLeaseError, StoreValueError

__all__ = ["FencedStore", "Lease", "Leases", "MemoryLeases", "check_lease_name", "check_ttl_ms"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Lease:
    """``owner`` holds ``name`` with fencing ``token`` until ``expires_at_ms`` (the lease
    keeper's clock) unless renewed."""

    name: str
    owner: str
    token: int
    expires_at_ms: int


@runtime_checkable
class Leases(Protocol):
    """Shared ownership of names with fencing tokens (see the module docstring)."""

    async def acquire(self, name: str, owner: str, *, ttl_ms: int) -> Lease | None:
        """A new lease of ``name`` for ``owner`` when it is free or its lease expired, with
        a token greater than every earlier one; None while another lease of it is live."""
        ...

    async def renew(self, lease: Lease, *, ttl_ms: int) -> Lease | None:
        """Extend ``lease`` (same token) to ``ttl_ms`` from now; None when it was lost
        (released, or another owner acquired the name after it expired)."""
        ...

    async def release(self, lease: Lease) -> bool:
        """Give ``lease`` up; False when it no longer held the name."""
        ...

    async def holder(self, name: str) -> Lease | None:
        """The lease of ``name`` now (live or expired but not yet taken over), or None."""
        ...

    def fenced(self, lease: Lease) -> Store:
        """A Store view whose ``put`` and ``delete`` check ``lease``'s token atomically with
        the write (``StaleLeaseError``, nothing written, once it no longer holds the name);
        reads pass through. Closing the view closes nothing."""
        ...


def check_lease_name(name: object) -> str:
    if not isinstance(name, str) or not name or len(name) > 512 or "\x00" in name:
        raise StoreValueError(f"invalid lease name {name!r}: 1-512 characters, no NUL")
    return name


def check_ttl_ms(ttl_ms: object) -> int:
    if not isinstance(ttl_ms, int) or isinstance(ttl_ms, bool) or ttl_ms <= 0:
        raise StoreValueError(f"lease ttl_ms must be a positive integer, got {ttl_ms!r}")
    return ttl_ms


class FencedStore:
    """A Store view over ``store`` whose writes first ask ``check()`` whether the lease still
    holds (for a backend where the check and the write cannot be one transaction, the two
    must run without an await between them: :class:`MemoryLeases` on one event loop)."""

    def __init__(self, store: Store, lease: Lease, holds: Any) -> None:
        self._store = store
        self._lease = lease
        self._holds = holds
        self.refused = 0

    def _check(self) -> None:
        if not self._holds(self._lease):
            self.refused += 1
            raise StaleLeaseError(
                f"lease {self._lease.name!r} token {self._lease.token} no longer holds it; "
                "nothing was written (another owner took over)"
            )

    async def get(self, table: str, key: str) -> Any | None:
        return await self._store.get(table, key)

    async def put(self, table: str, key: str, value: Any, *, ttl_ms: int | None = None) -> None:
        self._check()
        await self._store.put(table, key, value, ttl_ms=ttl_ms)

    async def put_many(self, entries: Sequence[PutEntry]) -> None:
        self._check()
        await self._store.put_many(entries)

    async def delete(self, table: str, key: str) -> bool:
        self._check()
        return await self._store.delete(table, key)

    async def scan(
        self, table: str, *, prefix: str = "", limit: int = 1000, reverse: bool = False
    ) -> list[tuple[str, Any]]:
        return await self._store.scan(table, prefix=prefix, limit=limit, reverse=reverse)

    async def sweep_expired(self) -> int:
        return await self._store.sweep_expired()

    async def close(self) -> None:
        """The view owns nothing."""

    def statistics(self) -> dict[str, Any]:
        return {
            **self._store.statistics(),
            "fenced_by": self._lease.name,
            "token": self._lease.token,
            "refused": self.refused,
        }


class MemoryLeases:
    """Leases in one process (a dictionary; an injectable millisecond clock)."""

    def __init__(self, store: Store, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._store = store
        self._clock = clock
        self._leases: dict[str, Lease] = {}
        self._tokens = itertools.count(1)

    async def acquire(self, name: str, owner: str, *, ttl_ms: int) -> Lease | None:
        check_lease_name(name)
        check_ttl_ms(ttl_ms)
        now = self._clock.now_ms()
        current = self._leases.get(name)
        if current is not None and current.expires_at_ms > now:
            return None
        lease = Lease(name=name, owner=owner, token=next(self._tokens), expires_at_ms=now + ttl_ms)
        self._leases[name] = lease
        return lease

    async def renew(self, lease: Lease, *, ttl_ms: int) -> Lease | None:
        check_ttl_ms(ttl_ms)
        if not self._holds(lease):
            return None
        renewed = Lease(
            name=lease.name,
            owner=lease.owner,
            token=lease.token,
            expires_at_ms=self._clock.now_ms() + ttl_ms,
        )
        self._leases[lease.name] = renewed
        return renewed

    async def release(self, lease: Lease) -> bool:
        if not self._holds(lease):
            return False
        del self._leases[lease.name]
        return True

    async def holder(self, name: str) -> Lease | None:
        return self._leases.get(check_lease_name(name))

    def _holds(self, lease: Lease) -> bool:
        current = self._leases.get(lease.name)
        return current is not None and current.token == lease.token

    def fenced(self, lease: Lease) -> Store:
        return FencedStore(self._store, lease, self._holds)
