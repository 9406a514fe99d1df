"""The fire ledger: each due time of a scheduled job is claimed once, across every daemon.

A *fire* is one due time of one job, identified by ``(job_id, due_at_ms)`` (the UTC instant
before jitter). A daemon that wants to run it calls :meth:`FireLedger.claim`: an insert that
succeeds only when the fire is absent, so of any number of daemons racing for the same due
time exactly one gets a :class:`Fire` back and becomes its owner; the others get None.
:meth:`FireLedger.claim_many` claims many due times in one round trip (one statement or one
transaction); each fire in it is claimed or not exactly as :meth:`FireLedger.claim` would
(fence 1, the same exactly-once guarantee against any concurrent claim, batched or single),
and :meth:`FireLedger.record_many` writes many fenced records (:class:`FireWrite`) in one,
each matched on its own fence exactly as :meth:`FireLedger.record`.

The owner holds a lease on the fire (``owner``, ``lease_until_ms``, ``fence``) and renews it
while the fire is in flight (:meth:`FireLedger.renew`, every ``lease_ms / 3``). Every later
write (:meth:`FireLedger.record`: submitted, completed, interrupted, ...) is matched on the
owner's ``fence``; a write that matches nothing returns None: ownership was lost and the caller
abandons the fire. When a lease expires without a terminal record (its owner died, was paused
or partitioned), any daemon may take the fire over (:meth:`FireLedger.take_over_expired`), which
increments ``fence`` (it only ever grows), so the former owner's late writes are refused. A live
owner is never displaced; an expired fire nobody took over is still its owner's.

Expiry is judged by the ledger keeper's clock: the PostgreSQL server's clock for the shared
backend (as :mod:`lemon_core.leases`), an injectable clock for the memory and SQLite ones.

Implementations, in lemon_infra: ``MemoryFireLedger`` (one process), ``SQLiteFireLedger``
(one file, several processes; ``BEGIN IMMEDIATE`` + ``INSERT OR IGNORE``) and
``PostgresFireLedger`` (several daemons on one schema; ``INSERT ... ON CONFLICT DO NOTHING
RETURNING``, takeover scanned with ``FOR UPDATE SKIP LOCKED``). One contract kit
(``lemon_platform_test.fire_ledger_kit``) runs over all three.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from lemon_core.store.errors import StoreValueError

__all__ = [
    "IN_FLIGHT_STATUSES",
    "TERMINAL_STATUSES",
    "Fire",
    "FireLedger",
    "FireWrite",
    "check_fire_key",
    "check_fire_keys",
    "check_lease_ms",
    "check_prune",
    "check_status",
    "check_writes",
]

#: A fire whose status is one of these is in flight: its lease matters, it may be taken over.
IN_FLIGHT_STATUSES: Final = frozenset({"claimed", "submitted"})
#: The terminal statuses: a fire recorded with one of these is done (its lease is released and
#: no later write changes it).
TERMINAL_STATUSES: Final = frozenset(
    {"completed", "failed", "interrupted", "timeout", "unknown", "skipped", "aborted"}
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Fire:
    """One due time of one job, as the ledger holds it."""

    job_id: str
    due_at_ms: int
    owner: str
    fence: int
    lease_until_ms: int
    status: str
    run_id: str | None = None
    outcome: str | None = None
    claimed_at_ms: int = 0
    updated_at_ms: int = 0

    @property
    def done(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @classmethod
    def claimed(
        cls, job_id: str, due_at_ms: int, owner: str, *, now_ms: int, lease_ms: int
    ) -> Fire:
        """A new claim as every ledger makes it: ``owner``'s, fence 1, leased ``lease_ms``
        from ``now_ms``."""
        return cls(
            job_id=job_id,
            due_at_ms=due_at_ms,
            owner=owner,
            fence=1,
            lease_until_ms=now_ms + lease_ms,
            status="claimed",
            claimed_at_ms=now_ms,
            updated_at_ms=now_ms,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class FireWrite:
    """One fenced record of a :meth:`FireLedger.record_many`: the arguments of a
    :meth:`FireLedger.record`."""

    fire: Fire
    status: str
    run_id: str | None = None
    outcome: str | None = None


@runtime_checkable
class FireLedger(Protocol):
    """Claims of due times with fenced ownership (see the module docstring)."""

    async def claim(self, job_id: str, due_at_ms: int, owner: str, *, lease_ms: int) -> Fire | None:
        """The new fire ``(job_id, due_at_ms)`` owned by ``owner`` (status ``claimed``, fence 1,
        leased for ``lease_ms``) when no daemon claimed it before; None when one did."""
        ...

    async def claim_many(
        self, keys: Sequence[tuple[str, int]], owner: str, *, lease_ms: int
    ) -> list[Fire | None]:
        """:meth:`claim` of every ``(job_id, due_at_ms)`` of ``keys`` in one round trip: the
        answers in the order of ``keys``, each the new fire or None exactly as :meth:`claim`
        would answer it (fires are independent: one already claimed does not stop the
        others). A repeated key, like any bad key, is refused before anything is claimed."""
        ...

    async def renew(self, fire: Fire, *, lease_ms: int) -> Fire | None:
        """Extend the lease of ``fire`` to ``lease_ms`` from now; None when ownership was lost
        (another daemon took it over) or the fire is done."""
        ...

    async def record(
        self,
        fire: Fire,
        *,
        status: str,
        run_id: str | None = None,
        outcome: str | None = None,
    ) -> Fire | None:
        """A fenced write: set ``status`` (and ``run_id`` / ``outcome`` when given) only while
        ``fire.fence`` still owns it and it is not done. A terminal status releases the lease.
        None when the write matched nothing (ownership lost, or already done): nothing
        changed."""
        ...

    async def record_many(self, writes: Sequence[FireWrite]) -> list[Fire | None]:
        """:meth:`record` of every write in one round trip: the answers in the order of
        ``writes``, each exactly as :meth:`record` would answer it (matched on that write's own
        fence; one refused write does not stop the others). Two writes of one fire, like a bad
        status, are refused before anything is written."""
        ...

    async def take_over_expired(self, owner: str, *, lease_ms: int, limit: int = 100) -> list[Fire]:
        """Take over up to ``limit`` in-flight fires whose lease expired: each gets ``owner``,
        ``fence + 1`` and a new lease. Racing daemons never take the same fire."""
        ...

    async def get(self, job_id: str, due_at_ms: int) -> Fire | None:
        """The fire now, or None when it was never claimed."""
        ...

    async def fires(self, job_id: str, *, limit: int = 100) -> list[Fire]:
        """The fires of ``job_id``, newest due time first."""
        ...

    async def prune(self, job_id: str, *, keep: int, limit: int = 100) -> list[int]:
        """Delete up to ``limit`` of the oldest *done* fires of ``job_id`` beyond its newest
        ``keep`` fires (a fire in flight is never deleted); the due times deleted, oldest
        first. A deleted due time could be claimed again: callers prune only due times their
        watermark has passed."""
        ...


def check_fire_key(job_id: object, due_at_ms: object) -> tuple[str, int]:
    if not isinstance(job_id, str) or not job_id or len(job_id) > 512 or "\x00" in job_id:
        raise StoreValueError(f"invalid fire job_id {job_id!r}: 1-512 characters, no NUL")
    if not isinstance(due_at_ms, int) or isinstance(due_at_ms, bool) or due_at_ms < 0:
        raise StoreValueError(f"fire due_at_ms must be a non-negative integer, got {due_at_ms!r}")
    return job_id, due_at_ms


def check_fire_keys(keys: object) -> list[tuple[str, int]]:
    """The keys of a :meth:`FireLedger.claim_many`, checked: each a valid fire key, none twice."""
    if not isinstance(keys, Sequence) or isinstance(keys, str | bytes):
        raise StoreValueError(f"fire keys must be a sequence of (job_id, due_at_ms), got {keys!r}")
    checked: list[tuple[str, int]] = []
    seen: set[tuple[str, int]] = set()
    for key in keys:
        if not isinstance(key, tuple) or len(key) != 2:
            raise StoreValueError(f"a fire key is a (job_id, due_at_ms) pair, got {key!r}")
        pair = check_fire_key(key[0], key[1])
        if pair in seen:
            raise StoreValueError(f"fire key {pair!r} is given twice: claim each due time once")
        seen.add(pair)
        checked.append(pair)
    return checked


def check_writes(writes: object) -> list[FireWrite]:
    """The writes of a :meth:`FireLedger.record_many`, checked: valid statuses, one per fire."""
    if not isinstance(writes, Sequence) or isinstance(writes, str | bytes):
        raise StoreValueError(f"fire writes must be a sequence of FireWrite, got {writes!r}")
    seen: set[tuple[str, int]] = set()
    for write in writes:
        if not isinstance(write, FireWrite):
            raise StoreValueError(f"a fire write is a FireWrite, got {write!r}")
        check_status(write.status)
        key = (write.fire.job_id, write.fire.due_at_ms)
        if key in seen:
            raise StoreValueError(f"fire {key!r} is written twice in one batch: one write each")
        seen.add(key)
    return list(writes)


def check_prune(keep: object, limit: object) -> tuple[int, int]:
    for name, value in (("keep", keep), ("limit", limit)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise StoreValueError(f"fire prune {name} must be a positive integer, got {value!r}")
    assert isinstance(keep, int)
    assert isinstance(limit, int)
    return keep, limit


def check_lease_ms(lease_ms: object) -> int:
    if not isinstance(lease_ms, int) or isinstance(lease_ms, bool) or lease_ms <= 0:
        raise StoreValueError(f"fire lease_ms must be a positive integer, got {lease_ms!r}")
    return lease_ms


def check_status(status: object) -> str:
    if status not in IN_FLIGHT_STATUSES | TERMINAL_STATUSES or status == "claimed":
        allowed = sorted((IN_FLIGHT_STATUSES | TERMINAL_STATUSES) - {"claimed"})
        raise StoreValueError(f"invalid fire status {status!r}: one of {', '.join(allowed)}")
    assert isinstance(status, str)
    return status
