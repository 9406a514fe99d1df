"""Catch-up after downtime: the due times in ``(watermark, now]`` a daemon did not fire, and what
the job's policy does with them. Nothing is dropped silently: every due time not fired comes
back as a skip with its reason (``coalesced`` or ``missed_deadline``), and the listing is
bounded (a week offline on ``* * * * *`` lists at most ``max_catch_up + 1`` due times and counts
the rest in ``uncounted``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from lemon_automation.schedule import Schedule

__all__ = ["CatchUp", "CatchUpPolicy", "Skip", "plan_catch_up"]

CatchUpPolicy = Literal["latest", "all", "skip"]


@dataclass(frozen=True, slots=True)
class Skip:
    due_at_ms: int
    reason: Literal["coalesced", "missed_deadline"]


@dataclass(frozen=True, slots=True)
class CatchUp:
    fire: list[int] = field(default_factory=list)
    """Due times to fire now, oldest first."""
    skipped: list[Skip] = field(default_factory=list)
    """Listed due times not fired, each with its reason (a history record and an audit entry)."""
    uncounted: int = 0
    """Further missed due times beyond the listing bound (one summary count, not one record
    each); -1 when there were more than could be counted cheaply."""


def plan_catch_up(
    schedule: Schedule,
    *,
    watermark_ms: int,
    now_ms: int,
    policy: CatchUpPolicy = "latest",
    grace_ms: int,
    max_catch_up: int = 10,
    count_limit: int = 100_000,
) -> CatchUp:
    """The plan for the due times in ``(watermark_ms, now_ms]`` under ``policy``: ``latest``
    fires the newest if it is within ``grace_ms`` of now (the others ``coalesced``); ``all``
    fires each, oldest first, at most ``max_catch_up`` (older ones ``coalesced``); ``skip``
    fires none (``missed_deadline``)."""
    bound = max_catch_up + 1
    missed: list[int] = []
    extra = 0
    t = watermark_ms
    while True:
        nxt = schedule.next_after(t)
        if nxt is None or nxt > now_ms:
            break
        missed.append(nxt)
        if len(missed) > bound:
            missed.pop(0)
            extra += 1
            if extra >= count_limit:
                extra = -1
                break
        t = nxt
    if not missed:
        return CatchUp(uncounted=extra)
    if policy == "skip":
        return CatchUp([], [Skip(d, "missed_deadline") for d in missed], extra)
    if policy == "all":
        fire = missed[-max_catch_up:] if max_catch_up > 0 else []
        older = missed[: len(missed) - len(fire)]
        return CatchUp(fire, [Skip(d, "coalesced") for d in older], extra)
    newest = missed[-1]
    skipped = [Skip(d, "coalesced") for d in missed[:-1]]
    if now_ms - newest > grace_ms:
        return CatchUp([], [*skipped, Skip(newest, "missed_deadline")], extra)
    return CatchUp([newest], skipped, extra)
