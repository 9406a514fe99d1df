"""Leases with fencing tokens: ownership of a name shared by several processes.

A :class:`Lease` names an owner and a *fencing token*: a number that only grows, a new one at
every acquisition. Ownership moves only on :meth:`Leases.release` or when the lease expired
(its owner stopped renewing: dead, paused or partitioned) and another owner acquires it; a live
owner renews (:meth:`Leases.renew`) and is never displaced for age. Every durable write made
under a lease goes through :meth:`Leases.fenced`: a Store view whose writes check, atomically
with the write, that the token still holds the lease, and otherwise raise
:class:`~lemon_core.store.errors.StaleLeaseError` with nothing written. So a former owner
that wakes after losing the lease cannot overwrite what its successor wrote.

Implementations, in lemon_infra: ``MemoryLeases`` (one process; the single-machine
default needs none, tests use it) and ``PostgresLeases`` (several daemons on one
PostgreSQL schema, expiry by the server's clock).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from lemon_core.store import Store
from lemon_core.store.errors import StoreValueError

__all__ = [
    "Lease",
    "Leases",
    "check_lease_name",
    "check_ttl_ms",
]


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
