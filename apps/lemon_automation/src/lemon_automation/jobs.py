"""Jobs and their durable store (a typed wrapper over the configured Store, table
``automation_jobs``): add validates everything before anything is stored; update refuses
unknown fields and the immutable ``agent_id`` / ``session_key``; a row that cannot be decoded
is quarantined (listed apart, every other job still loads)."""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, Literal

import msgspec

from lemon_automation.catch_up import CatchUpPolicy
from lemon_automation.schedule import At, Cron, Every, Schedule, ScheduleError, zone
from lemon_core.sessions import check_session_key
from lemon_core.store import Store

__all__ = [
    "JOBS_REV_TABLE",
    "JOBS_TABLE",
    "MAX_RETRIES",
    "Job",
    "JobError",
    "JobStore",
    "in_active_hours",
    "jitter_ms",
    "parse_active_hours",
]

JOBS_TABLE: Final = "automation_jobs"
#: One key (``rev``): a new value at every job write, so a load can tell nothing changed.
JOBS_REV_TABLE: Final = "automation_jobs_rev"
_ADOPTED_S: Final = 5.0  # how long a cache moved by this store's own advance is trusted
_READ_ONE_BY_ONE: Final = 8  # advance_many reads more moved jobs than this with one scan
_REV: Final = "rev"
_MAX_PROMPT: Final = 32 * 1024
#: A retry's fire key is its due time plus the attempt in ms: kept far below any period (1 s).
MAX_RETRIES: Final = 10
_MUTABLE: Final = frozenset(
    {"name", "prompt", "enabled", "jitter_ms", "catch_up", "grace_ms", "timeout_ms", "max_retries",
     "armed_at_ms", "model", "skills"}
)  # fmt: skip


class JobError(ValueError):
    """A job the caller must fix; the message names the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class Job(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    id: str
    name: str
    agent_id: str = "default"
    kind: Literal["cron", "every", "at"]
    purpose: Literal["cron", "heartbeat"] = "cron"
    """A heartbeat's answer ``HEARTBEAT_OK`` is suppressed; anything else is an alert."""
    skip_when_busy: bool = True
    """Heartbeats: a due time while the agent's main session runs is ``skipped: busy``."""
    channel: str | None = None
    """Heartbeats: where an alert goes (``None``: the agent's main session)."""
    active_hours: str | None = None
    """Heartbeats: ``HH:MM-HH:MM`` in ``timezone`` (the end excluded; an end before the start
    spans midnight). A due time outside is ``skipped: outside_active_hours``."""
    expr: str
    """The cron expression, the duration, or the ISO instant."""
    timezone: str = "UTC"
    anchor_ms: int = 0
    prompt: str
    session_key: str | None = None
    enabled: bool = True
    jitter_ms: int = 0
    catch_up: CatchUpPolicy = "latest"
    grace_ms: int | None = None
    timeout_ms: int = 300_000
    max_retries: int = 0
    last_due_at_ms: int | None = None
    """The watermark: the newest due time handled (fired or skipped)."""
    created_at_ms: int = 0
    model: str | None = None
    """The model pin (``provider:model``, what ``RunRequest.model`` takes); ``None``: the
    configured default. Checked before each fire (its credentials)."""
    skills: tuple[str, ...] = ()
    """The skills the job's prompt relies on: each must be installed and usable before a fire
    starts its run."""
    armed_at_ms: int = 0
    """Heartbeats: when ``set-heartbeats`` last enabled it (the idle pause counts from the
    later of this and the agent's last user run)."""

    def schedule(self) -> Schedule:
        if self.kind == "cron":
            return Cron.parse(self.expr, self.timezone)
        if self.kind == "every":
            return Every.parse(self.expr, anchor_ms=self.anchor_ms)
        return At.parse(self.expr, now_ms=-1)


