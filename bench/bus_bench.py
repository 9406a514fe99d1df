"""Bus publish cost next to a bare ``asyncio.Queue.put_nowait`` loop, measured in the same run.

    uv run python bench/bus_bench.py            # default run (well under 2 minutes on 2 cores)
    uv run python bench/bus_bench.py --quick    # a smoke run

For 1, 10, 100 and 1,000 subscribers it times one publication:

* ``bus``: ``Bus.broadcast_event(topic, "delta", Delta(...), meta)`` with payload validation on
  (``PayloadValidation.RAISE``: the publisher checks the registered record), the item measured
  (encoded JSON size plus retained views) and offered to every subscriber's bounded
  ``Delivery`` (256 entries, 1 MiB);
* ``bare``: the same prebuilt event put with ``asyncio.Queue.put_nowait`` into one bounded
  ``asyncio.Queue(maxsize=256)`` per subscriber: no envelope, no validation, no measurement.

Queues are drained between batches of 100 publications (untimed) so neither side overflows.
Per-subscriber cost is the least-squares slope of the median publish time over the subscriber
counts. The stalled-subscriber run repeats the 10-subscriber bus case with one handle never
drained (it fences at its bound) and reports the p99 ratio and what the stalled handle holds.
The garbage collector is paused while timing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from lemon_core.bus import Bus, Delivery, PayloadValidation
from lemon_core.events import Delta, Event

BATCH = 100
TOPIC = "run:bench"


def percentile(samples: list[int], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return float(ordered[index])


def drain_handles(handles: list[Delivery]) -> None:
    for handle in handles:
        while True:
            try:
                handle.get_nowait()
            except asyncio.QueueEmpty:
                break


def drain_queues(queues: list[asyncio.Queue[Any]]) -> None:
    for queue in queues:
        while not queue.empty():
            queue.get_nowait()


def time_publishes(
    publish: Callable[[int], None], drain: Callable[[], None], count: int
) -> list[int]:
    samples: list[int] = []
    clock = time.perf_counter_ns
    seq = 0
    gc.collect()
    gc.disable()
    try:
        while seq < count:
            for _ in range(BATCH):
                start = clock()
                publish(seq)
                samples.append(clock() - start)
                seq += 1
            drain()
    finally:
        gc.enable()
    return samples


def bus_case(
    subscribers: int, count: int, *, stalled: bool = False
) -> tuple[list[int], Delivery | None]:
    bus = Bus(validation=PayloadValidation.RAISE)
    handles = [Delivery(bind_current_task=False) for _ in range(subscribers)]
    for handle in handles:
        bus.subscribe(TOPIC, delivery=handle)
    stalled_handle = None
    if stalled:
        stalled_handle = Delivery(bind_current_task=False)
        bus.subscribe(TOPIC, delivery=stalled_handle)
    meta = {"run_id": "bench", "session_key": "agent:default:main"}

    def publish(seq: int) -> None:
        bus.broadcast_event(
            TOPIC, "delta", Delta(run_id="bench", seq=seq, text="hello world"), meta
        )

    samples = time_publishes(publish, lambda: drain_handles(handles), count)
    bus.close()
    return samples, stalled_handle


def bare_case(subscribers: int, count: int) -> list[int]:
    queues: list[asyncio.Queue[Any]] = [asyncio.Queue(maxsize=256) for _ in range(subscribers)]
    event = Event.new(
        "delta", Delta(run_id="bench", seq=0, text="hello world"), {"run_id": "bench"}
    )

    def publish(_seq: int) -> None:
        for queue in queues:
            queue.put_nowait(event)

    return time_publishes(publish, lambda: drain_queues(queues), count)


def slope(points: list[tuple[int, float]]) -> float:
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    num = sum((x - mean_x) * (y - mean_y) for x, y in points)
    den = sum((x - mean_x) ** 2 for x in xs)
    return num / den


def us(ns: float) -> str:
    return f"{ns / 1000:8.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer publications (smoke run)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per case")
    args = parser.parse_args(argv)
    scale = 0.1 if args.quick else 1.0
    counts = {1: 20_000, 10: 20_000, 100: 5_000, 1000: 1_000}

    print(
        f"python {sys.version.split()[0]}, {args.rounds} alternating rounds, GC paused while timing"
    )
    print(
        f"{'subs':>6} | {'bus p50':>8} {'bus p99':>8} | {'bare p50':>8} {'bare p99':>8} | "
        "p50 ratio  (µs)"
    )
    medians_bus: list[tuple[int, float]] = []
    medians_bare: list[tuple[int, float]] = []
    p99_by_subs: dict[int, float] = {}
    for subscribers, base_count in counts.items():
        count = max(BATCH, int(base_count * scale) // BATCH * BATCH)
        bus_samples: list[int] = []
        bare_samples: list[int] = []
        for _ in range(args.rounds):
            bus_samples += bus_case(subscribers, count)[0]
            bare_samples += bare_case(subscribers, count)
        bus_p50, bus_p99 = percentile(bus_samples, 0.5), percentile(bus_samples, 0.99)
        bare_p50, bare_p99 = percentile(bare_samples, 0.5), percentile(bare_samples, 0.99)
        medians_bus.append((subscribers, bus_p50))
        medians_bare.append((subscribers, bare_p50))
        p99_by_subs[subscribers] = bus_p99
        print(
            f"{subscribers:>6} | {us(bus_p50)} {us(bus_p99)} | {us(bare_p50)} {us(bare_p99)} | "
            f"{bus_p50 / bare_p50:6.2f}x"
        )

    bus_slope, bare_slope = slope(medians_bus), slope(medians_bare)
    ratio = bus_slope / bare_slope
    print()
    print(
        f"per-subscriber cost: bus {bus_slope:.0f} ns, bare put_nowait {bare_slope:.0f} ns, "
        f"ratio {ratio:.2f}x (goal <= 1.5x: {'met' if ratio <= 1.5 else 'MISSED'})"
    )
    p99_10 = p99_by_subs[10] / 1000
    print(
        f"p99 at 10 subscribers: {p99_10:.2f} µs (goal <= 20 µs: "
        f"{'met' if p99_10 <= 20 else 'MISSED'})"
    )

    count = max(BATCH, int(20_000 * scale) // BATCH * BATCH)
    healthy: list[int] = []
    stalled: list[int] = []
    stalled_handle: Delivery | None = None
    for _ in range(args.rounds):
        healthy += bus_case(10, count)[0]
        samples, stalled_handle = bus_case(9, count, stalled=True)
        stalled += samples
    assert stalled_handle is not None
    stats = stalled_handle.statistics()
    healthy_p99, stalled_p99 = percentile(healthy, 0.99), percentile(stalled, 0.99)
    p99_ratio = stalled_p99 / healthy_p99
    bound = stats.max_entries + 2
    print()
    print(
        f"one stalled subscriber of 10: p99 {stalled_p99 / 1000:.2f} µs vs "
        f"{healthy_p99 / 1000:.2f} µs "
        f"healthy = {p99_ratio:.2f}x (goal <= 2x: {'met' if p99_ratio <= 2 else 'MISSED'})"
    )
    print(
        f"stalled handle holds {stats.queued} items (bound {bound}), {stats.bytes} bytes, "
        f"fenced={stats.fenced}, refused {stats.refused} "
        f"({'within bound' if stats.queued <= bound else 'OVER BOUND'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
