"""The SQLite idempotency store beyond the shared contract: key hashing, the versioned schema,
concurrent legacy migrations and reservations over several connections. The legacy raw-key
migration and failed cleanup (real faults, injected by triggers) are checked by the contract
kit over every backend (lemon_platform_test's test_kit_idempotency_backends.py)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lemon_core.idempotency import (
    IdempotencyStoreError,
    InvalidIdempotencyKeyError,
    hash_idempotency_key,
)
from lemon_core.idempotency.records import Reservation
from lemon_infra import LEGACY_TABLE, SQLiteIdempotencyStore, create_legacy_table

T0 = 1_700_000_000_000
TTL = 86_400_000


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "idempotency.sqlite3"


def _legacy(db: Path, rows: list[tuple[object, ...]]) -> None:
    with sqlite3.connect(db) as conn:
        create_legacy_table(conn)
        conn.executemany(f"INSERT INTO {LEGACY_TABLE} VALUES (?, ?, ?, ?, ?, ?, ?)", rows)


def _raw_rows(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return list(conn.execute(f"SELECT idempotency_key, state FROM {LEGACY_TABLE}"))


@given(
    st.tuples(st.text(min_size=1), st.text(min_size=1).filter(str.strip)),
    st.tuples(st.text(min_size=1), st.text(min_size=1).filter(str.strip)),
)
def test_key_hashes_differ_for_different_integration_and_key_pairs(
    a: tuple[str, str], b: tuple[str, str]
) -> None:
    a_ok = a[1].isprintable() and len(a[1]) <= 255
    b_ok = b[1].isprintable() and len(b[1]) <= 255
    if not (a_ok and b_ok):
        return
    assert (hash_idempotency_key(*a) == hash_idempotency_key(*b)) == (a == b)


@pytest.mark.parametrize("key", [None, "", "   ", 7, b"bytes", "x" * 256, "a\nb"])
def test_a_blank_or_non_text_key_is_rejected_before_hashing(key: object) -> None:
    with pytest.raises(InvalidIdempotencyKeyError):
        hash_idempotency_key("hook", key)


async def test_a_newer_schema_version_is_refused(db: Path) -> None:
    store = await SQLiteIdempotencyStore.open(db)
    await store.close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE idem_meta SET value = 3 WHERE name = 'schema_version'")
    with pytest.raises(IdempotencyStoreError, match="schema version 3"):
        await SQLiteIdempotencyStore.open(db)


async def test_concurrent_migrations_copy_each_raw_row_once(db: Path) -> None:
    rows: list[tuple[object, ...]] = [
        ("hook", f"k{i}", "completed", f"run-{i}", None, f'{{"i":{i}}}', T0) for i in range(30)
    ]
    _legacy(db, rows)
    a = await SQLiteIdempotencyStore.open(db)
    b = await SQLiteIdempotencyStore.open(db)
    try:
        ra, rb = await asyncio.gather(
            a.migrate_legacy(now_ms=T0, ttl_ms=TTL), b.migrate_legacy(now_ms=T0, ttl_ms=TTL)
        )
        assert ra.deleted + rb.deleted == 30
        assert _raw_rows(db) == []
        for i in range(30):
            fence = await a.lookup(hash_idempotency_key("hook", f"k{i}"), now_ms=T0 + 1)
            assert fence is not None
            assert fence.response is not None
            assert fence.response.body == f'{{"i":{i}}}'.encode()
    finally:
        await a.close()
        await b.close()


async def test_two_connections_reserving_one_key_create_exactly_one_fence(db: Path) -> None:
    stores = [await SQLiteIdempotencyStore.open(db) for _ in range(4)]
    try:
        results = await asyncio.gather(
            *(
                stores[i % 4].reserve(
                    key_hash=hash_idempotency_key("hook", "same"),
                    integration="hook",
                    body_hash="b",
                    run_id=f"run-{i}",
                    session_key="s",
                    now_ms=T0,
                    ttl_ms=TTL,
                    lease_ms=1000,
                )
                for i in range(100)
            )
        )
        assert sum(r.created for r in results) == 1
        assert len({r.record.run_id for r in results}) == 1
    finally:
        for store in stores:
            await store.close()


async def _held(store: SQLiteIdempotencyStore) -> tuple[asyncio.Future[None], threading.Event]:
    """Occupy the store's thread until the returned event is set (writes pile up meanwhile)."""
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        entered.set()
        release.wait(10)

    holding = asyncio.ensure_future(store._call(hold))
    await asyncio.to_thread(entered.wait, 10)
    return holding, release


def _reserve(store: SQLiteIdempotencyStore, i: int) -> asyncio.Future[Reservation]:
    return asyncio.ensure_future(
        store.reserve(
            key_hash=hash_idempotency_key("hook", f"key-{i}"),
            integration="hook",
            body_hash="b",
            run_id=f"run-{i}",
            session_key="s",
            now_ms=T0,
            ttl_ms=TTL,
            lease_ms=1000,
        )
    )


async def test_writes_that_wait_together_share_one_commit_and_each_is_durable(db: Path) -> None:
    store = await SQLiteIdempotencyStore.open(db)
    try:
        holding, release = await _held(store)
        writes = [_reserve(store, i) for i in range(20)]
        await asyncio.sleep(0)
        assert not any(w.done() for w in writes)  # nobody is answered before the commit
        release.set()
        await holding
        results = await asyncio.gather(*writes)
        assert all(r.created for r in results)
        assert store.statistics()["write_batches"] == 1
    finally:
        await store.close()
    # Durable: a new connection sees all twenty fences.
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT count(*) FROM idem_fences").fetchone()[0] == 20
    finally:
        conn.close()


async def test_a_write_that_fails_in_a_shared_commit_rolls_back_alone(db: Path) -> None:
    store = await SQLiteIdempotencyStore.open(db)
    try:
        holding, release = await _held(store)
        before = _reserve(store, 1)

        def broken(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO idem_fences (key_hash, integration, state, run_id, created_at_ms, "
                "updated_at_ms, expires_at_ms, lease_until_ms) "
                f"VALUES ('half', 'hook', 'pending', 'run-half', 0, 0, {T0 + TTL}, 0)"
            )  # written, then undone when the next statement fails
            conn.execute("INSERT INTO no_such_table VALUES (1)")

        failing = asyncio.ensure_future(store._write(broken))
        after = _reserve(store, 2)
        release.set()
        await holding
        assert (await before).created
        assert (await after).created
        with pytest.raises(IdempotencyStoreError, match="no_such_table"):
            await failing
        assert store.statistics()["write_batches"] == 1
        assert await store.lookup("half", now_ms=T0) is None
        for i in (1, 2):
            assert await store.lookup(hash_idempotency_key("hook", f"key-{i}"), now_ms=T0)
    finally:
        await store.close()
