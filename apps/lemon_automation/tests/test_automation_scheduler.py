"""The scheduler with an injected clock and sleep (no wall-clock sleeps): it wakes at the next
due time (not on a tick), catch-up after 3 missed due times under each policy, and two
schedulers on one store and one ledger fire each due time once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from lemon_automation.fire import router_run_id
from lemon_automation.jobs import Job, JobStore
from lemon_automation.scheduler import Scheduler
from lemon_core.clock import ManualClock
from lemon_core.execution import Receipt, RunRequest
from lemon_core.store import Store
from lemon_core.store.errors import StoreUnavailableError
from lemon_infra import MemoryFireLedger, SQLiteStore

T0 = 1_767_225_600_000
PERIOD = 2_000


class Port:
    def __init__(self) -> None:
        self.accepted: dict[str, Receipt] = {}
        self.started: list[RunRequest] = []

    async def submit(self, request: RunRequest) -> Receipt:
        assert request.run_id is not None
        if request.run_id not in self.accepted:
            self.started.append(request)
            self.accepted[request.run_id] = Receipt(
                run_id=request.run_id,
                session_key=request.session_key,
                requested_mode=request.queue_mode,
                actual_mode=request.queue_mode,
                status="started",
                at_ms=0,
            )
        return self.accepted[request.run_id]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with await SQLiteStore.open(tmp_path / "lemon.sqlite3") as s:
        yield s


def _job(**over: object) -> Job:
    fields: dict[str, object] = {
        "id": "j1",
        "name": "tick",
        "kind": "every",
        "expr": "2s",
        "anchor_ms": T0,
        "created_at_ms": T0,
        "prompt": "tick",
    }
    fields.update(over)
    return Job(**fields)  # type: ignore[arg-type]


def _scheduler(
    store: Store, ledger: MemoryFireLedger, port: Port, clock: ManualClock, owner: str
) -> tuple[Scheduler, list[float]]:
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.now += round(seconds * 1000)

    sched = Scheduler(
        JobStore(store), ledger, port, owner=owner, clock=clock, sleep=sleep, poll_ms=60_000
    )
    return sched, sleeps


async def test_the_timer_sleeps_to_the_next_due_time_and_fires_each_once(store: Store) -> None:
    clock = ManualClock(T0)
    ledger, port = MemoryFireLedger(clock=clock), Port()
    await JobStore(store).add(_job(), now_ms=T0)
    sched, sleeps = _scheduler(store, ledger, port, clock, "a")
    await sched.run(steps=11)
    assert sleeps[0] == pytest.approx(PERIOD / 1000)  # wakes at the due time, not a 60 s tick
    dues = [r.meta["due_at_ms"] for r in port.started]
    assert dues == [T0 + k * PERIOD for k in range(1, 11)]
    assert [r.run_id for r in port.started] == [router_run_id("j1", d) for d in dues]
    assert all(r.session_key == "agent:default:main:sub:cron_j1" for r in port.started)


@pytest.mark.parametrize(
    ("policy", "runs", "skipped"), [("latest", 1, 2), ("all", 3, 0), ("skip", 0, 3)]
)
async def test_catch_up_after_three_missed_due_times(
    store: Store, policy: str, runs: int, skipped: int
) -> None:
    clock = ManualClock(T0 + 3 * PERIOD + 10)  # the daemon was down for three due times
    ledger, port = MemoryFireLedger(clock=clock), Port()
    await JobStore(store).add(_job(catch_up=policy), now_ms=T0)
    sched, _ = _scheduler(store, ledger, port, clock, "a")
    report = await sched.step()
    assert len(port.started) == runs
    assert len(report.skipped) == skipped
    fires = await ledger.fires("j1")
    assert len(fires) == 3  # every missed due time has a record: run or skipped, with a reason
    assert sorted(f.status for f in fires) == sorted(["submitted"] * runs + ["skipped"] * skipped)
    assert all(
        f.outcome in ("coalesced", "missed_deadline") for f in fires if f.status == "skipped"
    )
    again = await sched.step()  # the watermark moved: nothing fires twice
    assert (again.fired, again.skipped) == ([], [])


async def test_two_schedulers_on_one_store_fire_each_due_time_once(store: Store) -> None:
    clock = ManualClock(T0)
    ledger, port_a, port_b = MemoryFireLedger(clock=clock), Port(), Port()
    await JobStore(store).add(_job(), now_ms=T0)
    a, _ = _scheduler(store, ledger, port_a, clock, "a")
    b, _ = _scheduler(store, ledger, port_b, clock, "b")
    for _ in range(10):
        clock.now += PERIOD
        await a.step()
        await b.step()
    dues = sorted(r.meta["due_at_ms"] for r in port_a.started + port_b.started)
    assert dues == [T0 + k * PERIOD for k in range(1, 11)]


async def test_a_backward_clock_step_never_fires_a_due_time_twice(store: Store) -> None:
    clock = ManualClock(T0 + PERIOD)
    ledger, port = MemoryFireLedger(clock=clock), Port()
    jobs = JobStore(store)
    await jobs.add(_job(), now_ms=T0)
    sched, _ = _scheduler(store, ledger, port, clock, "a")
    await sched.step()
    # The watermark is lost (a restored backup, a clock stepped back): the ledger key holds.
    await store.put("automation_jobs", "j1", msgspec.to_builtins(_job()))
    await store.put("automation_jobs_rev", "rev", "restored")  # a backup brings its revision
    clock.now = T0 + PERIOD
    report = await sched.step()
    assert len(port.started) == 1
    assert report.lost == [("j1", T0 + PERIOD)]


async def test_a_takeover_submits_a_claimed_fire_once_and_ends_an_in_flight_one(
    store: Store,
) -> None:
    clock = ManualClock(T0)
    ledger, port = MemoryFireLedger(clock=clock), Port()
    await JobStore(store).add(_job(), now_ms=T0)
    # Daemon A claimed two due times and died: one before its submit, one during the run.
    before = await ledger.claim("j1", T0 + PERIOD, "a", lease_ms=30_000)
    during = await ledger.claim("j1", T0 + 2 * PERIOD, "a", lease_ms=30_000)
    assert before is not None
    assert during is not None
    assert await ledger.record(during, status="submitted", run_id="run_x") is not None
    b, _ = _scheduler(store, ledger, port, clock, "b")
    assert (await b.recover()).fired == []  # live leases are left alone
    clock.now += 30_000
    report = await b.recover()
    assert report.fired == [("j1", T0 + PERIOD)]
    assert report.skipped == [("j1", T0 + 2 * PERIOD, "interrupted")]
    assert [r.run_id for r in port.started] == [router_run_id("j1", T0 + PERIOD)]
    late = await ledger.record(before, status="completed")
    assert late is None  # the dead owner's late write is refused by the fence
    again = await b.recover()
    assert (again.fired, again.skipped) == ([], [])


class _Counting:
    """The store, counting the calls the scheduler makes of it."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> object:
        attr = getattr(self.inner, name)
        if name in ("get", "put", "put_many", "scan", "delete"):

            async def counted(*args: object, **kwargs: object) -> object:
                self.calls.append(name)
                return await attr(*args, **kwargs)

            return counted
        return attr


