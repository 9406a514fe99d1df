"""Shared gateway state: the engine lock and, optionally, the slot limit across daemons.

When the runtime's store is shared (PostgreSQL), the gateway gets a
:class:`~lemon_core.leases.Leases` and every run also holds, next to the local
:class:`EngineLock` lease, a shared lease ``engine:<kind>:<key>`` (the same key the local lock
uses), so two daemons never run the same session at once. With ``[gateway] shared_slots`` a run
also holds one of ``max_concurrent_runs`` shared slot leases (``slot:<i>``): the limit is then
global, not per daemon.

Guarantees (on top of the lease's own, see :mod:`lemon_core.leases`):

* A held lease is renewed every ``lease_ttl_s / 3`` while the run is alive, so a live owner is
  never displaced for age. Ownership moves on release (the run finalised) or when renewal
  stopped for ``lease_ttl_s`` (the daemon died, was paused or partitioned) and another daemon
  acquired it.
* A renewal that finds the lease lost marks the run (``lost``) and cancels it with
  ``lease_lost``; every durable write of the run goes through the fenced store of its engine
  lease, so a late write is refused (``StaleLeaseError``), nothing written.
* Waiting for a held lease is a poll (5 ms doubling to 50 ms), so a release in another daemon is
  noticed within about 50 ms. A run waits for its session's engine lease as long as another
  daemon's run holds it (and renews it), as it would wait in its session's queue on one
  machine; only a store that keeps failing for ``engine_lock_timeout_s`` ends the wait.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
import uuid
from collections.abc import Callable, Hashable, Mapping
from typing import Final

from lemon_core.leases import Lease, Leases
from lemon_core.store import StoreError

__all__ = ["IN_FLIGHT", "SharedLeases", "lease_name", "owner_lost"]

log = logging.getLogger(__name__)

#: The store table of runs in flight under a shared engine lease (``<session>\x1f<run_id>``).
IN_FLIGHT: Final = "gateway_in_flight"
_POLL_START_S: Final = 0.005
_POLL_MAX_S: Final = 0.05


def owner_lost(record: Mapping[str, object]) -> str:
    """The error of a run completed because its daemon lost the session's lease."""
    owner = record.get("owner", "?")
    return (
        f"owner_lost: daemon {owner} stopped with this run in flight (its lease expired); it "
        "was not executed again"
    )


def lease_name(kind: str, key: Hashable) -> str:
    """The shared name of a local key (``("session", "agent:a:main")`` ->
    ``engine:session:agent:a:main``)."""
    if isinstance(key, tuple):
        return f"{kind}:" + ":".join(str(part) for part in key)
    return f"{kind}:{key}"


