"""Two schedulers sharing one PostgreSQL schema (two stores, two pools: two daemons with only
their own memory), each with its own port: over ten due times of an ``every 2s`` job, stepping
concurrently at each due time, every due time is submitted exactly once, and a job added on
daemon A is listed by daemon B."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator

import pytest

from lemon_automation.jobs import Job, JobStore
from lemon_automation.scheduler import Scheduler
from lemon_core.clock import ManualClock
from lemon_core.execution import Receipt, RunRequest
from lemon_infra import PostgresFireLedger, PostgresStore, drop_schema

DSN = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
T0 = 1_767_225_600_000
PERIOD = 2_000


class Port:
    def __init__(self) -> None:
        self.started: list[RunRequest] = []

    async def submit(self, request: RunRequest) -> Receipt:
        self.started.append(request)
        assert request.run_id is not None
        return Receipt(
            run_id=request.run_id,
            session_key=request.session_key,
            requested_mode=request.queue_mode,
            actual_mode=request.queue_mode,
            status="started",
            at_ms=0,
        )


@pytest.fixture
async def stores() -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    schema = f"auto2d_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    a = await PostgresStore.open(DSN, schema=schema, max_connections=4)
    b = await PostgresStore.open(DSN, schema=schema, max_connections=4)
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()
        await drop_schema(DSN, schema)


async def test_two_daemons_on_postgres_fire_each_due_time_exactly_once(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    store_a, store_b = stores
    clock = ManualClock(T0)

    async def no_sleep(_: float) -> None:
        return None

    job = Job(
        id="j1",
        name="tick",
        kind="every",
        expr="2s",
        anchor_ms=T0,
        created_at_ms=T0,
        prompt="tick",
    )
    await JobStore(store_a).add(job, now_ms=T0)
    listed, _ = await JobStore(store_b).load()
    assert [j.id for j in listed] == ["j1"]  # added on A, seen by B
    port_a, port_b = Port(), Port()
    a = Scheduler(
        JobStore(store_a),
        PostgresFireLedger(store_a),
        port_a,
        owner="a",
        clock=clock,
        sleep=no_sleep,
    )
    b = Scheduler(
        JobStore(store_b),
        PostgresFireLedger(store_b),
        port_b,
        owner="b",
        clock=clock,
        sleep=no_sleep,
    )
    for _ in range(10):
        clock.now += PERIOD
        await asyncio.gather(a.step(), b.step())
    dues = sorted(r.meta["due_at_ms"] for r in port_a.started + port_b.started)
    assert dues == [T0 + k * PERIOD for k in range(1, 11)]
    fires = await PostgresFireLedger(store_a).fires("j1", limit=100)
    assert len(fires) == 10
    assert all(f.status == "submitted" for f in fires)


async def test_two_daemons_writing_overlapping_watermarks_at_once_never_deadlock(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """Both daemons' steps move the watermarks of the same jobs (each fired some, lost the
    others), finishing them in different orders; each writes them in one transaction. Rows
    locked in opposite orders deadlock on PostgreSQL (the bench saw it): the writes are made
    in job id order, so every round completes."""
    store_a, store_b = stores
    a, b = JobStore(store_a, max_jobs_per_agent=300), JobStore(store_b, max_jobs_per_agent=300)
    ids = [f"j{i:03d}" for i in range(200)]
    for job_id in ids:
        job = Job(
            id=job_id,
            name=job_id,
            kind="every",
            expr="1s",
            anchor_ms=T0,
            created_at_ms=T0,
            prompt="tick",
        )
        await a.add(job, now_ms=T0)
    await b.load()
    for round_ in range(1, 6):
        due = T0 + round_ * 1000
        gate = asyncio.Event()

        tasks = [
            asyncio.create_task(_advance(gate, a, dict.fromkeys(ids, due))),
            asyncio.create_task(_advance(gate, b, dict.fromkeys(ids[::-1], due))),
        ]
        await asyncio.sleep(0)
        gate.set()
        await asyncio.gather(*tasks)
    loaded, _ = await JobStore(store_a, max_jobs_per_agent=300).load()
    assert {j.last_due_at_ms for j in loaded} == {T0 + 5000}


async def _advance(gate: asyncio.Event, store: JobStore, moves: dict[str, int]) -> None:
    await gate.wait()
    await store.advance_many(moves)