def jitter_ms(job: Job, due_at_ms: int) -> int:
    """The job's jitter for one due time: a hash of ``(job_id, due_at_ms)``, so every daemon
    agrees on it."""
    if job.jitter_ms <= 0:
        return 0
    digest = hashlib.sha256(f"{job.id}:{due_at_ms}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % (job.jitter_ms + 1)


_SKILL: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_HOURS: Final = re.compile(r"^(\d{2}):(\d{2})-(\d{2}):(\d{2})$")


def parse_active_hours(text: str) -> tuple[int, int]:
    """``HH:MM-HH:MM`` as minutes of the day ``(start, end)``; the end may be ``24:00``."""
    match = _HOURS.match(text.strip())
    if match is None:
        raise JobError("active_hours", f"{text!r} is not HH:MM-HH:MM (for example 09:00-18:00)")
    h1, m1, h2, m2 = (int(g) for g in match.groups())
    start, end = h1 * 60 + m1, h2 * 60 + m2
    if h1 > 23 or m1 > 59 or m2 > 59 or end > 24 * 60:
        raise JobError(
            "active_hours", f"{text!r}: hours 00-23 (the end may be 24:00), minutes 00-59"
        )
    if start == end:
        raise JobError("active_hours", f"{text!r}: the start and the end are the same")
    return start, end


def in_active_hours(job: Job, at_ms: int) -> bool:
    """Whether ``at_ms`` falls in the job's active hours (always, when it has none)."""
    if job.active_hours is None:
        return True
    start, end = parse_active_hours(job.active_hours)
    local = datetime.fromtimestamp(at_ms / 1000, tz=UTC).astimezone(zone(job.timezone))
    minute = local.hour * 60 + local.minute
    return start <= minute < end if start < end else minute >= start or minute < end


def _validate(job: Job, *, now_ms: int) -> None:
    try:
        if job.kind == "at":
            At.parse(job.expr, now_ms=now_ms)
        schedule = job.schedule()
    except ScheduleError as exc:
        raise JobError(exc.field, str(exc).split(": ", 1)[1]) from exc
    if not job.name.strip():
        raise JobError("name", "empty; give the job a name")
    if not job.prompt.strip():
        raise JobError("prompt", "empty; say what the job should do")
    if len(job.prompt.encode()) > _MAX_PROMPT:
        raise JobError("prompt", f"over {_MAX_PROMPT // 1024} KiB; shorten it or point to a file")
    if job.session_key is not None:
        try:
            check_session_key(job.session_key)
        except ValueError as exc:
            raise JobError("session_key", f"{job.session_key!r} does not parse: {exc}") from exc
    if job.jitter_ms < 0:
        raise JobError("jitter", "negative")
    if isinstance(schedule, Every) and job.jitter_ms >= schedule.period_ms:
        raise JobError("jitter", "larger than the period; make it smaller than the interval")
    if job.max_retries < 0 or job.timeout_ms <= 0:
        raise JobError("max_retries", "must be >= 0 (and timeout > 0)")
    if job.active_hours is not None:
        parse_active_hours(job.active_hours)
    if job.max_retries > MAX_RETRIES:
        raise JobError("max_retries", f"at most {MAX_RETRIES}")
    if job.model is not None:
        provider, _, model_id = job.model.partition(":")
        if not provider.strip() or not model_id.strip():
            raise JobError("model", f"{job.model!r} is not provider:model (e.g. openai:gpt-4o)")
    for skill in job.skills:
        if not _SKILL.match(skill):
            raise JobError("skills", f"{skill!r} is not a skill name (letters, digits, - _ .)")


class JobStore:
    """Jobs in ``store`` (any backend: SQLite alone, PostgreSQL shared by daemons).

    Every write of a job also writes a new revision (``automation_jobs_rev``, in the same
    ``put_many``; after the delete for a removal), and :meth:`load` reads that one key first:
    while it is unchanged the jobs loaded last are answered again, so an idle daemon polling
    every ``poll_ms`` does not read and decode every job each time. Jobs are written through
    this class only (a row written around it is seen at the next revision)."""

    def __init__(self, store: Store, *, max_jobs_per_agent: int = 50) -> None:
        self._store = store
        self._max = max_jobs_per_agent
        self._cached: tuple[str, list[Job], list[tuple[str, str]]] | None = None
        # When the cache was moved to this store's own revision by advance_many (None: it
        # was read): such a cache is trusted for _ADOPTED_S only, since another daemon's
        # write landing between that revision check and the write would not be seen.
        self._adopted_at: float | None = None

    async def load(self) -> tuple[list[Job], list[tuple[str, str]]]:
        """Every job, and the quarantined rows as ``(key, why)``."""
        rev = await self._store.get(JOBS_REV_TABLE, _REV)
        cached = self._cached
        adopted = self._adopted_at
        trusted = adopted is None or time.monotonic() - adopted < _ADOPTED_S
        if isinstance(rev, str) and cached is not None and cached[0] == rev and trusted:
            return list(cached[1]), list(cached[2])
        jobs: list[Job] = []
        bad: list[tuple[str, str]] = []
        for key, value in await self._store.scan(JOBS_TABLE, limit=100_000):
            try:
                jobs.append(msgspec.convert(value, Job))
            except (msgspec.ValidationError, TypeError) as exc:
                bad.append((key, f"cannot be decoded: {exc}"))
        # the revision read before the scan: a write since makes the next load scan again
        self._cached = (rev, list(jobs), list(bad)) if isinstance(rev, str) else None
        self._adopted_at = None
        return jobs, bad

    async def _write(self, job: Job) -> None:
        await self._store.put_many(
            [
                (JOBS_TABLE, job.id, msgspec.to_builtins(job), None),
                (JOBS_REV_TABLE, _REV, uuid.uuid4().hex, None),
            ]
        )

    async def get(self, job_id: str) -> Job | None:
        value = await self._store.get(JOBS_TABLE, job_id)
        return None if value is None else msgspec.convert(value, Job)

    async def add(self, job: Job, *, now_ms: int) -> Job:
        _validate(job, now_ms=now_ms)
        jobs, _ = await self.load()
        mine = [j for j in jobs if j.agent_id == job.agent_id]
        if any(j.name == job.name for j in mine):
            raise JobError("name", f"{job.name!r} exists for agent {job.agent_id!r}; pick another")
        if len(mine) >= self._max:
            raise JobError(
                "agent_id",
                f"agent {job.agent_id!r} has {len(mine)} jobs, the maximum "
                "([automation] max_jobs_per_agent); remove one first",
            )
        await self._write(job)
        return job

    async def update(self, job_id: str, changes: Mapping[str, Any], *, now_ms: int) -> Job:
        job = await self.get(job_id)
        if job is None:
            raise JobError("id", f"no job {job_id!r}; see lemon cron list")
        for name in changes:
            if name in ("agent_id", "session_key"):
                raise JobError(name, "is immutable; remove the job and add a new one")
            if name not in _MUTABLE:
                raise JobError(name, f"unknown field; updatable: {', '.join(sorted(_MUTABLE))}")
        updated = msgspec.structs.replace(job, **changes)
        # An `at` job's instant was checked at creation: it may be past by now.
        _validate(updated, now_ms=now_ms if updated.kind != "at" else -1)
        await self._write(updated)
        return updated

    @property
    def revision(self) -> str | None:
        """The revision of the jobs the last :meth:`load` answered (``None``: not cached, so
        every load reads them all); it changes with every job write seen or made here."""
        return None if self._cached is None else self._cached[0]

    async def advance(self, job: Job, due_at_ms: int) -> None:
        """Move the watermark to ``due_at_ms`` (never backwards)."""
        await self.advance_many({job.id: due_at_ms})

    async def advance_many(self, moves: Mapping[str, int]) -> None:
        """Move the watermarks of several jobs (job id -> due time; never backwards) in one
        ``put_many`` with one new revision: a scheduler step writes once, however many jobs
        it fired. When the revision is still the one of the cached jobs (no job write since
        the last load) the cached jobs are the current rows and are not read again, and the
        cache moves to the new revision, so this daemon's next load reads nothing; otherwise
        each job is read first (a change made meanwhile is kept)."""
        if not moves:
            return
        cached = self._cached
        rev = await self._store.get(JOBS_REV_TABLE, _REV)
        fresh = cached is not None and isinstance(rev, str) and rev == cached[0]
        if not fresh and len(moves) > _READ_ONE_BY_ONE:
            await self.load()  # one scan, not a read per job (another daemon wrote meanwhile)
            cached = self._cached
            fresh = cached is not None
        if fresh and cached is not None:
            current: dict[str, Job | None] = {j.id: j for j in cached[1]}
        else:
            ids = list(moves)
            rows = await asyncio.gather(*(self.get(job_id) for job_id in ids))
            current = dict(zip(ids, rows, strict=True))
        moved: dict[str, Job] = {}
        for job_id, due in moves.items():
            job = current.get(job_id)
            if job is not None and (job.last_due_at_ms or -1) < due:
                moved[job_id] = msgspec.structs.replace(job, last_due_at_ms=due)
        if not moved:
            return
        new_rev = uuid.uuid4().hex
        # In job id order: two daemons' steps write overlapping watermarks in one transaction
        # each, and rows locked in different orders deadlock on PostgreSQL (the bench saw it).
        ordered = sorted(moved.values(), key=lambda j: j.id)
        await self._store.put_many(
            [
                *((JOBS_TABLE, j.id, msgspec.to_builtins(j), None) for j in ordered),
                (JOBS_REV_TABLE, _REV, new_rev, None),
            ]
        )
        if fresh and cached is not None and self._cached is cached:
            jobs = [moved.get(j.id, j) for j in cached[1]]
            self._cached = (new_rev, jobs, cached[2])
            if self._adopted_at is None:
                self._adopted_at = time.monotonic()

    async def remove(self, job_id: str) -> bool:
        removed = await self._store.delete(JOBS_TABLE, job_id)
        await self._store.put(JOBS_REV_TABLE, _REV, uuid.uuid4().hex)
        return removed
