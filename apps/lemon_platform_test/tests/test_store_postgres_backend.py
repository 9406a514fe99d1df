"""The PostgreSQL store beyond the contract: versioned migrations applied once (concurrently
too), a schema from a newer Lemon refused, an unreachable server and a lost connection are
clear errors with nothing half-written, and the pool reconnects."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from lemon_core.store import StoreUnavailableError
from lemon_infra import MIGRATIONS, PostgresStore, drop_schema
from lemon_platform_test.proxy import TcpProxy

DSN = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    name = f"pgt_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    yield name
    await drop_schema(DSN, name)


def proxied(proxy: TcpProxy) -> str:
    return f"postgresql://postgres@127.0.0.1:{proxy.port}/test"


async def test_migrations_are_versioned_and_applied_once_even_by_concurrent_openers(
    schema: str,
) -> None:
    stores = await asyncio.gather(*(PostgresStore.open(DSN, schema=schema) for _ in range(4)))
    try:
        assert await stores[0].migrations() == [v for v, _, _ in MIGRATIONS]
        await stores[1].put("t", "k", {"v": 1})
        assert await stores[3].get("t", "k") == {"v": 1}
    finally:
        for store in stores:
            await store.close()
    again = await PostgresStore.open(DSN, schema=schema)
    try:
        assert await again.migrations() == [v for v, _, _ in MIGRATIONS]
        assert await again.get("t", "k") == {"v": 1}
    finally:
        await again.close()


async def test_a_schema_migrated_by_a_newer_lemon_is_refused(schema: str) -> None:
    store = await PostgresStore.open(DSN, schema=schema)
    await store.close()
    async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
        await conn.execute(
            f'INSERT INTO "{schema}".lemon_migrations (version, name) VALUES (999, %s)',
            ("from the future",),
        )
    with pytest.raises(StoreUnavailableError, match="migration 999, newer than this Lemon"):
        await PostgresStore.open(DSN, schema=schema)


async def test_an_unreachable_server_is_one_clear_error() -> None:
    with TcpProxy("127.0.0.1", 5432) as proxy:
        proxy.cut()
        with pytest.raises(StoreUnavailableError, match=r"127\.0\.0\.1:\d+/test: cannot connect"):
            await PostgresStore.open(proxied(proxy), schema="unused", timeout_s=1.0)


async def test_a_lost_connection_fails_clearly_and_the_pool_reconnects(schema: str) -> None:
    with TcpProxy("127.0.0.1", 5432) as proxy:
        store = await PostgresStore.open(
            proxied(proxy), schema=schema, min_connections=1, max_connections=1, timeout_s=1.0
        )
        try:
            await store.put("t", "before", 1)
            proxy.cut()
            with pytest.raises(StoreUnavailableError, match="PostgreSQL store"):
                await store.put("t", "during", 2)
            assert store.statistics()["errors"] == 1
            proxy.restore()
            # The broken connection left the pool; the next call gets a fresh one (the pool
            # may need a moment to reconnect: retry a bounded number of times, as a caller does).
            for _ in range(50):
                try:
                    got = await store.get("t", "before")
                    break
                except StoreUnavailableError:
                    await asyncio.sleep(0.05)
            else:
                pytest.fail("the pool never reconnected")
            assert got == 1
            assert await store.get("t", "during") is None  # nothing half-written
        finally:
            await store.close()


async def test_a_connection_lost_in_the_middle_of_a_batch_commits_none_of_it(schema: str) -> None:
    # Another session locks one row of the batch, so the batch is stopped half way through
    # its transaction (its first row written, uncommitted); then the connection is cut.
    with TcpProxy("127.0.0.1", 5432) as proxy:
        store = await PostgresStore.open(
            proxied(proxy), schema=schema, min_connections=1, max_connections=1, timeout_s=5.0
        )
        try:
            await store.put("t", "locked", 0)
            async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as locker:
                async with locker.transaction():
                    await locker.execute(
                        f'SELECT 1 FROM "{schema}".lemon_kv '
                        "WHERE tbl = 't' AND key = 'locked' FOR UPDATE"
                    )
                    batch = asyncio.create_task(
                        store.put_many(
                            [("t", "a", 1, None), ("t", "locked", 1, None), ("t", "b", 1, None)]
                        )
                    )
                    pid = await _waiting_backend(locker, schema)
                    proxy.cut()
                    with pytest.raises(StoreUnavailableError, match="PostgreSQL store"):
                        await batch
                # The lock is gone: the cut session's backend goes on, never gets its COMMIT.
                await _gone(locker, pid)
                cur = await locker.execute(
                    f"SELECT key, value FROM \"{schema}\".lemon_kv WHERE tbl = 't' ORDER BY key"
                )
                assert [(k, bytes(v)) for k, v in await cur.fetchall()] == [("locked", b"0")]
        finally:
            await store.close()


async def _waiting_backend(conn: psycopg.AsyncConnection[Any], schema: str) -> int:
    """The pid of the backend waiting for a row lock on ``schema``'s table (bounded wait).
    ``conn`` may be inside a transaction, where PostgreSQL keeps the first activity snapshot
    until it ends: each poll clears it, or a poll before the batch waited would be seen again."""
    for _ in range(200):
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        cur = await conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND position(%s in query) > 0",
            (schema,),
        )
        row = await cur.fetchone()
        if row is not None:
            return int(row[0])
        await asyncio.sleep(0.01)
    pytest.fail("the batch never reached the locked row")


async def _gone(conn: psycopg.AsyncConnection[Any], pid: int) -> None:
    for _ in range(500):
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        cur = await conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,))
        if await cur.fetchone() is None:
            return
        await asyncio.sleep(0.01)
    pytest.fail(f"backend {pid} of the cut connection never ended")


class _Clock:
    """A monotonic clock the test moves (when the breaker's next probe is due)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_server_that_stops_answering_fails_fast_until_a_probe_reaches_it(
    schema: str,
) -> None:
    clock = _Clock()
    changes: list[tuple[bool, str]] = []
    with TcpProxy("127.0.0.1", 5432) as proxy:
        store = await PostgresStore.open(
            proxied(proxy),
            schema=schema,
            min_connections=1,
            max_connections=1,
            timeout_s=0.5,
            probe_interval_s=1.0,
            monotonic=clock,
        )
        store.watch(lambda running, reason: changes.append((running, reason)))
        try:
            await store.put("t", "before", 1)
            proxy.cut()
            # The first calls find the server gone the slow way (the pool's timeout)...
            for _ in range(20):
                with pytest.raises(StoreUnavailableError) as first:
                    await store.get("t", "before")
                if not store.available:
                    break
            assert "PoolTimeout" in str(first.value)
            assert changes == [(False, changes[0][1])]
            assert "PoolTimeout" in changes[0][1]
            # ... and from then on every call fails at once, without touching the pool.
            waiting_before = store.statistics()["fast_failures"]
            for _ in range(5):
                with pytest.raises(StoreUnavailableError, match="failing fast until a probe"):
                    await store.put("t", "during", 2)
            assert store.statistics()["fast_failures"] == waiting_before + 5
            assert store.statistics()["available"] is False
            proxy.restore()
            clock.now += 0.5  # no probe is due yet: still failing fast
            with pytest.raises(StoreUnavailableError, match="failing fast"):
                await store.get("t", "before")
            # The probe is due: it waits as before, and the first success closes the breaker
            # (the pool may need a moment to reconnect: a bounded number of probes).
            for _ in range(40):
                clock.now += 1.0
                try:
                    got = await store.get("t", "before")
                    break
                except StoreUnavailableError:
                    await asyncio.sleep(0.05)
            else:
                pytest.fail("no probe ever reached the restored server")
            assert got == 1
            assert store.available
            assert changes[1:] == [(True, "")]  # one report each way
            await store.put("t", "after", 3)
            assert await store.get("t", "during") is None
            assert len(changes) == 2
        finally:
            await store.close()


