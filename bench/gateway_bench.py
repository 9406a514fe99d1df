"""Gateway benchmark: submit-to-run_started latency, throughput, idle memory.

Runs the gateway with a no-op executor next to a bare baseline measured in the same run
(one ``asyncio.Lock`` per conversation key plus one ``asyncio.Semaphore``, a task per job,
running the same no-op executor), and prints medians and ratios.

    uv run python bench/gateway_bench.py            # default run (well under 2 minutes)
    uv run python bench/gateway_bench.py --quick    # smoke run

Both throughput sides time the same span: submitting (gateway) or creating a task per job
(baseline), then awaiting every run's completion (handles / tasks); commands and jobs are
built before the clock starts.

Goals: p50 submit-to-run_started <= 50 us; throughput >= half the baseline (with run
history >= 0.3x);
10,000 idle conversations <= 30 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
import tracemalloc
from typing import Any

from lemon_core.bus import Bus
from lemon_core.execution import (
    ExecutionCommand,
    ExecutionJob,
    ExecutionResult,
    ExecutionSink,
    PreparedExecution,
    ResumeToken,
)
from lemon_gateway import Gateway, GatewayConfig
from lemon_infra import MemoryStore


class _NoopPrepared:
    def __init__(self, resume: ResumeToken | None) -> None:
        self._resume = resume

    async def execute(self, sink: ExecutionSink) -> ExecutionResult:
        return ExecutionResult(ok=True, resume=self._resume)


_NOOP = _NoopPrepared(None)


class NoopExecutor:
    """Launches instantly and completes at once (optionally with a native resume token)."""

    def __init__(self, *, with_resume: bool = False) -> None:
        self.with_resume = with_resume

    async def prepare(self, job: ExecutionJob) -> PreparedExecution:
        if self.with_resume:
            return _NoopPrepared(ResumeToken.native(job.run_id))
        return _NOOP


class TimingBus(Bus):
    """A Bus that stamps when each run's run_started is published."""

    def __init__(self) -> None:
        super().__init__()
        self.started_at: dict[str, int] = {}

    def broadcast_event(self, topic: str, type: str, payload: Any = None, meta: Any = None) -> Any:
        if type == "run_started":
            self.started_at[payload.run_id] = time.perf_counter_ns()
        return super().broadcast_event(topic, type, payload, meta)


def _cmd(i: int, keys: int) -> ExecutionCommand:
    k = f"agent:bench:{i % keys}"
    return ExecutionCommand(
        run_id=f"run-{i}", session_key=k, prompt="p", conversation_key=("session", k)
    )


def _job(i: int, keys: int) -> ExecutionJob:
    k = f"agent:bench:{i % keys}"
    return ExecutionJob(run_id=f"run-{i}", session_key=k, prompt="p", cwd="/")


class _NullSink:
    def started(self, *, resume: ResumeToken | None = None) -> None:
        return None

    def delta(self, text: str) -> None:
        return None

    def action(self, **fields: Any) -> None:
        return None


_NULL_SINK: Any = _NullSink()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latency(n: int, keys: int) -> dict[str, float]:
    bus = TimingBus()
    cfg = GatewayConfig(record_run_history=False)
    samples: list[float] = []
    cmds = [_cmd(i, keys) for i in range(n)]
    async with Gateway(bus=bus, executor=NoopExecutor(), config=cfg) as gw:
        for cmd in cmds:
            t0 = time.perf_counter_ns()
            handle = gw.submit_execution(cmd)
            await handle
            samples.append((bus.started_at[cmd.run_id] - t0) / 1000)
    return {"p50_us": statistics.median(samples), "p99_us": _pct(samples, 0.99)}


