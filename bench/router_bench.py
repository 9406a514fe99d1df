"""Router benchmarks, each printed beside a baseline measured in the same run.

Run: ``.venv/bin/python bench/router_bench.py [--runs N] [--repeats R]``

1. Queue rules: a burst of collect submissions to a busy conversation, then draining it
   (submit + run_ended per message) on the pure ConversationQueue; baseline: the same items
   through a bare ``collections.deque`` (append/popleft), the floor of any FIFO.
2. One run end to end: Router.submit -> fake EngineRuntime -> run_started, delta,
   run_completed on ``run:<id>`` -> forwarded to ``session:<key>`` -> terminal phase seen by a
   session subscriber; baseline: the same three events broadcast straight to a session
   subscriber on the same Bus (the cost of the bus path alone).
3. Intake under load: submitting a burst of messages to a busy session (receipt latency);
   baseline: one bus broadcast per message.

Figures are medians over the repeats; ratios are router / baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import deque

from lemon_core.bus import Bus, Delivery, session_topic
from lemon_core.events import Completion, Delta, Event, RunCompleted, RunStarted
from lemon_core.execution import ENGINE_RUNTIME, RunRequest, RuntimeContext
from lemon_router import ConversationQueue, Router, RouterConfig, Submission
from lemon_router.testing import FakeEngineRuntime

SESSION = "agent:bench:main"


def bench_queue(n: int) -> tuple[float, float]:
    q = ConversationQueue("k", max_pending=n + 1)
    q.submit(
        Submission(run_id="r-active", session_key=SESSION, prompt="x", queue_mode="collect"), 0
    )
    subs = [
        Submission(run_id=f"r{i}", session_key=SESSION, prompt="x", queue_mode="collect")
        for i in range(n)
    ]
    t0 = time.perf_counter()
    for i, sub in enumerate(subs):
        q.submit(sub, i)
    active = "r-active"
    for i in range(n + 1):
        effects = q.run_ended(active, n + i)
        if effects:
            active = effects[0].submission.run_id  # type: ignore[union-attr]
    router_s = time.perf_counter() - t0
    d: deque[Submission] = deque()
    t0 = time.perf_counter()
    for sub in subs:
        d.append(sub)
    while d:
        d.popleft()
    base_s = time.perf_counter() - t0
    return router_s / n * 1e6, base_s / n * 1e6


async def bench_run(runs: int) -> tuple[float, float]:
    async with Bus(validation="raise") as bus:
        context = RuntimeContext()
        engine = FakeEngineRuntime(bus)
        context.capabilities.register(ENGINE_RUNTIME, engine)
        watch = Delivery(max_entries=100_000)
        bus.subscribe(session_topic(SESSION), delivery=watch)
        config = RouterConfig(idle_timeout_ms=None, liveness_interval_ms=None)
        router_times: list[float] = []
        async with Router(bus=bus, context=context, config=config) as router:
            for _ in range(runs):
                t0 = time.perf_counter()
                receipt = await router.submit(
                    RunRequest(origin="bench", session_key=SESSION, prompt="hi")
                )
                await engine.play("hello")
                while True:
                    item = await watch.get()
                    if (
                        isinstance(item, Event)
                        and item.type == "run_phase_changed"
                        and item.payload.run_id == receipt.run_id
                        and item.payload.phase.terminal
                    ):
                        break
                router_times.append(time.perf_counter() - t0)
        base_times: list[float] = []
        for i in range(runs):
            rid = f"base-{i}"
            t0 = time.perf_counter()
            meta = {"run_id": rid, "session_key": SESSION}
            for type_, payload in (
                ("run_started", RunStarted.new(run_id=rid, session_key=SESSION)),
                ("delta", Delta.new(run_id=rid, seq=1, text="hello")),
                (
                    "run_completed",
                    RunCompleted.new(completed=Completion.new(ok=True, answer="hello")),
                ),
            ):
                bus.broadcast_event(session_topic(SESSION), type_, payload, meta)
            while True:
                item = await watch.get()
                if (
                    isinstance(item, Event)
                    and item.type == "run_completed"
                    and item.meta.get("run_id") == rid
                ):
                    break
            base_times.append(time.perf_counter() - t0)
        return statistics.median(router_times) * 1e6, statistics.median(base_times) * 1e6


async def bench_intake(n: int) -> tuple[float, float]:
    async with Bus(validation="raise") as bus:
        context = RuntimeContext()
        engine = FakeEngineRuntime(bus)
        context.capabilities.register(ENGINE_RUNTIME, engine)
        config = RouterConfig(
            idle_timeout_ms=None, liveness_interval_ms=None, max_pending_per_conversation=n + 1
        )
        lat: list[float] = []
        async with Router(bus=bus, context=context, config=config) as router:
            await router.submit(RunRequest(origin="bench", session_key=SESSION, prompt="busy"))
            for i in range(n):
                t0 = time.perf_counter()
                await router.submit(RunRequest(origin="bench", session_key=SESSION, prompt=f"m{i}"))
                lat.append(time.perf_counter() - t0)
            router.abort_session(SESSION)
        base: list[float] = []
        watch = Delivery(max_entries=n + 10)
        bus.subscribe(session_topic(SESSION), delivery=watch)
        for i in range(n):
            t0 = time.perf_counter()
            bus.broadcast_event(session_topic(SESSION), "note", {"i": i})
            base.append(time.perf_counter() - t0)
        return statistics.median(lat) * 1e6, statistics.median(base) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--queue", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows: list[tuple[str, float, float]] = []
    q = [bench_queue(args.queue) for _ in range(args.repeats)]
    rows.append(
        (
            f"queue rules, per message ({args.queue} burst + drain)",
            statistics.median(r for r, _ in q),
            statistics.median(b for _, b in q),
        )
    )
    r = [asyncio.run(bench_run(args.runs)) for _ in range(args.repeats)]
    rows.append(
        (
            f"one run end to end ({args.runs} sequential runs)",
            statistics.median(x for x, _ in r),
            statistics.median(b for _, b in r),
        )
    )
    i = [asyncio.run(bench_intake(args.burst)) for _ in range(args.repeats)]
    rows.append(
        (
            f"intake to a busy session ({args.burst} messages)",
            statistics.median(x for x, _ in i),
            statistics.median(b for _, b in i),
        )
    )
    print(f"{'benchmark':52} {'router us':>10} {'baseline us':>12} {'ratio':>7}")
    for name, router_us, base_us in rows:
        ratio = router_us / base_us if base_us else float("inf")
        print(f"{name:52} {router_us:10.2f} {base_us:12.2f} {ratio:7.1f}")


if __name__ == "__main__":
    main()
