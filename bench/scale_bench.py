"""Past one machine: the PostgreSQL store, the Redis bus and several daemons, each figure next to
a baseline measured in the same run.

    uv run python bench/scale_bench.py            # default run (about a minute)
    uv run python bench/scale_bench.py --quick    # a smoke run

1. Store put / get p50 and p99: ``PostgresStore`` (loopback server, its own schema, dropped
   after) next to ``SQLiteStore`` (a WAL file, ``synchronous=FULL``, the default) and
   ``MemoryStore``; one awaited call at a time.
2. Cross-daemon delta latency: a ``delta`` event published on bus A (Redis backend) until a
   consumer task of bus B (another ``RedisBackend``, another origin: what daemon B's session
   streams read) has it, one at a time; next to raw redis-py ``PUBLISH`` until a subscriber
   thread's ``get_message`` returns it. Both in one process, through the same server.
3. Throughput: real ``lemon serve`` daemons (1, 2 and 4) on one PostgreSQL schema and one Redis
   prefix, a session-heavy workload (16 sessions x 5 ``/echo`` messages; session i is sent
   through daemon i mod n, every message waited for): runs per second, and the ratio to one
   daemon. Two cores on the development machine: the curve flattens once the daemons, the
   servers and the clients share them.

Environment: ``LEMON_TEST_POSTGRES_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/test``)
and ``LEMON_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis

from lemon_control_plane.testing import wire_client
from lemon_core.bus import Bus, Delivery
from lemon_core.events import Delta, Event
from lemon_core.store import Store
from lemon_infra import MemoryStore, PostgresStore, RedisBackend, SQLiteStore, drop_schema

PG = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("LEMON_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
LEMON = Path(sys.executable).with_name("lemon")


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def us(ns: float) -> str:
    return f"{ns / 1000:8.1f} us"


# -- 1. store -----------------------------------------------------------------------------------


async def time_store(store: Store, n: int) -> tuple[list[float], list[float]]:
    value = {"run_id": "r", "answer": "x" * 200, "ok": True, "n": 0}
    for i in range(50):  # warm up (connections, prepared statements)
        await store.put("bench", f"w{i}", value)
        await store.get("bench", f"w{i}")
    puts: list[float] = []
    gets: list[float] = []
    for i in range(n):
        t0 = time.perf_counter_ns()
        await store.put("bench", f"k{i:06d}", value)
        t1 = time.perf_counter_ns()
        await store.get("bench", f"k{i:06d}")
        t2 = time.perf_counter_ns()
        puts.append(t1 - t0)
        gets.append(t2 - t1)
    return puts, gets


async def bench_store(n: int) -> None:
    print(f"== store: {n} put + get, one at a time")
    schema = f"bench_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    results: dict[str, tuple[list[float], list[float]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        sqlite = await SQLiteStore.open(Path(scratch) / "bench.sqlite3")
        try:
            results["sqlite"] = await time_store(sqlite, n)
        finally:
            await sqlite.close()
    memory = MemoryStore()
    results["memory"] = await time_store(memory, n)
    pg = await PostgresStore.open(PG, schema=schema)
    try:
        results["postgres"] = await time_store(pg, n)
    finally:
        await pg.close()
        await drop_schema(PG, schema)
    for name, (puts, gets) in results.items():
        print(
            f"  {name:<9} put p50 {us(pct(puts, 0.5))}  p99 {us(pct(puts, 0.99))}   "
            f"get p50 {us(pct(gets, 0.5))}  p99 {us(pct(gets, 0.99))}"
        )
    pg_put = pct(results["postgres"][0], 0.5)
    sq_put = pct(results["sqlite"][0], 0.5)
    print(
        f"  postgres / sqlite put p50: {pg_put / sq_put:.2f}x   "
        f"(goal: postgres put p50 <= 1 ms: {'met' if pg_put <= 1e6 else 'NOT met'})"
    )


# -- 2. cross-daemon latency --------------------------------------------------------------------


async def bus_latency(n: int) -> list[float]:
    prefix = f"bench{os.getpid()}{uuid.uuid4().hex[:6]}"
    a_backend = RedisBackend(REDIS, prefix=prefix)
    b_backend = RedisBackend(REDIS, prefix=prefix)
    await asyncio.to_thread(a_backend.connect)
    await asyncio.to_thread(b_backend.connect)
    a, b = Bus(backend=a_backend), Bus(backend=b_backend)
    handle = Delivery(max_entries=1024)
    b.subscribe("run:bench", delivery=handle)
    samples: list[float] = []
    try:
        for i in range(n + 50):
            event = Event.new("delta", Delta(run_id="bench", seq=i, text="hello world"))
            t0 = time.perf_counter_ns()
            a.broadcast("run:bench", event)
            got = await asyncio.wait_for(handle.get(), 10)
            t1 = time.perf_counter_ns()
            assert got.payload.seq == i, got
            if i >= 50:
                samples.append(t1 - t0)
    finally:
        a.close()
        b.close()
    return samples


def raw_latency(n: int) -> list[float]:
    channel = f"bench-raw-{uuid.uuid4().hex}"
    publisher = redis.Redis.from_url(REDIS)
    subscriber = redis.Redis.from_url(REDIS)
    pubsub = subscriber.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(channel)
    while pubsub.get_message(timeout=1.0) is None and not pubsub.subscribed:
        pass
    arrived = threading.Event()
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            message = pubsub.get_message(timeout=0.5)
            if message is not None and message["type"] == "message":
                arrived.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    payload = b'{"type":"delta","payload":{"run_id":"bench","seq":0,"text":"hello world"}}'
    samples: list[float] = []
    try:
        for i in range(n + 50):
            arrived.clear()
            t0 = time.perf_counter_ns()
            publisher.publish(channel, payload)
            if not arrived.wait(10):
                raise RuntimeError("raw PUBLISH never arrived")
            t1 = time.perf_counter_ns()
            if i >= 50:
                samples.append(t1 - t0)
    finally:
        stop.set()
        reader.join(5)
        pubsub.close()
        publisher.close()
        subscriber.close()
    return samples


async def bench_latency(n: int) -> None:
    print(f"== cross-daemon delta latency: {n} events, one at a time")
    raw = await asyncio.to_thread(raw_latency, n)
    bus = await bus_latency(n)
    raw_ = await asyncio.to_thread(raw_latency, n)  # again, after: the baseline brackets it
    raw += raw_
    print(f"  raw redis-py PUBLISH -> message    p50 {us(pct(raw, 0.5))}  p99 {us(pct(raw, 0.99))}")
    print(f"  bus A publish -> consumer of bus B p50 {us(pct(bus, 0.5))}  p99 {us(pct(bus, 0.99))}")
    ratio = pct(bus, 0.5) / pct(raw, 0.5)
    print(
        f"  ratio p50 {ratio:.2f}x (goal <= 1.5x: {'met' if ratio <= 1.5 else 'NOT met'}); "
        f"p99 {pct(bus, 0.99) / 1e6:.2f} ms (goal <= 10 ms: "
        f"{'met' if pct(bus, 0.99) <= 10e6 else 'NOT met'})"
    )


# -- 3. throughput with 1, 2, 4 daemons --------------------------------------------------------


def start_daemon(
    root: Path, name: str, schema: str, shared: Path
) -> tuple[subprocess.Popen[str], str]:
    home = root / name
    (home / "agent").mkdir(parents=True)
    (home / "agent" / "sessions").symlink_to(shared, target_is_directory=True)
    (home / "config.toml").write_text(
        f'[store]\nbackend = "postgres"\ndsn_env = "LEMON_BENCH_DSN"\nschema = "{schema}"\n'
        f'[bus]\nbackend = "redis"\nurl = "{REDIS}"\n[gateway]\nmax_concurrent_runs = 8\n',
        encoding="utf-8",
    )
    work = root / "work"
    work.mkdir(exist_ok=True)
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG")}
    env = {**keep, "HOME": str(root), "LEMON_HOME": str(home), "LEMON_BENCH_DSN": PG}
    proc = subprocess.Popen(
        [str(LEMON), "serve", "--port", "0", "--cwd", str(work)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
    if not found:
        proc.kill()
        raise RuntimeError(f"daemon {name} did not start: {line!r}")
    return proc, found[1].replace("http://", "ws://") + "/ws"


async def workload(urls: list[str], sessions: int, per_session: int) -> float:
    async def one_session(index: int) -> None:
        url = urls[index % len(urls)]
        key = f"agent:bench{index}:main"
        async with wire_client(url)() as client:
            for m in range(per_session):
                sent = await client.call(
                    "chat.send", {"sessionKey": key, "prompt": f"/echo s{index} m{m}"}
                )
                done = await client.completed(sent["runId"])
                assert done["payload"]["ok"], done

    t0 = time.perf_counter()
    await asyncio.gather(*(one_session(i) for i in range(sessions)))
    return time.perf_counter() - t0


async def bench_daemons(counts: list[int], sessions: int, per_session: int) -> None:
    runs = sessions * per_session
    print(f"== throughput: {sessions} sessions x {per_session} messages = {runs} runs")
    base: float | None = None
    for count in counts:
        schema = f"benchd_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch)
            shared = root / "sessions"
            shared.mkdir()
            daemons = [start_daemon(root, f"d{i}", schema, shared) for i in range(count)]
            try:
                await workload([url for _, url in daemons], 2, 1)  # warm up
                elapsed = await workload([url for _, url in daemons], sessions, per_session)
            finally:
                for proc, _ in daemons:
                    proc.terminate()
                for proc, _ in daemons:
                    try:
                        proc.wait(30)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                    if proc.stdout is not None:
                        proc.stdout.close()
                await drop_schema(PG, schema)
        rate = runs / elapsed
        base = rate if base is None else base
        print(f"  {count} daemon(s): {rate:7.1f} runs/s  ({rate / base:.2f}x one daemon)")


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args(argv)
    quick = args.quick
    steps: list[Callable[[], Awaitable[Any]]] = [
        lambda: bench_store(200 if quick else 2000),
        lambda: bench_latency(200 if quick else 2000),
        lambda: bench_daemons(
            [1, 2] if quick else [1, 2, 4], 4 if quick else 16, 2 if quick else 5
        ),
    ]
    for step in steps:
        await step()
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(sys.argv[1:])))
