"""Hypothesis state machine over submit / cancel / complete / fail / launch failure / slot
expiry / restart.

Invariants, checked after every step: never more than ``max_concurrent_runs`` executing, at
most one executing per conversation key, FIFO per key, at most one ``run_completed`` per
run, and ``is_live(run)`` exactly until that ``run_completed``. At teardown (after a final
stop): every accepted run got exactly one ``run_completed``, and no slot, lock, worker or
task is left.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from lemon_core.bus import Bus
from lemon_core.execution import ExecutionJob, ExecutionResult, ExecutionSink
from lemon_gateway import Gateway, GatewayConfig, SlotGrant
from lemon_infra import MemoryStore
from lemon_platform_test.gateway_kit import RunEvents, command

MAX_RUNS = 2
KEYS = ("k0", "k1", "k2")


class _Controlled:
    """An executor whose runs end only when the state machine says so."""

    def __init__(self) -> None:
        self.outcomes: dict[str, asyncio.Future[bool]] = {}
        self.executing: dict[str, str] = {}
        self.started: list[str] = []
        self.launch_fail: set[str] = set()
        self.max_executing = 0
        self.violations: list[str] = []

    async def prepare(self, job: ExecutionJob) -> _Prepared:
        if job.run_id in self.launch_fail:
            raise RuntimeError("scripted launch failure")
        return _Prepared(self, job)


class _Prepared:
    def __init__(self, owner: _Controlled, job: ExecutionJob) -> None:
        self.owner = owner
        self.job = job

    async def execute(self, sink: ExecutionSink) -> ExecutionResult:
        c, run_id, key = self.owner, self.job.run_id, self.job.session_key
        if key in c.executing.values():
            c.violations.append(f"{run_id}: second executing run on {key}")
        c.executing[run_id] = key
        c.max_executing = max(c.max_executing, len(c.executing))
        c.started.append(run_id)
        future = c.outcomes.setdefault(run_id, asyncio.get_running_loop().create_future())
        try:
            ok = await future
            sink.delta("x")
            if not ok:
                raise RuntimeError("scripted failure")
            return ExecutionResult(ok=True, answer="done")
        finally:
            del c.executing[run_id]


class GatewayMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.bus = Bus()
        self.store = MemoryStore()
        self.executor = _Controlled()
        self.events = RunEvents(self.bus)
        self.accepted: list[str] = []
        self.by_key: dict[str, list[str]] = {k: [] for k in KEYS}
        self.counter = 0
        self.gateways: list[Gateway] = []
        self.gw = self._start()

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def _settle(self) -> None:
        async def ticks() -> None:
            for _ in range(30):
                await asyncio.sleep(0)

        self._run(ticks())

    def _start(self) -> Gateway:
        cfg = GatewayConfig(max_concurrent_runs=MAX_RUNS, launch_retry_backoff_s=0)
        gw = Gateway(bus=self.bus, executor=self.executor, store=self.store, config=cfg)  # type: ignore[arg-type]  # structural executor
        self._run(gw.start())
        self.gateways.append(gw)
        return gw

    def _live(self) -> list[str]:
        return [r for r in self.accepted if not self.events.completions(r)]

    @rule(key=st.sampled_from(KEYS), launch_fails=st.booleans(), cancel_now=st.booleans())
    def submit(self, key: str, launch_fails: bool, cancel_now: bool) -> None:
        self.counter += 1
        run_id = f"run-{self.counter}"
        if launch_fails:
            self.executor.launch_fail.add(run_id)
        self.events.watch(run_id)

        async def submit() -> None:
            self.gw.submit_execution(command(run_id, session=key))
            if cancel_now:  # in the same tick, before the run's task has started
                self.gw.cancel(run_id)

        self._run(submit())
        self.accepted.append(run_id)
        self.by_key[key].append(run_id)
        self._settle()

    @precondition(lambda self: bool(self.accepted))
    @rule(pick=st.integers(min_value=0, max_value=10_000))
    def cancel(self, pick: int) -> None:
        run_id = self.accepted[pick % len(self.accepted)]

        async def cancel_twice() -> None:
            self.gw.cancel(run_id)
            self.gw.cancel(run_id)

        self._run(cancel_twice())
        self._settle()

    def _resolve(self, pick: int, ok: bool) -> None:
        executing = sorted(self.executor.executing)
        if not executing:
            return
        run_id = executing[pick % len(executing)]
        future = self.executor.outcomes[run_id]
        if not future.done():
            future.set_result(ok)
        self._settle()

    @rule(pick=st.integers(min_value=0, max_value=10_000))
    def complete(self, pick: int) -> None:
        self._resolve(pick, True)

    @rule(pick=st.integers(min_value=0, max_value=10_000))
    def fail(self, pick: int) -> None:
        self._resolve(pick, False)

    @rule(key=st.sampled_from(KEYS))
    def expire_slot_waiters(self, key: str) -> None:
        """Slot waiters time out and retry with new generations; a stale release of an
        old generation is ignored."""

        async def expire() -> None:
            self.gw.scheduler.expire_waiters(0)
            stale = SlotGrant(key=("session", key), generation=0, slot_id=0)
            assert not self.gw.scheduler.release(stale)

        self._run(expire())
        self._settle()

    @rule()
    def restart(self) -> None:
        self._run(self.gw.stop())
        self._assert_quiescent(self.gw)
        self.gw = self._start()

    @invariant()
    def concurrency_and_ordering_hold(self) -> None:
        ex = self.executor
        assert not ex.violations, ex.violations
        assert ex.max_executing <= MAX_RUNS
        assert len(ex.executing) <= MAX_RUNS
        assert self.gw.scheduler.statistics().in_flight <= MAX_RUNS
        started_at = {r: i for i, r in enumerate(ex.started)}
        for runs in self.by_key.values():
            order = [started_at[r] for r in runs if r in started_at]
            assert order == sorted(order), f"FIFO broken: {runs} started at {order}"
        for run_id in self.accepted:
            completions = len(self.events.completions(run_id))
            assert completions <= 1
            # RunLiveness: live from acceptance until its run_completed is published.
            assert self.gw.is_live(run_id) == (completions == 0), run_id

    def _assert_quiescent(self, gw: Gateway) -> None:
        stats = gw.statistics()
        assert stats.runs.live == 0, stats
        slots = stats.slots
        assert (slots.in_flight, slots.waiting, slots.generations_tracked) == (0, 0, 0)
        assert (stats.locks.held, stats.locks.waiting) == (0, 0), stats
        assert (stats.workers, stats.tasks) == (0, 0), stats

    def _drain(self) -> None:
        """Let every accepted run finish (completing whatever executes) while running."""
        for _ in range(10 * len(self.accepted) + 10):
            if self.gw.statistics().runs.live == 0:
                return
            for future in self.executor.outcomes.values():
                if not future.done():
                    future.set_result(True)
            self._settle()
        raise AssertionError(f"runs did not drain: {self.gw.debug_snapshot()}")

    def teardown(self) -> None:
        try:
            # Quiescence with the gateway still running, then after a stop.
            self._drain()
            self._assert_quiescent(self.gw)
            self._run(self.gw.stop())
            for gw in self.gateways:
                self._assert_quiescent(gw)
            for run_id in self.accepted:
                assert len(self.events.completions(run_id)) == 1, run_id
            assert not self.executor.executing
        finally:
            self.events.close()
            self.loop.close()


GatewayMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_gateway_state_machine = GatewayMachine.TestCase