async def test_an_idle_wake_reads_one_key_and_a_step_writes_its_watermarks_once(
    store: Store,
) -> None:
    """100 jobs: a wake with nothing due reads the jobs' revision only (no scan, no walk of
    the jobs: the next-due index); the step that fires all of them writes every watermark in
    one ``put_many``, after which this scheduler's next load reads nothing more."""
    clock = ManualClock(T0)
    counting = _Counting(store)
    jobs = JobStore(counting, max_jobs_per_agent=100)  # type: ignore[arg-type]  # delegates
    for i in range(100):
        await jobs.add(_job(id=f"j{i:03d}", name=f"t{i}", expr="1h"), now_ms=T0)
    port = Port()
    sched = Scheduler(
        jobs,
        MemoryFireLedger(clock=clock),
        port,
        owner="a",
        clock=clock,
        sleep=lambda _s: _never(),
        poll_ms=1000,
    )
    await sched.step()  # the first load scans
    counting.calls.clear()
    for _ in range(5):
        clock.now += 1000
        assert (await sched.step()).fired == []
        await sched.next_wake_ms()
    assert counting.calls == ["get"] * 5  # the revision, once per wake
    counting.calls.clear()
    clock.now = T0 + 3_600_000
    report = await sched.step()
    assert len(report.fired) == 100
    assert counting.calls.count("put_many") == 1  # one watermark write for the 100 jobs
    assert "scan" not in counting.calls
    counting.calls.clear()
    assert await sched.next_wake_ms() == T0 + 3_600_000 + 1000
    assert "scan" not in counting.calls  # the write moved this store's cache with it
    loaded, _ = await jobs.load()
    assert {j.last_due_at_ms for j in loaded} == {T0 + 3_600_000}


