"""Bus publish cost per subscriber next to bare baselines, measured in the same run.

    uv run python bench/bus_bench.py            # default run (about a minute on 2 cores)
    uv run python bench/bus_bench.py --quick    # a smoke run

Each case times one publication for 1, 10, 100 (and 1,000) subscribers:

* ``bus``: ``Bus.broadcast_event(topic, "delta", Delta(...), meta)`` with payload validation on
  (``PayloadValidation.RAISE``), the item measured (encoded JSON size plus retained views) and
  offered to every subscriber's bounded ``Delivery`` (256 entries, 1 MiB);
* ``deque``: the same prebuilt event appended to one bounded ``collections.deque(maxlen=256)``
  per subscriber: the cheapest bounded buffer Python has (no envelope, no validation, no
  measurement, no overflow signal: a full deque silently drops its oldest item);
* ``queue``: the prebuilt event put with ``asyncio.Queue.put_nowait`` into one bounded
  ``asyncio.Queue(maxsize=256)`` per subscriber.

Waiting consumers (wake-up cost): every subscriber has a consumer task parked in ``get()``; each
publication wakes all of them (timed: the publish call; untimed: the loop letting them take the
item and park again). ``bus_waiting`` against ``queue_waiting`` (``asyncio.Queue`` with a
parked ``get()`` per queue).

Cross-thread publisher: a publisher thread publishes (``broadcast_event_threadsafe``) while the
consumers wait on the event loop's thread. ``bus_thread`` against ``queue_thread``
(``loop.call_soon_threadsafe(queue.put_nowait, event)`` per queue, the standard asyncio way)
and ``deque_thread`` (plain appends from the thread).

Buffers are drained between batches of 100 publications (untimed) so nothing overflows.
Per-subscriber cost is the least-squares slope of the median publish time over the subscriber
counts. The stalled-subscriber run repeats the 10-subscriber bus case with one handle never
drained (it fences at its bound). The garbage collector is paused while timing.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from lemon_core.bus import Bus, Delivery, PayloadValidation
from lemon_core.events import Delta, Event

BATCH = 100
TOPIC = "run:bench"
META = {"run_id": "bench", "session_key": "agent:default:main"}
EVENT = Event.new("delta", Delta(run_id="bench", seq=0, text="hello world"), META)


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


def new_bus(subscribers: int) -> tuple[Bus, list[Delivery]]:
    bus = Bus(validation=PayloadValidation.RAISE)
    handles = [Delivery(bind_current_task=False) for _ in range(subscribers)]
    for handle in handles:
        bus.subscribe(TOPIC, delivery=handle)
    return bus, handles


def publish_delta(bus: Bus) -> Callable[[int], None]:
    def publish(seq: int) -> None:
        bus.broadcast_event(
            TOPIC, "delta", Delta(run_id="bench", seq=seq, text="hello world"), META
        )

    return publish


# -- no consumer waiting ------------------------------------------------------------------------


def bus_case(
    subscribers: int, count: int, *, stalled: bool = False
) -> tuple[list[int], Delivery | None]:
    bus, handles = new_bus(subscribers)
    stalled_handle = None
    if stalled:
        stalled_handle = Delivery(bind_current_task=False)
        bus.subscribe(TOPIC, delivery=stalled_handle)
    samples = time_publishes(publish_delta(bus), lambda: drain_handles(handles), count)
    bus.close()
    return samples, stalled_handle


def deque_case(subscribers: int, count: int) -> list[int]:
    deques: list[collections.deque[Any]] = [
        collections.deque(maxlen=256) for _ in range(subscribers)
    ]

    def publish(_seq: int) -> None:
        for buffer in deques:
            buffer.append(EVENT)

    def drain() -> None:
        for buffer in deques:
            buffer.clear()

    return time_publishes(publish, drain, count)


def queue_case(subscribers: int, count: int) -> list[int]:
    queues: list[asyncio.Queue[Any]] = [asyncio.Queue(maxsize=256) for _ in range(subscribers)]

    def publish(_seq: int) -> None:
        for queue in queues:
            queue.put_nowait(EVENT)

    def drain() -> None:
        for queue in queues:
            while not queue.empty():
                queue.get_nowait()

    return time_publishes(publish, drain, count)


# -- waiting consumers (wake-up cost) -------------------------------------------------------------


async def _time_with_waiters(
    publish: Callable[[int], None], consumers: list[Callable[[], Any]], count: int
) -> list[int]:
    taken = 0

    async def consume(get: Callable[[], Any]) -> None:
        nonlocal taken
        while True:
            await get()
            taken += 1

    tasks = [asyncio.create_task(consume(get)) for get in consumers]
    await asyncio.sleep(0)  # every consumer parks
    samples: list[int] = []
    clock = time.perf_counter_ns
    gc.collect()
    gc.disable()
    try:
        for seq in range(count):
            start = clock()
            publish(seq)
            samples.append(clock() - start)
            await asyncio.sleep(0)  # the woken consumers take the item and park again
    finally:
        gc.enable()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert taken == count * len(consumers), (taken, count, len(consumers))
    return samples


def bus_waiting_case(subscribers: int, count: int) -> list[int]:
    async def run() -> list[int]:
        bus, handles = new_bus(subscribers)
        try:
            return await _time_with_waiters(
                publish_delta(bus), [handle.get for handle in handles], count
            )
        finally:
            bus.close()

    return asyncio.run(run())


def queue_waiting_case(subscribers: int, count: int) -> list[int]:
    async def run() -> list[int]:
        queues: list[asyncio.Queue[Any]] = [asyncio.Queue(maxsize=256) for _ in range(subscribers)]

        def publish(_seq: int) -> None:
            for queue in queues:
                queue.put_nowait(EVENT)

        return await _time_with_waiters(publish, [queue.get for queue in queues], count)

    return asyncio.run(run())


# -- a publisher on another thread ----------------------------------------------------------------


def _time_from_thread(
    publish_on: Callable[[asyncio.AbstractEventLoop], Callable[[int], None]],
    consumers: list[Callable[[], Any]],
    expected_per_consumer: int,
    count: int,
) -> list[int]:
    """The publisher thread times each call; between batches it waits until the consumers on
    the loop have taken everything (so buffers never fill)."""

    async def run() -> list[int]:
        loop = asyncio.get_running_loop()
        publish = publish_on(loop)
        taken = 0
        caught_up = threading.Event()
        target = 0

        async def consume(get: Callable[[], Any]) -> None:
            nonlocal taken
            while True:
                await get()
                taken += 1
                if taken >= target:
                    caught_up.set()

        tasks = [asyncio.create_task(consume(get)) for get in consumers]
        await asyncio.sleep(0)
        samples: list[int] = []

        def publisher() -> None:
            nonlocal target
            clock = time.perf_counter_ns
            seq = 0
            while seq < count:
                target = (seq + BATCH) * expected_per_consumer
                caught_up.clear()
                for _ in range(BATCH):
                    start = clock()
                    publish(seq)
                    samples.append(clock() - start)
                    seq += 1
                if not caught_up.wait(60):
                    raise RuntimeError("consumers did not catch up")

        gc.collect()
        gc.disable()
        try:
            await loop.run_in_executor(None, publisher)
        finally:
            gc.enable()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return samples

    return asyncio.run(run())


def bus_thread_case(subscribers: int, count: int) -> list[int]:
    bus, handles = new_bus(subscribers)

    def publish(seq: int) -> None:
        bus.broadcast_event_threadsafe(
            TOPIC, "delta", Delta(run_id="bench", seq=seq, text="hello world"), META
        )

    try:
        return _time_from_thread(
            lambda _loop: publish, [h.get for h in handles], subscribers, count
        )
    finally:
        bus.close()


def queue_thread_case(subscribers: int, count: int) -> list[int]:
    queues: list[asyncio.Queue[Any]] = [asyncio.Queue(maxsize=256) for _ in range(subscribers)]

    def publish_on(loop: asyncio.AbstractEventLoop) -> Callable[[int], None]:
        call = loop.call_soon_threadsafe

        def publish(_seq: int) -> None:
            for queue in queues:
                call(queue.put_nowait, EVENT)

        return publish

    return _time_from_thread(publish_on, [queue.get for queue in queues], subscribers, count)


def deque_thread_case(subscribers: int, count: int) -> list[int]:
    deques: list[collections.deque[Any]] = [
        collections.deque(maxlen=256) for _ in range(subscribers)
    ]
    samples: list[int] = []

    def publisher() -> None:
        samples.extend(
            time_publishes(
                lambda _seq: [buffer.append(EVENT) for buffer in deques] and None,
                lambda: [buffer.clear() for buffer in deques] and None,
                count,
            )
        )

    thread = threading.Thread(target=publisher)
    thread.start()
    thread.join()
    return samples


# -- contended admission ---------------------------------------------------------------------------


def contention_trial(contention_timeout: float | None) -> tuple[bool, float]:
    """4 threads x 25k offers into one handle sized for 1M entries: (fenced, seconds)."""
    options: dict[str, Any] = {}
    if contention_timeout is not None:
        options["contention_timeout"] = contention_timeout
    handle = Delivery(max_entries=1_000_000, bind_current_task=False, **options)
    barrier = threading.Barrier(4)

    def produce() -> None:
        barrier.wait()
        for _ in range(25_000):
            handle.offer(EVENT)

    threads = [threading.Thread(target=produce) for _ in range(4)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return handle.statistics().fenced, time.perf_counter() - start


def bus_contention_trial() -> tuple[bool, float]:
    """4 threads x 25k broadcasts on one bus (default bound) to one 1M-entry subscriber."""
    bus = Bus(validation=PayloadValidation.RAISE)
    handle = Delivery(max_entries=1_000_000, bind_current_task=False)
    bus.subscribe(TOPIC, delivery=handle)
    barrier = threading.Barrier(4)

    def produce() -> None:
        barrier.wait()
        for _ in range(25_000):
            bus.broadcast_threadsafe(TOPIC, EVENT)

    threads = [threading.Thread(target=produce) for _ in range(4)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    bus.close()
    return handle.statistics().fenced, elapsed


# -- report ---------------------------------------------------------------------------------------


def slope(points: list[tuple[int, float]]) -> float:
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    num = sum((x - mean_x) * (y - mean_y) for x, y in points)
    den = sum((x - mean_x) ** 2 for x in xs)
    return num / den


def us(ns: float) -> str:
    return f"{ns / 1000:8.2f}"


Case = Callable[[int, int], list[int]]


def run_cases(
    title: str,
    cases: dict[str, Case],
    counts: dict[int, int],
    rounds: int,
    scale: float,
) -> tuple[dict[str, float], dict[str, dict[int, float]]]:
    names = list(cases)
    print()
    print(title)
    header = " | ".join(f"{name + ' p50':>17} {name + ' p99':>17}" for name in names)
    print(f"{'subs':>6} | {header}   (µs)")
    medians: dict[str, list[tuple[int, float]]] = {name: [] for name in names}
    p99s: dict[str, dict[int, float]] = {name: {} for name in names}
    for subscribers, base_count in counts.items():
        count = max(BATCH, int(base_count * scale) // BATCH * BATCH)
        samples: dict[str, list[int]] = {name: [] for name in names}
        for _ in range(rounds):  # alternate the cases round by round
            for name, case in cases.items():
                samples[name] += case(subscribers, count)
        cells = []
        for name in names:
            p50, p99 = percentile(samples[name], 0.5), percentile(samples[name], 0.99)
            medians[name].append((subscribers, p50))
            p99s[name][subscribers] = p99
            cells.append(f"{us(p50):>17} {us(p99):>17}")
        print(f"{subscribers:>6} | " + " | ".join(cells))
    slopes = {name: slope(points) for name, points in medians.items()}
    print("per-subscriber cost (slope of the p50s): " + ", ".join(
        f"{name} {value:.0f} ns" for name, value in slopes.items()
    ))  # fmt: skip
    return slopes, p99s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer publications (smoke run)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per case")
    args = parser.parse_args(argv)
    scale = 0.1 if args.quick else 1.0
    rounds = args.rounds
    print(f"python {sys.version.split()[0]}, {rounds} alternating rounds, GC paused while timing")

    slopes, p99s = run_cases(
        "no consumer waiting (publisher on the loop thread)",
        {"bus": lambda s, c: bus_case(s, c)[0], "deque": deque_case, "queue": queue_case},
        {1: 20_000, 10: 20_000, 100: 5_000, 1000: 1_000},
        rounds,
        scale,
    )
    waiting, waiting_p99s = run_cases(
        "every consumer waiting in get() (wake-up cost)",
        {"bus_waiting": bus_waiting_case, "queue_waiting": queue_waiting_case},
        {1: 10_000, 10: 5_000, 100: 1_000},
        rounds,
        scale,
    )
    threaded, thread_p99s = run_cases(
        "publisher on another thread, consumers waiting on the loop",
        {
            "bus_thread": bus_thread_case,
            "queue_thread": queue_thread_case,
            "deque_thread": deque_thread_case,
        },
        {1: 10_000, 10: 5_000, 100: 1_000},
        max(1, rounds // 2),
        scale,
    )

    deque_slope = slopes["deque"]
    print()
    print("per-subscriber cost ratios (goal: bus <= 4x the deque append):")
    rows = [
        ("bus", slopes["bus"], [("deque", deque_slope), ("queue", slopes["queue"])]),
        (
            "bus_waiting",
            waiting["bus_waiting"],
            [("deque", deque_slope), ("queue_waiting", waiting["queue_waiting"])],
        ),
        (
            "bus_thread",
            threaded["bus_thread"],
            [
                ("deque_thread", threaded["deque_thread"]),
                ("queue_thread", threaded["queue_thread"]),
            ],
        ),
    ]
    for name, value, baselines in rows:
        parts = ", ".join(f"{value / base:.2f}x {label}" for label, base in baselines)
        print(f"  {name}: {value:.0f} ns = {parts}")
    ratio = slopes["bus"] / deque_slope
    print(f"  goal bus <= 4x deque: {'met' if ratio <= 4 else 'MISSED'} ({ratio:.2f}x)")
    p99_10 = p99s["bus"][10] / 1000
    print(
        f"p99 at 10 subscribers: bus {p99_10:.2f} µs (goal <= 15 µs: "
        f"{'met' if p99_10 <= 15 else 'MISSED'}), bus_waiting "
        f"{waiting_p99s['bus_waiting'][10] / 1000:.2f} µs, bus_thread "
        f"{thread_p99s['bus_thread'][10] / 1000:.2f} µs"
    )

    count = max(BATCH, int(20_000 * scale) // BATCH * BATCH)
    healthy: list[int] = []
    stalled: list[int] = []
    stalled_handle: Delivery | None = None
    for _ in range(rounds):
        healthy += bus_case(10, count)[0]
        samples, stalled_handle = bus_case(9, count, stalled=True)
        stalled += samples
    assert stalled_handle is not None
    stats = stalled_handle.statistics()
    healthy_p99, stalled_p99 = percentile(healthy, 0.99), percentile(stalled, 0.99)
    bound = stats.max_entries + 2
    print()
    print(
        f"one stalled subscriber of 10: p99 {stalled_p99 / 1000:.2f} µs vs "
        f"{healthy_p99 / 1000:.2f} µs healthy = {stalled_p99 / healthy_p99:.2f}x; the stalled "
        f"handle holds {stats.queued} items (bound {bound}), fenced={stats.fenced}, "
        f"refused {stats.refused} ({'within bound' if stats.queued <= bound else 'OVER BOUND'})"
    )

    trials = 3 if args.quick else 15
    print()
    runs: list[tuple[str, Callable[[], tuple[bool, float]]]] = [
        ("offer(), contention_timeout=0 (never wait)", lambda: contention_trial(0.0)),
        ("offer(), default bound", lambda: contention_trial(None)),
        ("broadcast_threadsafe on one bus, default bound", bus_contention_trial),
    ]
    for label, trial in runs:
        results = [trial() for _ in range(trials)]
        fenced = sum(1 for was_fenced, _ in results if was_fenced)
        median = statistics.median(seconds for _, seconds in results)
        print(
            f"4 threads x 25k publications, 1M-entry handle, {label}: fenced in {fenced} of "
            f"{trials} "
            f"trials, median {median * 1000:.0f} ms per trial"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