async def test_a_pool_busy_with_slow_calls_of_a_live_server_does_not_trip_the_breaker(
    schema: str,
) -> None:
    store = await PostgresStore.open(
        DSN, schema=schema, min_connections=1, max_connections=1, timeout_s=0.3
    )
    try:
        await store.put("t", "k", 1)
        held = asyncio.Event()
        release = asyncio.Event()

        async def hold(conn: Any) -> None:
            held.set()
            await release.wait()

        holder = asyncio.create_task(store.run(hold))
        await held.wait()
        with pytest.raises(StoreUnavailableError, match="PoolTimeout"):
            await store.get("t", "k")  # the only connection is busy: a plain timeout
        assert store.available
        release.set()
        await holder
        assert await store.get("t", "k") == 1
        assert store.statistics()["fast_failures"] == 0
    finally:
        await store.close()


async def test_two_stores_batching_overlapping_keys_in_opposite_orders_never_deadlock(
    schema: str,
) -> None:
    """Two daemons' ``put_many`` of the same keys, each in its own order, at once: rows locked
    in opposite orders deadlock on PostgreSQL (one transaction is aborted: a failed write).
    The store writes a batch in key order, so every round completes; the last entry of a key
    within one batch still wins."""
    a = await PostgresStore.open(DSN, schema=schema, max_connections=2)
    b = await PostgresStore.open(DSN, schema=schema, max_connections=2)
    try:
        keys = [f"k{i:03d}" for i in range(200)]
        for round_ in range(5):
            forward = [("t", k, {"by": "a", "round": round_}, None) for k in keys]
            backward = [("t", k, {"by": "b", "round": round_}, None) for k in reversed(keys)]
            await asyncio.gather(a.put_many(forward), b.put_many(backward))
        await a.put_many([("t", "dup", 1, None), ("t", "dup", 2, None)])
        assert await a.get("t", "dup") == 2
        assert {v["round"] for _, v in await a.scan("t", prefix="k")} == {4}
    finally:
        await a.close()
        await b.close()
