"""The scheduler's step and timer: no fixed tick. Each step lists, per enabled job, the due
times in ``(watermark, now]``, applies the job's catch-up policy (so a restart or a stall never
drops a due time silently), fires the planned ones (claim in the fire ledger, then submit
through the session port with the derived run id) and records each skipped one in the ledger
(claimed too, so one daemon records it once). Then it sleeps until the next due time of any job
(plus its jitter), at most ``poll_ms`` (to pick up other daemons' job changes).

A step's jobs run concurrently, and their claims and ``submitted`` records are coalesced
(:class:`_Coalesced`): every claim asked for while the previous ``FireLedger.claim_many`` was
on its way goes into the next one (the records likewise, as ``FireLedger.record_many``), so a
burst of N due jobs costs about N / ``max_parallel`` round trips of each instead of N. Each
fire in a batch is claimed or recorded exactly as by a single call (the ledger's contract), so
the fencing token and the exactly-once guarantee of every fire are unchanged.

The clock and the sleep are injected (tests drive them; no wall-clock sleeps)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from lemon_automation.catch_up import plan_catch_up
from lemon_automation.fire import FireResult, Submitter, submit_fire
from lemon_automation.jobs import Job, JobStore, jitter_ms
from lemon_automation.schedule import Every
from lemon_core.execution import RunRequest
from lemon_core.fire_ledger import Fire, FireLedger, FireWrite
from lemon_core.store.protocol import Clock

__all__ = ["Scheduler", "SchedulerHooks", "StepReport", "default_request"]

_SIX_HOURS: Final = 6 * 3_600_000
_NEXT_CACHE: Final = 20_000


def _spread(owner: str, count: int) -> int:
    """Where ``owner`` starts in a list of ``count`` due jobs (a hash: daemons differ)."""
    digest = hashlib.sha256(owner.encode()).digest()
    return int.from_bytes(digest[:4], "big") % count


class SchedulerHooks:
    """What the daemon does around the scheduler's fires (the defaults do nothing): a
    ``preflight`` reason skips a due time with no model call; ``fired`` sees each fire this
    scheduler submitted (and recorded ``submitted``); ``skipped`` each due time it recorded as
    skipped."""

    async def preflight(self, job: Job, due_at_ms: int) -> str | None:
        return None

    async def fired(self, job: Job, result: FireResult, triggered_by: str) -> None:
        return None

    async def skipped(self, job: Job, due_at_ms: int, reason: str) -> None:
        return None


def run_session(job: Job) -> str:
    """Where a fire of ``job`` runs: its session, or the sub-session ``<base>:sub:cron_<id>``."""
    return job.session_key or f"agent:{job.agent_id}:main:sub:cron_{job.id}"


def default_request(job: Job, due_at_ms: int) -> RunRequest:
    """The run of one fire: the job's session, or a sub-session ``<base>:sub:cron_<id>``.

    Queue mode ``collect``: each fire is a run of its own, queued in order behind the
    session's active run. Not ``followup``: the router merges a followup into the previous
    queued followup of the session within its merge window, so the due times a catch-up
    ``all`` fires together (or a fire and a user's followup in the job's session) would
    become one run, and the merged fire's own run would never end."""
    session = run_session(job)
    return RunRequest(
        origin="cron",
        session_key=session,
        prompt=job.prompt,
        agent_id=job.agent_id,
        queue_mode="collect",
        meta={"cron_job_id": job.id, "due_at_ms": due_at_ms},
    )


_BATCH_LIMIT: Final = 256  # the most items one claim_many / record_many carries
K = TypeVar("K")
R = TypeVar("R")


