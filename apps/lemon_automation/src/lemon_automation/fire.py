"""One fire: claim the due time in the fire ledger, then submit the run through the session
port with a ``run_id`` derived from ``(job_id, due_at_ms)``. The ledger makes the claim unique
across daemons and the port's idempotent ``submit`` makes a re-submission (a takeover) start
nothing new, so a double fire is impossible."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from lemon_core.execution import Receipt, RunRequest
from lemon_core.fire_ledger import Fire, FireLedger, FireWrite

__all__ = [
    "FireResult",
    "HeldFire",
    "Submitter",
    "cron_run_id",
    "fire_due",
    "keep_lease",
    "router_run_id",
    "submit_fire",
]

log = logging.getLogger("lemon_automation")


class Submitter(Protocol):
    """The part of ``lemon_core.sessions.SessionPort`` a fire uses."""

    async def submit(self, request: RunRequest) -> Receipt: ...


def cron_run_id(job_id: str, due_at_ms: int) -> str:
    digest = hashlib.sha256(f"{job_id}:{due_at_ms}".encode()).hexdigest()[:24]
    return f"cron_{digest}"


def router_run_id(job_id: str, due_at_ms: int) -> str:
    return f"run_{cron_run_id(job_id, due_at_ms)}"


@dataclass(frozen=True, slots=True)
class FireResult:
    status: Literal["submitted", "lost", "rejected"]
    fire: Fire | None
    receipt: Receipt | None = None


async def fire_due(
    ledger: FireLedger,
    port: Submitter,
    *,
    job_id: str,
    due_at_ms: int,
    owner: str,
    lease_ms: int,
    request: RunRequest,
) -> FireResult:
    """Claim ``(job_id, due_at_ms)`` and submit ``request`` (its ``run_id`` replaced by the
    derived one). ``lost``: another daemon owns this due time (nothing submitted here)."""
    fire = await ledger.claim(job_id, due_at_ms, owner, lease_ms=lease_ms)
    if fire is None:
        return FireResult("lost", None)
    return await submit_fire(ledger, port, fire, request, lease_ms=lease_ms)


async def submit_fire(
    ledger: FireLedger,
    port: Submitter,
    fire: Fire,
    request: RunRequest,
    *,
    lease_ms: int | None = None,
    record: Callable[[FireWrite], Awaitable[Fire | None]] | None = None,
) -> FireResult:
    """Submit the owned ``fire`` (a fresh claim or a takeover: the derived run id makes a second
    submission answer the first receipt) and record it, fenced. With ``lease_ms`` the fire's
    lease is renewed every third of it while the port takes the submission (a slow store or a
    session handed to another daemon must not let the claim lapse before it is recorded).
    ``record`` writes the fenced ``submitted`` record (the scheduler's step passes one that
    batches it with its other fires' records); ``ledger.record`` by default."""
    run_id = router_run_id(fire.job_id, fire.due_at_ms)
    submission = replace(request, run_id=run_id)
    if lease_ms is None:
        receipt = await port.submit(submission)
    else:
        held = HeldFire(fire)
        keeper = asyncio.create_task(keep_lease(ledger, held, lease_ms))
        try:
            receipt = await port.submit(submission)
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        fire = held.fire  # a refused renewal: the fenced record below says it is lost
    if receipt.status == "rejected":
        done = await ledger.record(fire, status="failed", run_id=run_id, outcome=receipt.reason)
        return FireResult("rejected", done, receipt)
    write = FireWrite(fire=fire, status="submitted", run_id=run_id)
    if record is None:
        written = await ledger.record(write.fire, status=write.status, run_id=write.run_id)
    else:
        written = await record(write)
    if written is None:
        return FireResult("lost", None, receipt)
    return FireResult("submitted", written, receipt)


@dataclass(slots=True)
class HeldFire:
    """A fire whose lease :func:`keep_lease` renews: ``fire`` is its newest renewal, ``lost``
    is set once a renewal was refused (another daemon took it over)."""

    fire: Fire
    lost: asyncio.Event = field(default_factory=asyncio.Event)


async def keep_lease(ledger: FireLedger, held: HeldFire, lease_ms: int) -> None:
    """Renew ``held.fire`` every third of ``lease_ms`` until cancelled, or until a renewal is
    refused by the fence (then ``held.lost`` is set and it returns). A renewal that fails (the
    store is down) is logged and tried again at the next third. The one renewal loop of a
    fire: while it is being submitted and while its run is in flight."""
    while True:
        await asyncio.sleep(lease_ms / 3000)
        try:
            renewed = await ledger.renew(held.fire, lease_ms=lease_ms)
        except Exception as exc:  # the store is down: the next renewal tries again
            log.warning("automation could not renew fire %s: %s", held.fire.job_id, exc)
            continue
        if renewed is None:
            held.lost.set()
            return
        held.fire = renewed
