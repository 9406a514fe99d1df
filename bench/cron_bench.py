"""The fire ledger's claim cost on PostgreSQL and schedule evaluation, each next to its baseline
in the same run.

    .venv/bin/python bench/cron_bench.py [--fires 2000] [--dsn postgresql://postgres@127.0.0.1:5432/test]

* Claim cost: a full claim (``PostgresFireLedger.claim``) plus its fenced status update
  (``record(submitted)``), next to a bare ``INSERT ... ON CONFLICT DO NOTHING RETURNING`` on a
  table of the same shape, through the same pool, one at a time. Figures: p50 / p99 in µs and
  the ratio of the p50s (the goal: the claim alone within 1.5x of the bare statement).
* Schedule evaluation: ``Cron.next_after`` next to raw cronsim for ``*/5 9-17 * * 1-5``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from cronsim import CronSim

from lemon_automation.schedule import Cron
from lemon_infra import PostgresFireLedger, PostgresStore, drop_schema


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _claims(dsn: str, fires: int) -> None:
    schema = f"cron_bench_{uuid.uuid4().hex[:8]}"
    store = await PostgresStore.open(dsn, schema=schema, max_connections=2)
    ledger = PostgresFireLedger(store)
    bare_sql = (
        f'INSERT INTO "{schema}".bare_fires (job_id, due_at_ms, owner, fence, lease_until_ms, '
        "status, claimed_at_ms, updated_at_ms) VALUES (%s, %s, %s, 1, 0, 'claimed', 0, 0) "
        "ON CONFLICT (job_id, due_at_ms) DO NOTHING RETURNING job_id"
    )

    async def create(conn: Any) -> None:
        await conn.execute(
            f'CREATE TABLE "{schema}".bare_fires (LIKE "{schema}".lemon_fires INCLUDING ALL)'
        )

    try:
        await store.run(create)
        bare: list[float] = []
        claim: list[float] = []
        full: list[float] = []
        for i in range(fires):

            async def one(conn: Any, i: int = i) -> None:
                await (await conn.execute(bare_sql, ("job", i, "bench"))).fetchone()

            t0 = time.perf_counter()
            await store.run(one)
            t1 = time.perf_counter()
            fire = await ledger.claim("job", i, "bench", lease_ms=30_000)
            t2 = time.perf_counter()
            assert fire is not None
            await ledger.record(fire, status="submitted", run_id=f"run_{i}")
            t3 = time.perf_counter()
            bare.append((t1 - t0) * 1e6)
            claim.append((t2 - t1) * 1e6)
            full.append((t3 - t1) * 1e6)
        b50 = statistics.median(bare)
        print(f"claim cost on PostgreSQL, {fires} fires, one at a time")
        print(f"  bare INSERT ON CONFLICT   p50 {b50:7.0f} us  p99 {_pct(bare, 0.99):7.0f} us")
        c50 = statistics.median(claim)
        print(
            f"  ledger claim              p50 {c50:7.0f} us  p99 {_pct(claim, 0.99):7.0f} us"
            f"  ratio {c50 / b50:.2f}x"
        )
        f50 = statistics.median(full)
        print(
            f"  claim + fenced record     p50 {f50:7.0f} us  p99 {_pct(full, 0.99):7.0f} us"
            f"  ratio {f50 / b50:.2f}x"
        )
    finally:
        await store.close()
        await drop_schema(dsn, schema)


def _schedules(n: int = 20_000) -> None:
    expr = "*/5 9-17 * * 1-5"
    cron = Cron.parse(expr, "UTC")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    t0 = time.perf_counter()
    for i in range(n):
        next(CronSim(expr, start.replace(minute=i % 60)))
    raw = (time.perf_counter() - t0) / n * 1e6
    base = int(start.timestamp() * 1000)
    t0 = time.perf_counter()
    for i in range(n):
        cron.next_after(base + (i % 60) * 60_000)
    ours = (time.perf_counter() - t0) / n * 1e6
    print(f"schedule evaluation {expr!r}, {n} calls")
    print(f"  raw cronsim next()        {raw:6.1f} us")
    print(f"  Cron.next_after           {ours:6.1f} us  ratio {ours / raw:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fires", type=int, default=2000)
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    asyncio.run(_claims(args.dsn, args.fires))
    _schedules()


if __name__ == "__main__":
    main()