async def baseline_latency(n: int, keys: int) -> dict[str, float]:
    locks = [asyncio.Lock() for _ in range(keys)]
    sem = asyncio.Semaphore(2)
    samples: list[float] = []
    started = 0

    async def job(i: int) -> None:
        nonlocal started
        async with locks[i % keys], sem:
            started = time.perf_counter_ns()
            await asyncio.sleep(0)

    for i in range(n):
        t0 = time.perf_counter_ns()
        await asyncio.get_running_loop().create_task(job(i))
        samples.append((started - t0) / 1000)
    return {"p50_us": statistics.median(samples), "p99_us": _pct(samples, 0.99)}


async def throughput(n: int, keys: int, *, history: bool) -> float:
    bus = Bus()
    cfg = GatewayConfig(record_run_history=history, max_pending_runs=max(n, 1))
    cmds = [_cmd(i, keys) for i in range(n)]
    async with Gateway(bus=bus, executor=NoopExecutor(), config=cfg) as gw:
        t0 = time.perf_counter()
        handles = [gw.submit_execution(c) for c in cmds]
        for h in handles:
            await h
        return n / (time.perf_counter() - t0)


async def baseline_throughput(n: int, keys: int) -> float:
    locks = [asyncio.Lock() for _ in range(keys)]
    sem = asyncio.Semaphore(2)

    executor = NoopExecutor()
    jobs = [_job(i, keys) for i in range(n)]

    async def job(i: int) -> ExecutionResult:
        async with locks[i % keys], sem:
            prepared = await executor.prepare(jobs[i])
            return await prepared.execute(_NULL_SINK)

    loop = asyncio.get_running_loop()
    t0 = time.perf_counter()
    tasks = [loop.create_task(job(i)) for i in range(n)]
    for t in tasks:
        await t
    return n / (time.perf_counter() - t0)


async def evented_baseline_throughput(n: int, keys: int) -> float:
    """The bare baseline plus what every gateway run must publish: run_started and a
    run_completed wrapping a Completion, on the run's topic."""
    from lemon_core.bus import run_topic
    from lemon_core.events import Completion, RunCompleted, RunStarted

    bus = Bus()
    locks = [asyncio.Lock() for _ in range(keys)]
    sem = asyncio.Semaphore(2)

    async def job(i: int) -> None:
        run_id = f"run-{i}"
        topic = run_topic(run_id)
        meta = {"run_id": run_id, "session_key": "s"}
        async with locks[i % keys], sem:
            bus.broadcast_event(
                topic, "run_started", RunStarted(run_id=run_id, session_key="s"), meta
            )
            completion = Completion(ok=True, answer="", run_id=run_id, session_key="s")
            bus.broadcast_event(
                topic, "run_completed", RunCompleted(completed=completion, duration_ms=0), meta
            )

    loop = asyncio.get_running_loop()
    t0 = time.perf_counter()
    tasks = [loop.create_task(job(i)) for i in range(n)]
    for t in tasks:
        await t
    return n / (time.perf_counter() - t0)


