"""MemoryFireLedger: the one-process fire ledger (``lemon_core.fire_ledger`` has the contract)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from lemon_core.clock import SYSTEM_CLOCK
from lemon_core.fire_ledger import (
    IN_FLIGHT_STATUSES,
    TERMINAL_STATUSES,
    Fire,
    FireWrite,
    check_fire_key,
    check_fire_keys,
    check_lease_ms,
    check_prune,
    check_status,
    check_writes,
)
from lemon_core.store.protocol import Clock

__all__ = ["MemoryFireLedger"]


class MemoryFireLedger:
    """Fires in a dictionary (every method runs without an await, so it is atomic on one event
    loop); an injectable millisecond clock."""

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._fires: dict[tuple[str, int], Fire] = {}

    async def claim(self, job_id: str, due_at_ms: int, owner: str, *, lease_ms: int) -> Fire | None:
        check_fire_key(job_id, due_at_ms)
        check_lease_ms(lease_ms)
        return self._claim_now(job_id, due_at_ms, owner, lease_ms)

    def _claim_now(self, job_id: str, due_at_ms: int, owner: str, lease_ms: int) -> Fire | None:
        key = (job_id, due_at_ms)
        if key in self._fires:
            return None
        now = self._clock.now_ms()
        fire = Fire.claimed(job_id, due_at_ms, owner, now_ms=now, lease_ms=lease_ms)
        self._fires[key] = fire
        return fire

    async def claim_many(
        self, keys: Sequence[tuple[str, int]], owner: str, *, lease_ms: int
    ) -> list[Fire | None]:
        checked = check_fire_keys(keys)
        check_lease_ms(lease_ms)
        # No await between the checks and the last insert: atomic on the event loop.
        return [self._claim_now(job_id, due, owner, lease_ms) for job_id, due in checked]

    def _mine(self, fire: Fire) -> Fire | None:
        current = self._fires.get((fire.job_id, fire.due_at_ms))
        if current is None or current.fence != fire.fence or current.done:
            return None
        return current

    async def renew(self, fire: Fire, *, lease_ms: int) -> Fire | None:
        check_lease_ms(lease_ms)
        current = self._mine(fire)
        if current is None:
            return None
        now = self._clock.now_ms()
        renewed = dataclasses.replace(current, lease_until_ms=now + lease_ms, updated_at_ms=now)
        self._fires[(fire.job_id, fire.due_at_ms)] = renewed
        return renewed

    async def record(
        self,
        fire: Fire,
        *,
        status: str,
        run_id: str | None = None,
        outcome: str | None = None,
    ) -> Fire | None:
        check_status(status)
        return self._record_now(fire, status, run_id, outcome)

    async def record_many(self, writes: Sequence[FireWrite]) -> list[Fire | None]:
        checked = check_writes(writes)
        return [self._record_now(w.fire, w.status, w.run_id, w.outcome) for w in checked]

    def _record_now(
        self, fire: Fire, status: str, run_id: str | None, outcome: str | None
    ) -> Fire | None:
        current = self._mine(fire)
        if current is None:
            return None
        written = dataclasses.replace(
            current,
            status=status,
            run_id=current.run_id if run_id is None else run_id,
            outcome=current.outcome if outcome is None else outcome,
            lease_until_ms=0 if status in TERMINAL_STATUSES else current.lease_until_ms,
            updated_at_ms=self._clock.now_ms(),
        )
        self._fires[(fire.job_id, fire.due_at_ms)] = written
        return written

    async def take_over_expired(self, owner: str, *, lease_ms: int, limit: int = 100) -> list[Fire]:
        check_lease_ms(lease_ms)
        now = self._clock.now_ms()
        expired = sorted(
            (
                f
                for f in self._fires.values()
                if f.status in IN_FLIGHT_STATUSES and f.lease_until_ms <= now
            ),
            key=lambda f: (f.lease_until_ms, f.job_id, f.due_at_ms),
        )[: max(0, limit)]
        taken = []
        for f in expired:
            new = dataclasses.replace(
                f, owner=owner, fence=f.fence + 1, lease_until_ms=now + lease_ms, updated_at_ms=now
            )
            self._fires[(f.job_id, f.due_at_ms)] = new
            taken.append(new)
        return taken

    async def get(self, job_id: str, due_at_ms: int) -> Fire | None:
        return self._fires.get(check_fire_key(job_id, due_at_ms))

    async def prune(self, job_id: str, *, keep: int, limit: int = 100) -> list[int]:
        keep, limit = check_prune(keep, limit)
        mine = sorted(
            (f for (j, _), f in self._fires.items() if j == job_id),
            key=lambda f: f.due_at_ms,
            reverse=True,
        )
        old = sorted(f.due_at_ms for f in mine[keep:] if f.done)[:limit]
        for due in old:
            del self._fires[(job_id, due)]
        return old

    async def fires(self, job_id: str, *, limit: int = 100) -> list[Fire]:
        mine = [f for (j, _), f in self._fires.items() if j == job_id]
        return sorted(mine, key=lambda f: f.due_at_ms, reverse=True)[: max(0, limit)]
