"""One fire: claim the due time in the fire ledger, then submit the run through the session
port with a ``run_id`` derived from ``(job_id, due_at_ms)``. The ledger makes the claim unique
across daemons and the port's idempotent ``submit`` makes a re-submission (a takeover) start
nothing new, so a double fire is impossible."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from lemon_core.execution import Receipt, RunRequest
from lemon_core.fire_ledger import Fire, FireLedger

__all__ = ["FireResult", "Submitter", "cron_run_id", "fire_due", "router_run_id", "submit_fire"]


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
    return await submit_fire(ledger, port, fire, request)


async def submit_fire(
    ledger: FireLedger, port: Submitter, fire: Fire, request: RunRequest
) -> FireResult:
    """Submit the owned ``fire`` (a fresh claim or a takeover: the derived run id makes a second
    submission answer the first receipt) and record it, fenced."""
    run_id = router_run_id(fire.job_id, fire.due_at_ms)
    receipt = await port.submit(replace(request, run_id=run_id))
    if receipt.status == "rejected":
        done = await ledger.record(fire, status="failed", run_id=run_id, outcome=receipt.reason)
        return FireResult("rejected", done, receipt)
    written = await ledger.record(fire, status="submitted", run_id=run_id)
    if written is None:
        return FireResult("lost", None, receipt)
    return FireResult("submitted", written, receipt)
