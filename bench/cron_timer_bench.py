"""The scheduler's timer: fire lateness under load and idle cost, each next to its baseline.

    .venv/bin/python bench/cron_timer_bench.py [--jobs 1000] [--idle-s 60] [--dsn DSN]

* Fire lateness: ``--jobs`` jobs due within the same second, on 2 daemons (two schedulers, each
  with its own PostgreSQL pool on one schema, running their real timer loop
  ``Scheduler.run`` on the wall clock). Lateness is due time -> the run's submission to the
  session port (what ``cron_run_started`` follows), p50 / p99 / max, and the duplicates
  (submissions beyond one per due time, fires in the ledger beyond one per job). Baselines in
  the same run: ``--jobs`` bare asyncio timers (``loop.call_at``) due at the same instants,
  and the public Lemon's fixed 60 s tick (a due time waits for the next tick: uniform over
  [0, 60 s), so p50 30 s and p99 59.4 s; stated, not run).
* Idle cost: one daemon's whole automation loop (``AutomationService.run``: timer, takeover
  scan, retries, the 60 s ``cron_tick``) holding ``--jobs`` jobs none of which is due, on a
  SQLite store (the default) and on PostgreSQL, for ``--idle-s`` seconds: this process's CPU
  seconds (user + system) scaled to one hour. The baseline: the same loop with no job.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec

from lemon_automation.jobs import JOBS_REV_TABLE, JOBS_TABLE, Job, JobStore
from lemon_automation.runs import CronRunStore
from lemon_automation.scheduler import Scheduler
from lemon_automation.service import AutomationService
from lemon_core.bus import Bus
from lemon_core.clock import SYSTEM_CLOCK
from lemon_core.execution import Receipt, RunRequest
from lemon_core.fire_ledger import FireLedger
from lemon_core.store import Store
from lemon_infra import (
    PostgresFireLedger,
    PostgresStore,
    SQLiteFireLedger,
    SQLiteStore,
    drop_schema,
)

HOUR_MS = 3_600_000


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class _Port:
    """The session port as the scheduler sees it: ``submit`` notes when each run started."""

    def __init__(self, progress: asyncio.Event | None = None) -> None:
        self.started: dict[tuple[str, int], float] = {}
        self.count = 0
        self.progress = progress or asyncio.Event()

    async def submit(self, request: RunRequest) -> Receipt:
        self.count += 1
        self.progress.set()
        due = int(request.meta["due_at_ms"])
        self.started.setdefault((str(request.meta["cron_job_id"]), due), time.time() * 1000)
        assert request.run_id is not None
        return Receipt(
            run_id=request.run_id,
            session_key=request.session_key,
            requested_mode=request.queue_mode,
            actual_mode=request.queue_mode,
            status="started",
            at_ms=0,
        )


class _IdlePort(_Port):
    """Enough of a SessionPort for an idle service: a run-event stream that stays silent."""

    def watch_all(self) -> Any:
        return _Silent()

    async def runs(self, **_: Any) -> list[Any]:
        return []


class _Silent:
    def __aiter__(self) -> _Silent:
        return self

    async def __anext__(self) -> Any:
        await asyncio.Event().wait()

    def close(self) -> None:
        return None


def _job(i: int, *, anchor_ms: int, every: str) -> Job:
    return Job(
        id=f"bench_{i:05d}",
        name=f"bench {i}",
        kind="every",
        expr=every,
        anchor_ms=anchor_ms,
        created_at_ms=anchor_ms,
        prompt="bench",
    )


@contextlib.asynccontextmanager
async def _schema(dsn: str) -> AsyncIterator[str]:
    name = f"cron_timer_{uuid.uuid4().hex[:8]}"
    try:
        yield name
    finally:
        await drop_schema(dsn, name)


async def _lateness(dsn: str, jobs: int) -> None:
    async with _schema(dsn) as schema:
        a = await PostgresStore.open(dsn, schema=schema, max_connections=4)
        b = await PostgresStore.open(dsn, schema=schema, max_connections=4)
        try:
            lead_ms = 4000  # time to load the jobs before the first is due
            base = int(time.time() * 1000) + lead_ms
            # ``every 1h`` jobs whose first due time is base + (spread within one second)
            dues = [base + (i * 1000) // jobs for i in range(jobs)]
            store = JobStore(a, max_jobs_per_agent=jobs + 1)
            # One batch (a put per job took longer than the lead on a loaded machine, so the
            # daemons started after the first due time and the setup counted as lateness).
            await a.put_many(
                [
                    (
                        JOBS_TABLE,
                        f"bench_{i:05d}",
                        _as_row(_job(i, anchor_ms=due - HOUR_MS, every="1h")),
                        None,
                    )
                    for i, due in enumerate(dues)
                ]
            )
            await a.put(JOBS_REV_TABLE, "rev", uuid.uuid4().hex)  # as JobStore writes it
            assert len((await store.load())[0]) == jobs
            margin_ms = base - time.time() * 1000  # the lead left when the daemons start
            progress = asyncio.Event()
            ports = [_Port(progress), _Port(progress)]
            schedulers = [
                Scheduler(
                    JobStore(s, max_jobs_per_agent=jobs + 1),
                    PostgresFireLedger(s),
                    port,
                    owner=name,
                    clock=SYSTEM_CLOCK,
                    sleep=asyncio.sleep,
                    lease_ms=60_000,
                    poll_ms=1000,
                )
                for s, port, name in ((a, ports[0], "a"), (b, ports[1], "b"))
            ]
            tasks = [asyncio.create_task(s.run()) for s in schedulers]
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(lead_ms / 1000 + 30):
                    while len({k for p in ports for k in p.started}) < jobs:
                        progress.clear()
                        await progress.wait()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            started: dict[tuple[str, int], list[float]] = {}
            for port in ports:
                for key, at in port.started.items():
                    started.setdefault(key, []).append(at)
            late = [min(v) - key[1] for key, v in started.items()]
            duplicates = sum(len(v) - 1 for v in started.values())
            ledger = PostgresFireLedger(a)
            fires = 0
            for i in range(jobs):
                fires += len(await ledger.fires(f"bench_{i:05d}", limit=10))
        finally:
            await a.close()
            await b.close()
    timers = await _bare_timers(jobs)
    print(f"fire lateness, {jobs} jobs due within one second, 2 daemons on PostgreSQL:")
    print(
        f"  scheduler (due -> submit)   p50 {_pct(late, 0.5):8.1f} ms  p99 "
        f"{_pct(late, 0.99):8.1f} ms  max {max(late):8.1f} ms  ({len(late)} of {jobs} fired; "
        f"a {ports[0].count}, b {ports[1].count} submissions)"
    )
    print(
        f"  bare asyncio timers         p50 {_pct(timers, 0.5):8.1f} ms  p99 "
        f"{_pct(timers, 0.99):8.1f} ms  max {max(timers):8.1f} ms"
    )
    print("  public Lemon's 60 s tick    p50  30000.0 ms  p99  59400.0 ms  (stated: uniform)")
    print(f"  duplicates: {duplicates} submissions, {fires - jobs} ledger fires beyond one per job")
    print(
        f"  the daemons started {margin_ms:.0f} ms before the first due time"
        + ("" if margin_ms > 0 else " (AFTER it: the setup overran the lead; figures are off)")
    )


def _as_row(job: Job) -> dict[str, Any]:
    row: dict[str, Any] = msgspec.to_builtins(job)
    return row


async def _bare_timers(n: int) -> list[float]:
    loop = asyncio.get_running_loop()
    start = time.time() * 1000 + 500
    dues = [start + (i * 1000) / n for i in range(n)]
    late: list[float] = []
    done = asyncio.Event()

    def fired(due: float) -> None:
        late.append(time.time() * 1000 - due)
        if len(late) == n:
            done.set()

    offset = loop.time() - time.time()
    for due in dues:
        loop.call_at(due / 1000 + offset, fired, due)
    await done.wait()
    return late


async def _idle_service(store: Store, ledger: FireLedger, jobs: int, seconds: float) -> float:
    """CPU seconds per hour of one service holding ``jobs`` jobs none of which is due."""
    now = int(time.time() * 1000)
    for i in range(jobs):  # daily jobs, next due in ~12 h
        await store.put(
            JOBS_TABLE,
            f"bench_{i:05d}",
            _as_row(_job(i, anchor_ms=now + 12 * HOUR_MS - 86_400_000, every="24h")),
        )
    await store.put(JOBS_REV_TABLE, "rev", uuid.uuid4().hex)  # what JobStore writes with a job
    service = AutomationService(
        jobs=JobStore(store, max_jobs_per_agent=jobs + 1),
        runs=CronRunStore(store),
        ledger=ledger,
        port=_IdlePort(),  # type: ignore[arg-type]  # what an idle service calls of a port
        bus=Bus(),
        owner="bench",
        home=Path(tempfile.gettempdir()),
    )
    task = asyncio.create_task(service.run())
    await asyncio.sleep(1.0)  # started
    cpu0, wall0 = os.times(), time.monotonic()
    await asyncio.sleep(seconds)
    cpu1, wall1 = os.times(), time.monotonic()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    used = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return used * 3600 / (wall1 - wall0)


async def _idle(dsn: str, jobs: int, seconds: float) -> None:
    print(f"idle cost, CPU seconds per hour of this process ({seconds:g} s measured each):")
    for count in (0, jobs):
        with tempfile.TemporaryDirectory() as tmp:
            store = await SQLiteStore.open(Path(tmp) / "lemon.sqlite3")
            ledger = await SQLiteFireLedger.open(Path(tmp) / "fires.sqlite3")
            try:
                per_hour = await _idle_service(store, ledger, count, seconds)
            finally:
                await ledger.close()
                await store.close()
        print(f"  SQLite,     {count:5d} idle jobs: {per_hour:7.1f} s/h")
        async with _schema(dsn) as schema:
            pg = await PostgresStore.open(dsn, schema=schema, max_connections=2)
            try:
                per_hour = await _idle_service(pg, PostgresFireLedger(pg), count, seconds)
            finally:
                await pg.close()
        print(f"  PostgreSQL, {count:5d} idle jobs: {per_hour:7.1f} s/h")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--idle-s", type=float, default=60.0)
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--only", choices=("lateness", "idle"), default=None)
    args = parser.parse_args()
    if args.only in (None, "lateness"):
        asyncio.run(_lateness(args.dsn, args.jobs))
    if args.only in (None, "idle"):
        asyncio.run(_idle(args.dsn, args.jobs, args.idle_s))


if __name__ == "__main__":
    main()