class SharedLeases:
    """The gateway's side of shared leases: waiting, renewing, releasing, counters."""

    def __init__(self, leases: Leases, *, ttl_s: float, owner: str | None = None) -> None:
        if ttl_s <= 0:
            raise ValueError(f"gateway.lease_ttl_s must be > 0, got {ttl_s!r}")
        self.leases = leases
        self.ttl_ms = max(1, int(ttl_s * 1000))
        self.owner = owner or f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.acquired = 0
        self.renewed = 0
        self.lost = 0
        self.renew_errors = 0
        self.fenced_refusals = 0
        self.waits = 0

    async def acquire(
        self, name: str, *, wait_s: float | None, store_wait_s: float | None = None
    ) -> Lease | None:
        """The lease of ``name``, waiting at most ``wait_s`` seconds (None: as long as its
        holder keeps it, cancellable) for the holder to release it or for it to expire; None
        when not granted in time. A store failure counts as not granted yet, but failures
        without a success in between for ``store_wait_s`` seconds (default ``wait_s``) raise
        the last ``StoreError``: the store, not another owner, keeps the lease from us."""
        now = time.monotonic()
        deadline = None if wait_s is None else now + wait_s
        store_limit = wait_s if store_wait_s is None else store_wait_s
        failing_since: float | None = None
        delay = _POLL_START_S
        waited = False
        while True:
            try:
                lease = await self.leases.acquire(name, self.owner, ttl_ms=self.ttl_ms)
            except StoreError as exc:
                log.warning("shared lease %s: %s", name, exc)
                now = time.monotonic()
                failing_since = now if failing_since is None else failing_since
                if store_limit is not None and now - failing_since + delay > store_limit:
                    raise
                lease = None
            else:
                failing_since = None
            if lease is not None:
                self.acquired += 1
                return lease
            if not waited:
                waited = True
                self.waits += 1
            if deadline is not None and time.monotonic() + delay > deadline:
                return None
            await asyncio.sleep(delay)
            delay = min(_POLL_MAX_S, delay * 2)

    async def acquire_slot(self, slots: int, *, store_wait_s: float | None = None) -> Lease:
        """One of ``slots`` shared slot leases (``slot:0`` ... ``slot:<slots-1>``); waits
        until one is free (cancellable), as a run waits for a local slot. A store failure
        counts as not free yet, but when every attempt has failed for ``store_wait_s``
        seconds (None: no bound) the last ``StoreError`` is raised: the store, not the other
        daemons' runs, keeps the slot from us. One warning per outage, not one per poll."""
        delay = _POLL_START_S
        order = list(range(slots))
        failing_since: float | None = None
        while True:
            random.shuffle(order)  # spread daemons over the slots
            for index in order:
                try:
                    lease = await self.leases.acquire(
                        f"slot:{index}", self.owner, ttl_ms=self.ttl_ms
                    )
                except StoreError as exc:
                    now = time.monotonic()
                    if failing_since is None:
                        failing_since = now
                        log.warning("shared slot: %s", exc)
                    if store_wait_s is not None and now - failing_since > store_wait_s:
                        raise
                    lease = None
                else:
                    failing_since = None
                if lease is not None:
                    self.acquired += 1
                    return lease
            self.waits += 1
            await asyncio.sleep(delay)
            delay = min(_POLL_MAX_S, delay * 2)

    async def keep(self, held: list[Lease], on_lost: Callable[[str], None]) -> None:
        """Renew every lease in ``held`` (replaced in place) every ttl/3 until cancelled;
        call ``on_lost(name)`` once and return when one is lost (taken over, or not renewed
        for a whole ttl because the store kept failing)."""
        interval = self.ttl_ms / 3000
        confirmed = [time.monotonic()] * len(held)  # this process's clock, not the keeper's
        while True:
            await asyncio.sleep(interval)
            for i, lease in enumerate(held):
                try:
                    renewed = await self.leases.renew(lease, ttl_ms=self.ttl_ms)
                except StoreError as exc:
                    self.renew_errors += 1
                    log.warning("renewing shared lease %s: %s", lease.name, exc)
                    if (time.monotonic() - confirmed[i]) * 1000 < self.ttl_ms:
                        continue
                    renewed = None
                if renewed is None:
                    self.lost += 1
                    on_lost(lease.name)
                    return
                held[i] = renewed
                confirmed[i] = time.monotonic()
                self.renewed += 1

    async def release(self, held: list[Lease], timeout_s: float) -> None:
        """Release every lease in ``held``; failures are logged (the lease then expires)."""
        for lease in held:
            try:
                async with asyncio.timeout(timeout_s):
                    await self.leases.release(lease)
            except (StoreError, TimeoutError) as exc:
                log.warning("releasing shared lease %s: %r (it will expire)", lease.name, exc)
        held.clear()

    def statistics(self) -> dict[str, object]:
        return {
            "owner": self.owner,
            "ttl_ms": self.ttl_ms,
            "acquired": self.acquired,
            "renewed": self.renewed,
            "lost": self.lost,
            "renew_errors": self.renew_errors,
            "fenced_refusals": self.fenced_refusals,
            "waits": self.waits,
        }