class _Coalesced(Generic[K, R]):
    """Calls of one step, coalesced: :meth:`ask` queues an item and waits for its answer; the
    :meth:`run` task (owned by the step, cancelled when it ends) sends every item queued so
    far in one ``send`` (a ``claim_many`` or a ``record_many``) and answers each waiter; items
    queued meanwhile go into the next send. A failed send fails the items it carried, each
    waiter raising it as from its own single call."""

    def __init__(self, send: Callable[[list[K]], Awaitable[list[R]]]) -> None:
        self._send = send
        self._queue: list[tuple[K, asyncio.Future[R]]] = []
        self._wake = asyncio.Event()

    async def ask(self, item: K) -> R:
        answer: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.append((item, answer))
        self._wake.set()
        return await answer

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                batch = self._queue[:_BATCH_LIMIT]
                del self._queue[:_BATCH_LIMIT]
                try:
                    answers = await self._send([item for item, _ in batch])
                    if len(answers) != len(batch):
                        raise RuntimeError(
                            f"the fire ledger answered {len(answers)} of {len(batch)} items"
                        )
                except asyncio.CancelledError:
                    for _, answer in batch:
                        answer.cancel()
                    raise
                except Exception as exc:  # never left unanswered: each waiter raises it
                    for _, answer in batch:
                        if not answer.done():
                            answer.set_exception(exc)
                    continue
                for (_, answer), result in zip(batch, answers, strict=True):
                    if not answer.done():  # a waiter cancelled meanwhile: its claim stays
                        answer.set_result(result)  # in the ledger, taken over at expiry

    def cancel_queued(self) -> None:
        for _, answer in self._queue:
            answer.cancel()
        self._queue.clear()


@dataclass(frozen=True, slots=True)
class _Batch:
    """A step's coalesced ledger calls: the claims of its due times and their ``submitted``
    records."""

    claims: _Coalesced[tuple[str, int], Fire | None]
    records: _Coalesced[FireWrite, Fire | None]


_NEVER: Final = 2**62
_LOSING_STREAK: Final = 8  # lost claims in a row after which a step leaves the rest


@dataclass(frozen=True, slots=True)
class _Index:
    rev: str | None
    by_due: list[tuple[int, Job]]
    """Enabled jobs with a next due time (before jitter; -1: unreadable), earliest first."""
    first_due: int
    wake: int | None
    """The earliest jittered next due time."""


@dataclass
class StepReport:
    fired: list[tuple[str, int]] = field(default_factory=list)
    lost: list[tuple[str, int]] = field(default_factory=list)
    skipped: list[tuple[str, int, str]] = field(default_factory=list)
    uncounted: dict[str, int] = field(default_factory=dict)
    results: list[FireResult] = field(default_factory=list)


