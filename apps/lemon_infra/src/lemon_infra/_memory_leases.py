"""FencedStore, MemoryLeases: the implementations cut from ``lemon_core.leases``.

lemon_core.leases: Leases with fencing tokens: ownership of a name shared by several processes.
See that module for the contract.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from lemon_core.clock import SYSTEM_CLOCK
from lemon_core.leases import Lease, check_lease_name, check_ttl_ms
from lemon_core.store import Store
from lemon_core.store.errors import StaleLeaseError
from lemon_core.store.protocol import Clock, PutEntry

__all__ = ["FencedStore", "MemoryLeases"]


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

    async def put_new(
        self,
        table: str,
        key: str,
        value: Any,
        *,
        ttl_ms: int | None = None,
        also: Sequence[PutEntry] = (),
    ) -> bool:
        self._check()
        return await self._store.put_new(table, key, value, ttl_ms=ttl_ms, also=also)

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