async def idle_memory(conversations: int) -> dict[str, float]:
    """Memory held after one completed run (with a native resume token) per conversation."""
    bus = Bus()
    store = MemoryStore()
    cfg = GatewayConfig(record_run_history=False, max_pending_runs=conversations)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    async with Gateway(
        bus=bus, executor=NoopExecutor(with_resume=True), store=store, config=cfg
    ) as gw:
        handles = [gw.submit_execution(_cmd(i, conversations)) for i in range(conversations)]
        for h in handles:
            await h
        del handles
        gc.collect()
        idle = tracemalloc.take_snapshot()
        stats = gw.statistics()
        assert stats.workers == 0, stats
        assert stats.runs.live == 0, stats
        idle_bytes = sum(s.size_diff for s in idle.compare_to(before, "filename"))
        # The same conversations, each with one run queued behind a held slot.
        pending_cfg_runs = [
            gw.submit_execution(_cmd(conversations + i, conversations))
            for i in range(conversations)
        ]
        queued = tracemalloc.take_snapshot()
        queued_bytes = sum(s.size_diff for s in queued.compare_to(idle, "filename"))
        for h in pending_cfg_runs:
            await h
    tracemalloc.stop()
    return {
        "idle_mb": idle_bytes / 1e6,
        "store_entries": store.statistics()["entries"],
        "queued_mb": queued_bytes / 1e6,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions (medians reported)")
    args = parser.parse_args()
    n_lat = 2_000 if args.quick else 10_000
    n_tp = 5_000 if args.quick else 30_000
    keys = 1_000
    reps = 1 if args.quick else args.repeat

    # Interleave the sides within each repetition so load changes hit both alike.
    lat: list[dict[str, float]] = []
    base_lat: list[dict[str, float]] = []
    tp: list[float] = []
    tp_hist: list[float] = []
    base_tp: list[float] = []
    evt_tp: list[float] = []
    for _ in range(reps):
        lat.append(await latency(n_lat, keys))
        base_lat.append(await baseline_latency(n_lat, keys))
        tp.append(await throughput(n_tp, keys, history=False))
        base_tp.append(await baseline_throughput(n_tp, keys))
        evt_tp.append(await evented_baseline_throughput(n_tp, keys))
        tp_hist.append(await throughput(n_tp, keys, history=True))
    ratio_tp = statistics.median(g / b for g, b in zip(tp, base_tp, strict=True))
    ratio_evt = statistics.median(g / e for g, e in zip(tp, evt_tp, strict=True))
    ratio_hist = statistics.median(h / b for h, b in zip(tp_hist, base_tp, strict=True))
    mem = await idle_memory(10_000)

    def med(rows: list[dict[str, float]], k: str) -> float:
        return statistics.median(r[k] for r in rows)

    g50, g99 = med(lat, "p50_us"), med(lat, "p99_us")
    b50, b99 = med(base_lat, "p50_us"), med(base_lat, "p99_us")
    gtp, gtph, btp = statistics.median(tp), statistics.median(tp_hist), statistics.median(base_tp)
    etp = statistics.median(evt_tp)
    print(f"gateway bench ({reps} repetitions, medians; {keys} conversation keys)")
    print(f"{'metric':<44}{'gateway':>12}{'baseline':>12}{'ratio':>8}")
    print(f"{'submit->run_started p50 (us)':<44}{g50:>12.1f}{b50:>12.1f}{g50 / b50:>8.2f}")
    print(f"{'submit->run_started p99 (us)':<44}{g99:>12.1f}{b99:>12.1f}{g99 / b99:>8.2f}")
    print(f"{'throughput, runs/s':<44}{gtp:>12.0f}{btp:>12.0f}{ratio_tp:>8.2f}")
    print(f"{'throughput with run history, runs/s':<44}{gtph:>12.0f}{btp:>12.0f}{ratio_hist:>8.2f}")
    print(
        f"{'throughput vs baseline + same 2 events':<44}{gtp:>12.0f}{etp:>12.0f}{ratio_evt:>8.2f}"
    )
    print(f"{'10,000 idle conversations (MB)':<44}{mem['idle_mb']:>12.2f}")
    print(f"{'  of which chat-state entries':<44}{mem['store_entries']:>12d}")
    print(f"{'10,000 conversations with a queued run (MB)':<44}{mem['queued_mb']:>12.2f}")
    print()
    print(f"goal p50 <= 50 us: {'met' if g50 <= 50 else 'MISSED'}")
    print(f"goal throughput >= 0.5x baseline: {'met' if ratio_tp >= 0.5 else 'MISSED'}")
    print(
        f"goal throughput with run history >= 0.3x baseline: "
        f"{'met' if ratio_hist >= 0.3 else 'MISSED'}"
    )
    print("(throughput ratios are medians of per-repetition ratios)")
    print(f"goal 10k idle <= 30 MB: {'met' if mem['idle_mb'] <= 30 else 'MISSED'}")


if __name__ == "__main__":
    asyncio.run(main())
