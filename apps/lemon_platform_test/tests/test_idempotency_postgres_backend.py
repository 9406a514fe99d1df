"""The PostgreSQL idempotency store beyond the shared contract: the versioned schema (a newer
one refused), concurrent legacy migrations and reservations copying each raw row once, a lost
server that fails closed (through a proxy the test cuts: the server is shared), and the store
shared with the runtime's. The legacy migration's and the failed sweep's checks (real faults,
injected by triggers) are the contract kit's, run over this backend in
test_kit_idempotency_backends.py. Each test has its own schema, dropped after."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest

from lemon_core.idempotency import (
    IdempotencyStoreError,
    StoredResponse,
    body_fingerprint,
    hash_idempotency_key,
)
from lemon_infra import (
    LEGACY_TABLE,
    PostgresIdempotencyStore,
    PostgresStore,
    create_postgres_legacy_table,
    drop_schema,
    open_shared_idempotency_store,
)
from lemon_platform_test.proxy import TcpProxy

DSN = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
T0 = 1_700_000_000_000
TTL = 86_400_000


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    name = f"idpg_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    yield name
    await drop_schema(DSN, name)


async def _sql(statement: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
        cur = await conn.execute(statement, params)
        return list(await cur.fetchall()) if cur.description else []


async def _legacy(schema: str, rows: list[tuple[object, ...]]) -> None:
    async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
        await create_postgres_legacy_table(conn, schema)
        async with conn.cursor() as cur:
            await cur.executemany(
                f'INSERT INTO "{schema}".{LEGACY_TABLE} VALUES (%s, %s, %s, %s, %s, %s, %s)',
                rows,
            )


async def _raw_rows(schema: str) -> list[tuple[object, ...]]:
    return await _sql(f'SELECT idempotency_key, state FROM "{schema}".{LEGACY_TABLE}')


async def _open(schema: str, dsn: str = DSN, **options: object) -> PostgresIdempotencyStore:
    return await PostgresIdempotencyStore.open(dsn, schema=schema, **options)


async def test_the_schema_is_versioned_and_a_newer_one_is_refused(schema: str) -> None:
    store = await _open(schema)
    try:
        assert await store.schema_version() == 2
    finally:
        await store.close()
    await _sql(f"UPDATE \"{schema}\".idem_meta SET value = 9 WHERE name = 'schema_version'")
    with pytest.raises(IdempotencyStoreError, match="version 9, newer than this Lemon"):
        await _open(schema)


async def test_a_legacy_only_schema_is_version_1_until_opened(schema: str) -> None:
    await _legacy(schema, [])
    store = await _open(schema)  # opening adds the version-2 tables
    try:
        assert await store.schema_version() == 2
    finally:
        await store.close()


async def test_concurrent_migrations_and_reservations_copy_each_raw_row_once(
    schema: str,
) -> None:
    rows: list[tuple[object, ...]] = [
        ("hook", f"k{i}", "completed", f"run-{i}", None, f'{{"i":{i}}}', T0) for i in range(20)
    ]
    await _legacy(schema, rows)
    a, b = await _open(schema), await _open(schema)
    try:
        reservations = [
            b.reserve(
                key_hash=hash_idempotency_key("hook", f"k{i}"),
                integration="hook",
                body_hash=body_fingerprint(b"{}"),
                run_id=f"run-new-{i}",
                session_key="s",
                now_ms=T0 + 5,
                ttl_ms=TTL,
                lease_ms=1000,
                legacy_key=f"k{i}",
            )
            for i in range(0, 20, 2)
        ]
        migrations = asyncio.gather(
            a.migrate_legacy(now_ms=T0, ttl_ms=TTL), b.migrate_legacy(now_ms=T0, ttl_ms=TTL)
        )
        reserved = await asyncio.gather(*reservations)
        await migrations
        assert not any(r.created for r in reserved)  # each found its migrated fence
        assert [r.record.run_id for r in reserved] == [f"run-{i}" for i in range(0, 20, 2)]
        assert await _raw_rows(schema) == []
        for i in range(20):
            fence = await a.lookup(hash_idempotency_key("hook", f"k{i}"), now_ms=T0 + 6)
            assert fence is not None
            assert fence.response == StoredResponse(status=202, body=f'{{"i":{i}}}'.encode())
    finally:
        await a.close()
        await b.close()


async def test_a_lost_server_fails_closed_and_the_store_recovers(schema: str) -> None:
    with TcpProxy("127.0.0.1", 5432) as proxy:
        dsn = f"postgresql://postgres@127.0.0.1:{proxy.port}/test"
        store = await _open(schema, dsn, timeout_s=1.0, min_connections=1, max_connections=1)
        key_hash = hash_idempotency_key("hook", "k")
        try:
            await store.reserve(
                key_hash=key_hash,
                integration="hook",
                body_hash="b",
                run_id="run-1",
                session_key="s",
                now_ms=T0,
                ttl_ms=TTL,
                lease_ms=1000,
            )
            proxy.cut()
            response = StoredResponse(status=202, body=b"{}")
            with pytest.raises(IdempotencyStoreError, match="idempotency store"):
                await store.complete(
                    key_hash=key_hash, run_id="run-1", response=response, now_ms=T0 + 1
                )
            proxy.restore()
            for _ in range(50):  # the pool reconnects (bounded retries, as a caller does)
                try:
                    record = await store.lookup(key_hash, now_ms=T0 + 2)
                    break
                except IdempotencyStoreError:
                    await asyncio.sleep(0.05)
            else:
                pytest.fail("the pool never reconnected")
            assert record is not None
            # the failed completion claimed nothing: still pending, no stored response
            assert (record.state, record.response) == ("pending", None)
            assert store.statistics()["errors"] >= 1
        finally:
            await store.close()


async def test_a_shared_store_attaches_to_the_runtime_store_and_leaves_it_open(
    schema: str,
) -> None:
    backing = await PostgresStore.open(DSN, schema=schema)
    try:
        idem = await open_shared_idempotency_store(backing)
        assert isinstance(idem, PostgresIdempotencyStore)
        assert idem.schema == schema
        await idem.close()
        await backing.put("t", "k", 1)  # still open
        assert await backing.get("t", "k") == 1
        assert await open_shared_idempotency_store(object()) is None
    finally:
        await backing.close()
