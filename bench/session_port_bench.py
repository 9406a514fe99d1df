"""Latency from the executor's sink to a client, per text delta: the session port's stream
(``SessionPort.watch`` -> typed ``TextDelta``) next to the path clients used before it (a raw
bus subscription on ``session:<key>`` reading ``Event``s), measured side by side in one run.

    .venv/bin/python bench/session_port_bench.py [--deltas 2000] [--rounds 5]

A real Router and Gateway run a paced executor: it calls ``sink.delta`` once, then waits until
both consumers have the delta, then the next one; each consumer records the time from the
``sink.delta`` call to its own receipt. Prints p50 / p99 per path (medians over rounds) and
their ratio. Goal (issue "session port"): the port no slower than the raw path.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from lemon_core.bus import Bus, Delivery, session_topic
from lemon_core.events import Event
from lemon_core.execution import (
    ExecutionJob,
    ExecutionResult,
    ExecutionSink,
    RunRequest,
    RuntimeContext,
)
from lemon_core.sessions import RunEnded, TextDelta
from lemon_gateway import Gateway
from lemon_router import Router, RouterConfig, RouterSessionPort

SESSION = "agent:bench:main"


class _Paced:
    def __init__(self, deltas: int) -> None:
        self.deltas = deltas
        self.sent: dict[int, int] = {}
        self.both = asyncio.Event()
        self.seen = 0

    async def execute(self, sink: ExecutionSink) -> ExecutionResult:
        for seq in range(1, self.deltas + 1):
            self.both.clear()
            self.seen = 0
            self.sent[seq] = time.perf_counter_ns()
            sink.delta("x")
            await self.both.wait()
        return ExecutionResult(ok=True, answer="x" * self.deltas)

    def received(self) -> None:
        self.seen += 1
        if self.seen == 2:
            self.both.set()


class _Executor:
    def __init__(self, paced: _Paced) -> None:
        self.paced = paced

    async def prepare(self, job: ExecutionJob) -> _Paced:
        return self.paced


def _pct(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000.0


async def _round(deltas: int) -> tuple[list[int], list[int]]:
    paced = _Paced(deltas)
    raw: list[int] = []
    port_lat: list[int] = []
    context = RuntimeContext()
    async with (
        Bus() as bus,
        Gateway(bus=bus, executor=_Executor(paced), runtime=context),
        Router(bus=bus, context=context, config=RouterConfig(idle_timeout_ms=None)) as router,
    ):
        port = RouterSessionPort(router)
        stream = port.watch(SESSION)
        delivery = Delivery(max_entries=10_000)
        bus.subscribe(session_topic(SESSION), delivery=delivery)

        async def via_port() -> None:
            while True:
                event = await stream.get()
                if isinstance(event, TextDelta):
                    port_lat.append(time.perf_counter_ns() - paced.sent[event.seq])
                    paced.received()
                elif isinstance(event, RunEnded):
                    return

        async def via_bus() -> None:
            while True:
                item: Any = await delivery.get()
                if isinstance(item, Event) and item.type == "delta":
                    raw.append(time.perf_counter_ns() - paced.sent[item.payload.seq])
                    paced.received()
                elif isinstance(item, Event) and item.type == "run_completed":
                    return

        consumers = asyncio.gather(via_port(), via_bus())
        await port.submit(RunRequest(origin="bench", session_key=SESSION, prompt="go"))
        await consumers
        stream.close()
        delivery.close()
    return raw, port_lat


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deltas", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rows: dict[str, list[tuple[float, float]]] = {"raw bus": [], "session port": []}
    for _ in range(args.rounds):
        raw, port = await _round(args.deltas)
        rows["raw bus"].append((_pct(raw, 0.5), _pct(raw, 0.99)))
        rows["session port"].append((_pct(port, 0.5), _pct(port, 0.99)))
    print(f"sink -> consumer per delta, µs (median of {args.rounds} rounds x {args.deltas})")
    print(f"{'path':<14} {'p50':>8} {'p99':>8}")
    medians = {}
    for name, values in rows.items():
        p50 = statistics.median(v[0] for v in values)
        p99 = statistics.median(v[1] for v in values)
        medians[name] = (p50, p99)
        print(f"{name:<14} {p50:8.1f} {p99:8.1f}")
    (b50, b99), (p50, p99) = medians["raw bus"], medians["session port"]
    print(f"ratio port/raw: p50 {p50 / b50:.2f}x, p99 {p99 / b99:.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