class Scheduler:
    def __init__(
        self,
        jobs: JobStore,
        ledger: FireLedger,
        port: Submitter,
        *,
        owner: str,
        clock: Clock,
        sleep: Callable[[float], Awaitable[None]],
        lease_ms: int = 30_000,
        poll_ms: int = 1000,
        max_catch_up: int = 10,
        request_for: Callable[[Job, int], RunRequest] = default_request,
        hooks: SchedulerHooks | None = None,
        max_parallel: int = 32,
    ) -> None:
        self._hooks = hooks or SchedulerHooks()
        self._jobs = jobs
        self._ledger = ledger
        self._port = port
        self._owner = owner
        self._clock = clock
        self._sleep = sleep
        self._lease_ms = lease_ms
        self._poll_ms = poll_ms
        self._max_catch_up = max_catch_up
        self._request_for = request_for
        self._max_parallel = max_parallel
        self._stepped = False  # a step loaded the jobs since the last next_wake_ms
        self._deferred = False  # the last step left due jobs to the next one (wake at once)
        self._next: dict[tuple[str, str, str, str, int, int], int | None] = {}
        self._index: _Index | None = None

    def _grace(self, job: Job) -> int:
        if job.grace_ms is not None:
            return job.grace_ms
        schedule = job.schedule()
        if isinstance(schedule, Every):
            return min(schedule.period_ms, _SIX_HOURS)
        first = schedule.next_after(self._clock.now_ms())
        second = None if first is None else schedule.next_after(first)
        return _SIX_HOURS if first is None or second is None else min(second - first, _SIX_HOURS)

    async def step(self) -> StepReport:
        """Fire or skip every due time that is due now (its jitter included). Jobs are
        handled concurrently (at most ``max_parallel`` at once; each job's due times in
        order), starting at a point of the job list that depends on this daemon's name, so
        two daemons stepping at once mostly claim different jobs first instead of queueing
        on the same rows. The report lists the jobs in the order they were loaded."""
        loaded, _quarantined = await self._jobs.load()
        self._stepped = True
        index = self._indexed(loaded)
        now = self._clock.now_ms()
        if index.first_due > now:
            return StepReport()  # nothing due: the common wake costs no walk of the jobs
        due = [job for at, job in index.by_due if at <= now]
        if not due:
            return StepReport()
        start = _spread(self._owner, len(due))
        order = due[start:] + due[:start]
        gate = asyncio.Semaphore(self._max_parallel)
        reports: dict[str, StepReport] = {}
        moves: dict[str, int] = {}

        losing = 0  # the latest fires in a row another daemon claimed first

        async def one(job: Job, batch: _Batch) -> None:
            nonlocal losing
            async with gate:
                if losing >= _LOSING_STREAK:
                    # Another daemon is ahead of this one on these jobs: leave them (their
                    # watermarks unmoved) to the next step, which sees its watermarks and
                    # claims only what is still unclaimed, instead of losing a claim each.
                    self._deferred = True
                    return
                reports[job.id], newest = await self._step_job(job, batch)
                if newest is not None:
                    moves[job.id] = newest
                lost = reports[job.id].lost and not reports[job.id].fired
                losing = losing + 1 if lost else 0

        batch = _Batch(
            claims=_Coalesced(
                lambda keys: self._ledger.claim_many(keys, self._owner, lease_ms=self._lease_ms)
            ),
            records=_Coalesced(self._ledger.record_many),
        )
        senders = [
            asyncio.create_task(batch.claims.run()),
            asyncio.create_task(batch.records.run()),
        ]
        try:
            await asyncio.gather(*(one(job, batch) for job in order))
        except asyncio.CancelledError:
            raise  # stopping: the ledger holds the fires, the next start lists them again
        except BaseException:
            await self._jobs.advance_many(dict(moves))  # the jobs that did step
            raise
        finally:
            for sender in senders:
                sender.cancel()
            for sender in senders:
                with contextlib.suppress(asyncio.CancelledError):
                    await sender
            batch.claims.cancel_queued()
            batch.records.cancel_queued()
        await self._jobs.advance_many(dict(moves))  # one write for every watermark moved
        report = StepReport()
        for job in due:
            part = reports.get(job.id)
            if part is None:
                continue  # deferred to the next step
            report.fired += part.fired
            report.lost += part.lost
            report.skipped += part.skipped
            report.uncounted.update(part.uncounted)
            report.results += part.results
        return report

    def _indexed(self, loaded: list[Job]) -> _Index:
        """The enabled jobs of ``loaded`` by their next due time, built once per job revision
        (``JobStore.revision``; every time when the store keeps none): a wake with nothing
        due looks at the first entry only, not at every job."""
        rev = self._jobs.revision
        if rev is not None and self._index is not None and self._index.rev == rev:
            return self._index
        by_due: list[tuple[int, Job]] = []
        wake: int | None = None
        for job in loaded:
            if not job.enabled:
                continue
            watermark = job.last_due_at_ms if job.last_due_at_ms is not None else job.created_at_ms
            try:
                nxt = self._next_due(job, watermark)
            except Exception:  # stepped at every wake: the step records why it cannot run
                by_due.append((-1, job))
                continue
            if nxt is None:
                continue
            by_due.append((nxt, job))
            jittered = nxt + jitter_ms(job, nxt)
            wake = jittered if wake is None else min(wake, jittered)
        by_due.sort(key=lambda entry: entry[0])
        first = by_due[0][0] if by_due else _NEVER
        self._index = _Index(rev=rev, by_due=by_due, first_due=first, wake=wake)
        return self._index

    def _next_due(self, job: Job, watermark: int) -> int | None:
        """The job's first due time after ``watermark`` (before jitter), cached by everything
        it depends on: an idle daemon does not evaluate every schedule at every wake."""
        key = (job.id, job.kind, job.expr, job.timezone, job.anchor_ms, watermark)
        if key in self._next:
            return self._next[key]
        if len(self._next) >= _NEXT_CACHE:
            self._next.clear()
        nxt = self._next[key] = job.schedule().next_after(watermark)
        return nxt

    async def _step_job(self, job: Job, batch: _Batch) -> tuple[StepReport, int | None]:
        """Fire or skip ``job``'s due times; also the newest due time handled (the new
        watermark, written by the step with the others), None when none was."""
        report = StepReport()
        now = self._clock.now_ms()
        watermark = job.last_due_at_ms if job.last_due_at_ms is not None else job.created_at_ms
        plan = plan_catch_up(
            job.schedule(),
            watermark_ms=watermark,
            now_ms=now - job.jitter_ms,
            policy=job.catch_up,
            grace_ms=self._grace(job),
            max_catch_up=self._max_catch_up,
        )
        newest = watermark
        for due in plan.fire:
            if due + jitter_ms(job, due) > now:
                break  # its jittered instant is still ahead: the timer comes back for it
            reason = await self._hooks.preflight(job, due)
            if reason is not None:
                await self._skip(job, due, reason, report)
                newest = max(newest, due)
                continue
            fire = await batch.claims.ask((job.id, due))
            if fire is None:
                result = FireResult("lost", None)  # another daemon owns this due time
            else:
                result = await submit_fire(
                    self._ledger,
                    self._port,
                    fire,
                    self._request_for(job, due),
                    lease_ms=self._lease_ms,
                    record=batch.records.ask,
                )
            report.results.append(result)
            (report.fired if result.status == "submitted" else report.lost).append((job.id, due))
            if result.status in ("submitted", "rejected"):
                await self._hooks.fired(job, result, "schedule")
            newest = max(newest, due)
        for skip in plan.skipped:
            await self._skip(job, skip.due_at_ms, skip.reason, report)
            newest = max(newest, skip.due_at_ms)
        if plan.uncounted:
            report.uncounted[job.id] = plan.uncounted
        return report, newest if newest > watermark else None

    async def _skip(self, job: Job, due_at_ms: int, reason: str, report: StepReport) -> None:
        """Record ``due_at_ms`` as skipped (claimed first: one daemon records it once)."""
        fire = await self._ledger.claim(job.id, due_at_ms, self._owner, lease_ms=1)
        if fire is None:
            return
        if await self._ledger.record(fire, status="skipped", outcome=reason) is not None:
            report.skipped.append((job.id, due_at_ms, reason))
            await self._hooks.skipped(job, due_at_ms, reason)

    async def recover(self) -> StepReport:
        """Take over fires whose owner stopped renewing: one never submitted is submitted now
        (the derived run id: if the dead owner's submission did land, the port answers its
        receipt and nothing runs twice); one left in flight is ended ``interrupted`` and not
        re-executed (retries are not built yet)."""
        report = StepReport()
        for fire in await self._ledger.take_over_expired(self._owner, lease_ms=self._lease_ms):
            job = await self._jobs.get(fire.job_id)
            if fire.status == "claimed" and job is not None:
                result = await submit_fire(
                    self._ledger,
                    self._port,
                    fire,
                    self._request_for(job, fire.due_at_ms),
                    lease_ms=self._lease_ms,
                )
                report.results.append(result)
                if result.status == "submitted":
                    report.fired.append((fire.job_id, fire.due_at_ms))
                if result.status in ("submitted", "rejected"):
                    await self._hooks.fired(job, result, "schedule")
                continue
            why = "the owner stopped while the run was in flight" if job else "the job is gone"
            ended = await self._ledger.record(fire, status="interrupted", outcome=why)
            if ended is not None:
                report.skipped.append((fire.job_id, fire.due_at_ms, "interrupted"))
                if job is not None:
                    await self._hooks.skipped(job, fire.due_at_ms, "interrupted")
        return report

    async def next_wake_ms(self) -> int:
        """When the next step is needed: the earliest jittered due time of any job, at most
        ``poll_ms`` from now. Right after a step it reads nothing (the step's index, moved
        with the watermarks the step wrote)."""
        now = self._clock.now_ms()
        loaded, _ = await self._jobs.load() if not self._stepped else (None, None)
        self._stepped = False
        if loaded is None:
            index = self._index
            if index is None or index.rev is None or index.rev != self._jobs.revision:
                loaded, _ = await self._jobs.load()
                index = self._indexed(loaded)
        else:
            index = self._indexed(loaded)
        wake = now + self._poll_ms
        if index.wake is not None:
            wake = min(wake, index.wake)
        if self._deferred:
            self._deferred = False
            wake = now
        return max(now, wake)

    async def run(self, *, steps: int | None = None) -> None:
        """Step, then sleep until the next wake; forever, or ``steps`` times."""
        done = 0
        while steps is None or done < steps:
            await self.step()
            done += 1
            delay_ms = await self.next_wake_ms() - self._clock.now_ms()
            await self._sleep(max(0, delay_ms) / 1000)
