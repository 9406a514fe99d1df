"""Channel latency and coalescer cost, each next to a baseline measured in the same run.

    uv run python bench/channel_bench.py            # default run (about half a minute)
    uv run python bench/channel_bench.py --quick    # a smoke run

1. Inbound update -> first outbound message, on loopback. The real Telegram plugin long-polls
   the fake Bot API server (real HTTP on 127.0.0.1) and the real channel host submits to a
   hand-fed session port; the "model" answers with its first token the moment the request is
   submitted. Timed per round: the update queued at the fake server -> the request submitted
   (``inbound``), and the first token pushed -> the answer's first ``sendMessage`` arriving at
   the server (``beyond first token``: the coalescer, the durable outbox admission on a SQLite
   store, rendering and the HTTP send). Baseline, same run: a bare httpx ``sendMessage`` to the
   same server (what any Telegram client pays for one HTTP call).

2. Coalescer cost per delta: a session pump (stream reader -> tagged bounded ingress ->
   answer coalescer, no edit due) against a bare ``asyncio.Queue`` producer/consumer loop
   that appends each delta's text, both fed in batches of 128 deltas and drained in between.
   While the pump's consumer waits on an empty ingress, its reader hands a plain delta over
   directly (``SessionPump`` docs); the run prints how many deltas took that path.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from lemon_channels import ChannelHost, SessionPump, TerminalRuns
from lemon_channels.telegram import TelegramPlugin
from lemon_channels.testing import FakeSessionPort, FakeTelegram
from lemon_core.channels import DeliveryIntent, DeliveryRoute
from lemon_core.sessions import RunEnded, TextDelta
from lemon_infra import SQLiteStore

KEY = "agent:default:telegram:123456:dm:42"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _sent_more(fake: FakeTelegram, before: int) -> bool:
    return len(fake.method_calls("sendMessage")) > before


async def latency(rounds: int) -> dict[str, list[float]]:
    inbound: list[float] = []
    beyond: list[float] = []
    bare: list[float] = []
    async with FakeTelegram() as fake:
        with tempfile.TemporaryDirectory() as tmp:
            store = await SQLiteStore.open(Path(tmp) / "lemon.sqlite3")
            port = FakeSessionPort()
            plugin = TelegramPlugin(token=fake.token, api_base_url=fake.url, poll_timeout_s=20)
            host = ChannelHost(
                plugin=plugin,
                port=port,
                store=store,
                bus=None,
                allowed_users=frozenset({"42"}),
                edit_interval_s=0.0,
            )
            await host.start()
            async with httpx.AsyncClient(base_url=f"{fake.url}/bot{fake.token}/") as client:
                for i in range(rounds):
                    sends = len(fake.method_calls("sendMessage"))
                    t0 = time.perf_counter()
                    await fake.send_text(f"question {i}")
                    request = await port.next_submission(i + 1)
                    t1 = time.perf_counter()
                    stream = await port.next_stream(1)
                    run = f"r{i}"
                    t2 = time.perf_counter()
                    stream.push(TextDelta(session_key=KEY, run_id=run, seq=1, text="Hi"))
                    await fake.wait_for(functools.partial(_sent_more, fake, sends))
                    t3 = time.perf_counter()
                    inbound.append((t1 - t0) * 1000)
                    beyond.append((t3 - t2) * 1000)
                    stream.push(
                        RunEnded(session_key=KEY, run_id=run, attempt_id=run, ok=True, answer="Hi.")
                    )
                    await host.outbox.drained()
                    assert request.session_key == KEY
                    b0 = time.perf_counter()
                    answer = await client.post(
                        "sendMessage", json={"chat_id": 42, "text": "baseline"}
                    )
                    bare.append((time.perf_counter() - b0) * 1000)
                    assert answer.status_code == 200
            await host.stop()
            await store.close()
    return {"inbound": inbound, "beyond": beyond, "bare": bare}


async def _yield_until(count: Callable[[], int], target: int) -> None:
    """Let the consumer run until ``count()`` reaches ``target``: the benchmark yields with
    ``sleep(0)`` rather than an Event per batch, so both sides pay the same polling cost."""
    while count() < target:  # noqa: ASYNC110 - polling on purpose: the same cost on both sides
        await asyncio.sleep(0)


async def _consume(queue: asyncio.Queue[TextDelta], taken: list[int], text: list[str]) -> None:
    while True:
        item = await queue.get()
        text.append(item.text)
        taken[0] += 1


async def coalescer(
    deltas: int, rounds: int, handed_over: list[int] | None = None
) -> tuple[list[float], list[float]]:
    route = DeliveryRoute(channel_id="telegram", account_id="1", peer_kind="dm", peer_id="42")
    pump_ns: list[float] = []
    queue_ns: list[float] = []
    batch = 128

    async def emit(_: DeliveryIntent) -> None:
        return None

    for _ in range(rounds):
        port = FakeSessionPort()
        pump = SessionPump(
            port=port,
            session_key=KEY,
            route=route,
            emit=emit,
            terminal=TerminalRuns(),
            edit_interval_s=3600.0,
        )
        task = asyncio.ensure_future(pump.run())
        await pump.ready()
        stream = await port.next_stream(1)
        items = [
            TextDelta(session_key=KEY, run_id="r", seq=s, text="tok ") for s in range(1, deltas + 1)
        ]
        gc.disable()
        t0 = time.perf_counter_ns()
        for start in range(0, deltas, batch):
            stream.push(*items[start : start + batch])
            target = min(deltas, start + batch)
            await _yield_until(functools.partial(getattr, pump, "events_handled"), target)
        pump_ns.append((time.perf_counter_ns() - t0) / deltas)
        gc.enable()
        assert pump.statistics().overflows == 0
        if handed_over is not None:
            handed_over.append(pump.statistics().handed_over)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

        queue: asyncio.Queue[TextDelta] = asyncio.Queue(maxsize=256)
        taken = [0]
        consumer = asyncio.ensure_future(_consume(queue, taken, []))
        gc.disable()
        t0 = time.perf_counter_ns()
        for start in range(0, deltas, batch):
            for item in items[start : start + batch]:
                queue.put_nowait(item)
            target = min(deltas, start + batch)
            await _yield_until(functools.partial(taken.__getitem__, 0), target)
        queue_ns.append((time.perf_counter_ns() - t0) / deltas)
        gc.enable()
        consumer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consumer
    return pump_ns, queue_ns


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    rounds = 30 if args.quick else 200
    lat = await latency(rounds)
    print(f"Latency over {rounds} rounds (loopback, SQLite outbox), ms:")
    for name, label in (
        ("inbound", "update queued -> request submitted"),
        ("beyond", "first token -> first sendMessage at the server"),
        ("bare", "baseline: one bare httpx sendMessage"),
    ):
        values = lat[name]
        print(f"  {label:<48} p50 {pct(values, 0.5):7.2f}  p90 {pct(values, 0.9):7.2f}")
    ratio = statistics.median(lat["beyond"]) / statistics.median(lat["bare"])
    print(f"  beyond first token / bare send (p50): {ratio:.2f}x   (goal: p50 <= 20 ms)")
    deltas, crounds = (5_000, 3) if args.quick else (50_000, 5)
    handed: list[int] = []
    pump_ns, queue_ns = await coalescer(deltas, crounds, handed)
    p, q = statistics.median(pump_ns), statistics.median(queue_ns)
    print(f"Coalescer cost per delta ({deltas:,} deltas x {crounds} rounds, median):")
    print(
        f"  deltas handed over while the consumer waited: {sum(handed):,} of {deltas * crounds:,}"
    )
    print(f"  session pump (reader + tagged ingress + coalescer) {p / 1000:8.2f} us")
    print(f"  bare asyncio.Queue producer/consumer               {q / 1000:8.2f} us")
    print(f"  ratio {p / q:.2f}x   goal <= 3x: {'met' if p / q <= 3.0 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
