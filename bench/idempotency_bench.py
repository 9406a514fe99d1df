"""The idempotency stores' speed, PostgreSQL next to SQLite, in the same run.

    .venv/bin/python bench/idempotency_bench.py [--keys 2000] [--concurrency 16]
        [--dsn postgresql://postgres@127.0.0.1:5432/test]

For each backend: ``--keys`` fresh keys, each one reservation and one completion (what an
accepted webhook costs the store), from ``--concurrency`` tasks; then the same number of
lookups of accepted keys (what a replay costs). Figures: operations per second and the p50 /
p99 latency of one reserve+complete and of one lookup. SQLite is the baseline
(``synchronous=FULL``, the daemon's setting); PostgreSQL runs in a schema of its own, dropped
after. The PostgreSQL store pays a network round trip per statement (a reservation is a
transaction of four or five statements) and buys sharing across daemons.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from lemon_core.idempotency import IdempotencyStore, StoredResponse, hash_idempotency_key
from lemon_infra import PostgresIdempotencyStore, SQLiteIdempotencyStore, drop_schema

_T0 = 1_700_000_000_000
_TTL = 86_400_000


async def _measure(store: IdempotencyStore, keys: int, concurrency: int) -> dict[str, float]:
    hashes = [hash_idempotency_key("bench", f"k{i}") for i in range(keys)]
    writes: list[float] = []
    reads: list[float] = []
    gate = asyncio.Semaphore(concurrency)
    response = StoredResponse(status=202, body=b'{"status":"accepted","run_id":"r"}')

    async def write(i: int) -> None:
        async with gate:
            start = time.perf_counter()
            await store.reserve(key_hash=hashes[i], integration="bench", body_hash="b",
                                run_id=f"run_{i}", session_key="s", now_ms=_T0, ttl_ms=_TTL,
                                lease_ms=60_000)  # fmt: skip
            await store.complete(key_hash=hashes[i], run_id=f"run_{i}", response=response,
                                 now_ms=_T0 + 1)  # fmt: skip
            writes.append(time.perf_counter() - start)

    async def read(i: int) -> None:
        async with gate:
            start = time.perf_counter()
            assert await store.lookup(hashes[i], now_ms=_T0 + 2) is not None
            reads.append(time.perf_counter() - start)

    began = time.perf_counter()
    await asyncio.gather(*(write(i) for i in range(keys)))
    wrote = time.perf_counter() - began
    began = time.perf_counter()
    await asyncio.gather(*(read(i) for i in range(keys)))
    read_s = time.perf_counter() - began
    q = statistics.quantiles
    return {
        "accept/s": keys / wrote,
        "accept p50 ms": statistics.median(writes) * 1000,
        "accept p99 ms": q(writes, n=100)[98] * 1000,
        "lookup/s": keys / read_s,
        "lookup p50 ms": statistics.median(reads) * 1000,
        "lookup p99 ms": q(reads, n=100)[98] * 1000,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        sqlite = await SQLiteIdempotencyStore.open(Path(directory) / "idempotency.sqlite3")
        try:
            base = await _measure(sqlite, args.keys, args.concurrency)
        finally:
            await sqlite.close()
    schema = f"idem_bench_{uuid.uuid4().hex[:8]}"
    postgres = await PostgresIdempotencyStore.open(args.dsn, schema=schema)
    try:
        pg = await _measure(postgres, args.keys, args.concurrency)
    finally:
        await postgres.close()
        await drop_schema(args.dsn, schema)
    print(f"{args.keys} keys, {args.concurrency} concurrent tasks")
    print(f"{'':16}{'SQLite':>12}{'PostgreSQL':>12}{'PG / SQLite':>13}")
    for name in base:
        ratio = pg[name] / base[name]
        print(f"{name:16}{base[name]:12.2f}{pg[name]:12.2f}{ratio:12.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
