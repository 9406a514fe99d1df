"""Each due time fires once across daemons: two daemons (two stores on one PostgreSQL schema, or
two connections to one SQLite file) race for the same ten due times, released together at a
barrier; every due time is submitted once, with the run id derived from (job, due time). A
takeover after the owner died re-submits the same run id (the port answers the first receipt)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import psycopg
import pytest

from lemon_automation.fire import fire_due, router_run_id, submit_fire
from lemon_core.clock import ManualClock
from lemon_core.execution import Receipt, RunRequest
from lemon_core.fire_ledger import FireLedger
from lemon_infra import PostgresFireLedger, PostgresStore, SQLiteFireLedger, drop_schema

DSN = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
DUE0 = 1_767_225_600_000
PERIOD = 2_000
Expire = Callable[[], Awaitable[None]]


class RecordingPort:
    """The session port's ``submit`` as the contract has it: idempotent by run id."""

    def __init__(self) -> None:
        self.accepted: dict[str, Receipt] = {}
        self.started: list[str] = []

    async def submit(self, request: RunRequest) -> Receipt:
        assert request.run_id is not None
        if request.run_id in self.accepted:
            return self.accepted[request.run_id]
        await asyncio.sleep(0)
        self.started.append(request.run_id)
        receipt = Receipt(
            run_id=request.run_id,
            session_key=request.session_key,
            requested_mode=request.queue_mode,
            actual_mode=request.queue_mode,
            status="started",
            at_ms=0,
        )
        self.accepted[request.run_id] = receipt
        return receipt


@pytest.fixture(params=["sqlite", "postgres"])
async def two_ledgers(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[FireLedger, FireLedger, Expire]]:
    if request.param == "sqlite":
        clock = ManualClock(DUE0)
        a = await SQLiteFireLedger.open(tmp_path / "lemon.sqlite3", clock=clock)
        b = await SQLiteFireLedger.open(tmp_path / "lemon.sqlite3", clock=clock)

        async def advance() -> None:
            clock.now += 60_000

        try:
            yield a, b, advance
        finally:
            await a.close()
            await b.close()
        return
    schema = f"autofire_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    sa = await PostgresStore.open(DSN, schema=schema, max_connections=4)
    sb = await PostgresStore.open(DSN, schema=schema, max_connections=4)

    async def expire_all() -> None:
        async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
            await conn.execute(f'UPDATE "{schema}".lemon_fires SET lease_until_ms = 0')

    try:
        yield PostgresFireLedger(sa), PostgresFireLedger(sb), expire_all
    finally:
        await sa.close()
        await sb.close()
        await drop_schema(DSN, schema)


def _request() -> RunRequest:
    return RunRequest(origin="cron", session_key="agent:default:main", prompt="tick")


async def test_two_daemons_fire_each_due_time_once(
    two_ledgers: tuple[FireLedger, FireLedger, Expire],
) -> None:
    a, b, _ = two_ledgers
    port_a, port_b = RecordingPort(), RecordingPort()
    gate = asyncio.Event()

    async def daemon(name: str, ledger: FireLedger, port: RecordingPort, due: int) -> str:
        await gate.wait()
        result = await fire_due(
            ledger,
            port,
            job_id="job-1",
            due_at_ms=due,
            owner=name,
            lease_ms=30_000,
            request=_request(),
        )
        return result.status

    tasks = [
        asyncio.create_task(daemon(name, ledger, port, DUE0 + k * PERIOD))
        for k in range(10)
        for name, ledger, port in (("a", a, port_a), ("b", b, port_b))
    ]
    await asyncio.sleep(0)
    gate.set()
    statuses = await asyncio.gather(*tasks)
    assert sorted(statuses).count("submitted") == 10
    assert statuses.count("lost") == 10
    started = port_a.started + port_b.started
    assert sorted(started) == sorted(router_run_id("job-1", DUE0 + k * PERIOD) for k in range(10))
    for k in range(10):
        fire = await a.get("job-1", DUE0 + k * PERIOD)
        assert fire is not None
        assert fire.status == "submitted"
        assert fire.run_id == router_run_id("job-1", DUE0 + k * PERIOD)


async def test_a_takeover_resubmits_the_same_run_id_and_starts_nothing_new(
    two_ledgers: tuple[FireLedger, FireLedger, Expire],
) -> None:
    a, b, expire = two_ledgers
    port = RecordingPort()  # one port: the router's view shared by both daemons
    first = await fire_due(
        a, port, job_id="job-1", due_at_ms=DUE0, owner="a", lease_ms=2_000, request=_request()
    )
    assert first.status == "submitted"
    assert first.fire is not None
    assert await b.take_over_expired("b", lease_ms=2_000) == []  # a live lease is kept
    await expire()  # the owner dies: its lease expires
    (taken,) = await b.take_over_expired("b", lease_ms=30_000)
    assert (taken.owner, taken.fence) == ("b", first.fire.fence + 1)
    again = await submit_fire(b, port, taken, _request())
    assert again.status == "submitted"
    assert port.started == [router_run_id("job-1", DUE0)]
    # The dead owner's late write is refused by the fence.
    assert await a.record(first.fire, status="completed") is None


class _SlowPort(RecordingPort):
    """A submission that takes longer than the fire's lease: it returns only after the lease
    was renewed once and the clock passed the claim's original expiry."""

    def __init__(self, clock: ManualClock, renewed: asyncio.Event, other: FireLedger) -> None:
        super().__init__()
        self.clock = clock
        self.renewed = renewed
        self.other = other
        self.taken: list[object] = []

    async def submit(self, request: RunRequest) -> Receipt:
        self.clock.now += 200  # most of the 300 ms lease gone
        async with asyncio.timeout(10):
            await self.renewed.wait()  # the claimer's renewal came while we submit
        self.clock.now += 200  # past the claim's first expiry
        self.taken = await self.other.take_over_expired("b", lease_ms=300)
        return await super().submit(request)


async def test_a_fire_keeps_its_lease_while_the_submission_is_slow() -> None:
    """A submission slower than the lease (a busy store, a session handed to another daemon)
    must not let the claim lapse: the claimer renews it meanwhile, no other daemon takes the
    fire over, and the submission is recorded."""
    from lemon_infra import MemoryFireLedger

    clock = ManualClock(DUE0)
    ledger = MemoryFireLedger(clock=clock)
    renewed = asyncio.Event()

    class Spy:
        def __getattr__(self, name: str) -> object:
            return getattr(ledger, name)

        async def renew(self, fire: object, *, lease_ms: int) -> object:
            out = await ledger.renew(fire, lease_ms=lease_ms)  # type: ignore[arg-type]
            renewed.set()
            return out

    port = _SlowPort(clock, renewed, ledger)
    request = RunRequest(origin="cron", session_key="agent:default:main", prompt="/echo tick")
    result = await fire_due(
        Spy(),  # type: ignore[arg-type]
        port,
        job_id="job",
        due_at_ms=DUE0,
        owner="a",
        lease_ms=300,
        request=request,
    )
    assert port.taken == []  # nobody took the fire over while it was being submitted
    assert result.status == "submitted"
    assert result.fire is not None
    assert result.fire.owner == "a"
    assert port.started == [router_run_id("job", DUE0)]