async def _never() -> None:
    raise AssertionError("the test drives the steps itself")


class _CountingLedger:
    """A MemoryFireLedger that counts its calls (by method name)."""

    def __init__(self, ledger: MemoryFireLedger) -> None:
        self.ledger = ledger
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> object:
        self.calls.append(name)
        return getattr(self.ledger, name)


async def test_a_burst_of_due_jobs_is_claimed_and_recorded_in_batches(store: Store) -> None:
    """100 jobs due at once: the step's claims and ``submitted`` records go to the ledger
    coalesced (``claim_many`` / ``record_many``, at most one call per wave of concurrent
    jobs), not one call each; every due time is claimed and submitted exactly once."""
    clock = ManualClock(T0)
    jobs = JobStore(store, max_jobs_per_agent=100)
    for i in range(100):
        await jobs.add(_job(id=f"j{i:03d}", name=f"t{i}", expr="1h"), now_ms=T0)
    ledger = _CountingLedger(MemoryFireLedger(clock=clock))
    port = Port()
    sched = Scheduler(
        jobs,
        ledger,  # type: ignore[arg-type]  # delegates every call to a MemoryFireLedger
        port,
        owner="a",
        clock=clock,
        sleep=lambda _s: _never(),
        max_parallel=32,
    )
    clock.now = T0 + 3_600_000
    report = await sched.step()
    assert len(report.fired) == 100
    assert sorted(r.run_id or "" for r in port.started) == sorted(
        router_run_id(f"j{i:03d}", T0 + 3_600_000) for i in range(100)
    )
    assert "claim" not in ledger.calls
    assert "record" not in ledger.calls
    assert 1 <= ledger.calls.count("claim_many") <= 8  # 100 jobs, 32 at a time
    assert 1 <= ledger.calls.count("record_many") <= 8
    for i in range(100):
        fire = await ledger.ledger.get(f"j{i:03d}", T0 + 3_600_000)
        assert fire is not None
        assert (fire.owner, fire.fence, fire.status) == ("a", 1, "submitted")


class _DownLedger(_CountingLedger):
    async def claim_many(self, *_: object, **__: object) -> object:
        raise StoreUnavailableError("the ledger is down")


async def test_a_failed_batched_claim_fails_the_step_and_leaves_no_waiter_hanging(
    store: Store,
) -> None:
    """The store is down when the step claims its burst: the step raises the store's error
    (as a single claim's failure would), it does not wait forever, and nothing is submitted
    nor any watermark moved (the next step lists the same due times again)."""
    clock = ManualClock(T0)
    jobs = JobStore(store, max_jobs_per_agent=100)
    for i in range(40):
        await jobs.add(_job(id=f"j{i:03d}", name=f"t{i}", expr="1h"), now_ms=T0)
    port = Port()
    sched = Scheduler(
        jobs,
        _DownLedger(MemoryFireLedger(clock=clock)),  # type: ignore[arg-type]  # delegates
        port,
        owner="a",
        clock=clock,
        sleep=lambda _s: _never(),
    )
    clock.now = T0 + 3_600_000
    with pytest.raises(StoreUnavailableError, match="down"):
        async with asyncio.timeout(10):
            await sched.step()
    assert port.started == []
    loaded, _ = await jobs.load()
    assert {j.last_due_at_ms for j in loaded} == {None}
