"""The SQLite idempotency store beyond the shared contract: key hashing, the versioned schema,
the legacy raw-key migration, and failed cleanup (real SQLite faults, injected by triggers)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lemon_core.idempotency import (
    LEGACY_TABLE,
    IdempotencyStoreError,
    InvalidIdempotencyKeyError,
    SQLiteIdempotencyStore,
    StoredResponse,
    body_fingerprint,
    create_legacy_table,
    hash_idempotency_key,
)

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


async def test_legacy_rows_migrate_to_hashed_fences_with_their_exact_responses(db: Path) -> None:
    exact = '{"run_id":"run-legacy-1","session_key":"agent:default:main","mode":"async"}'
    _legacy(
        db,
        [
            ("hook", "done-key", "completed", "run-legacy-1", "agent:default:main", exact, T0),
            ("hook", "sent-key", "submitted", "run-legacy-2", "agent:default:main", None, T0),
            ("hook", "ran-key", "pending", "run-legacy-3", None, None, T0),
            ("hook", "ambiguous-key", "pending", None, None, None, T0),
        ],
    )
    store = await SQLiteIdempotencyStore.open(db)
    try:
        assert await store.schema_version() == 2
        report = await store.migrate_legacy(now_ms=T0 + 10, ttl_ms=TTL)
        assert (report.seen, report.written, report.deleted, report.kept) == (4, 4, 4, 0)
        assert _raw_rows(db) == []
        done = await store.lookup(hash_idempotency_key("hook", "done-key"), now_ms=T0 + 11)
        assert done is not None
        assert (done.state, done.legacy, done.body_hash) == ("accepted", True, None)
        assert done.response == StoredResponse(status=202, body=exact.encode())
        sent = await store.lookup(hash_idempotency_key("hook", "sent-key"), now_ms=T0 + 11)
        assert sent is not None  # accepted, but no exact response: never a generic success
        assert (sent.state, sent.run_id, sent.response) == ("accepted", "run-legacy-2", None)
        ran = await store.lookup(hash_idempotency_key("hook", "ran-key"), now_ms=T0 + 11)
        assert ran is not None
        assert (ran.state, ran.run_id) == ("outcome_unknown", "run-legacy-3")
        ambiguous = await store.lookup(
            hash_idempotency_key("hook", "ambiguous-key"), now_ms=T0 + 11
        )
        assert ambiguous is not None  # a fence, not an invented execution identity
        assert (ambiguous.state, ambiguous.run_id) == ("pending", None)
        assert ambiguous.in_flight(T0 + TTL - 1)
        assert await store.recover(now_ms=T0 + 12) == 0  # stays ambiguous
        # a second pass finds nothing
        again = await store.migrate_legacy(now_ms=T0 + 20, ttl_ms=TTL)
        assert again.seen == 0
    finally:
        await store.close()


async def test_a_partial_migration_keeps_the_raw_row_and_cannot_authorise_a_replay(
    db: Path,
) -> None:
    _legacy(db, [("hook", "k", "submitted", "run-9", "agent:default:main", None, T0)])
    store = await SQLiteIdempotencyStore.open(db)
    try:
        with sqlite3.connect(db) as conn:  # a real fault in the second step
            conn.execute(
                f"CREATE TRIGGER no_raw_delete BEFORE DELETE ON {LEGACY_TABLE} "
                "BEGIN SELECT RAISE(ABORT, 'injected delete failure'); END"
            )
        with pytest.raises(IdempotencyStoreError, match="injected"):
            await store.migrate_legacy(now_ms=T0, ttl_ms=TTL)
        assert _raw_rows(db) == [("k", "submitted")]  # the raw row stays
        fence = await store.lookup(hash_idempotency_key("hook", "k"), now_ms=T0 + 1)
        assert fence is not None  # the durable hashed fence was written first
        assert (fence.state, fence.response) == ("accepted", None)  # no exact response
        with sqlite3.connect(db) as conn:
            conn.execute("DROP TRIGGER no_raw_delete")
        report = await store.migrate_legacy(now_ms=T0 + 2, ttl_ms=TTL)
        assert (report.deleted, report.kept) == (1, 0)
    finally:
        await store.close()


async def test_a_raw_row_changed_after_its_copy_is_kept_and_recopied(db: Path) -> None:
    _legacy(db, [("hook", "k", "pending", None, None, None, T0)])
    store = await SQLiteIdempotencyStore.open(db)
    key_hash = hash_idempotency_key("hook", "k")
    try:
        with sqlite3.connect(db) as conn:  # a legacy writer completes the row mid-migration
            conn.execute(
                f"CREATE TRIGGER legacy_writer AFTER INSERT ON idem_fences "
                f"BEGIN UPDATE {LEGACY_TABLE} SET state = 'completed', run_id = 'run-late', "
                "response_json = '{\"late\":true}'; END"
            )
        report = await store.migrate_legacy(now_ms=T0, ttl_ms=TTL)
        assert (report.deleted, report.kept) == (0, 1)  # the conditional delete refused
        fence = await store.lookup(key_hash, now_ms=T0 + 1)
        assert fence is not None
        assert (fence.state, fence.run_id, fence.response) == ("pending", None, None)
        with sqlite3.connect(db) as conn:
            conn.execute("DROP TRIGGER legacy_writer")
        report = await store.migrate_legacy(now_ms=T0 + 2, ttl_ms=TTL)
        assert (report.written, report.deleted) == (1, 1)
        fence = await store.lookup(key_hash, now_ms=T0 + 3)
        assert fence is not None
        assert (fence.state, fence.run_id) == ("accepted", "run-late")
        assert fence.response == StoredResponse(status=202, body=b'{"late":true}')
    finally:
        await store.close()


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


async def test_a_reservation_migrates_its_own_legacy_row_first(db: Path) -> None:
    exact = '{"run_id":"run-old"}'
    _legacy(db, [("hook", "k", "completed", "run-old", None, exact, T0)])
    store = await SQLiteIdempotencyStore.open(db)
    try:
        reservation = await store.reserve(
            key_hash=hash_idempotency_key("hook", "k"),
            integration="hook",
            body_hash=body_fingerprint(b"{}"),
            run_id="run-new",
            session_key="s",
            now_ms=T0 + 5,
            ttl_ms=TTL,
            lease_ms=1000,
            legacy_key="k",
        )
        assert not reservation.created
        assert reservation.record.run_id == "run-old"
        assert reservation.record.response == StoredResponse(status=202, body=exact.encode())
        assert _raw_rows(db) == []
    finally:
        await store.close()


async def test_a_failed_sweep_removes_nothing_and_keeps_the_watermark(db: Path) -> None:
    store = await SQLiteIdempotencyStore.open(db)
    key_hash = hash_idempotency_key("hook", "k")
    try:
        await store.reserve(
            key_hash=key_hash,
            integration="hook",
            body_hash="b",
            run_id="run-1",
            session_key="s",
            now_ms=T0,
            ttl_ms=1000,
            lease_ms=1000,
        )
        response = StoredResponse(status=202, body=b'{"ok":1}')
        await store.complete(key_hash=key_hash, run_id="run-1", response=response, now_ms=T0)
        with sqlite3.connect(db) as conn:  # the fence delete fails after the snapshot delete
            conn.execute(
                "CREATE TRIGGER no_fence_delete BEFORE DELETE ON idem_fences "
                "BEGIN SELECT RAISE(ABORT, 'injected fence delete failure'); END"
            )
        with pytest.raises(IdempotencyStoreError, match="injected"):
            await store.sweep(now_ms=T0 + 5000)
        assert await store.watermark() == 0
        records = await store.records()
        assert [r.response for r in records] == [response]  # the snapshot was not removed
        assert await store.lookup(key_hash, now_ms=T0 + 5000) is None  # expired: no replay
        with sqlite3.connect(db) as conn:
            conn.execute("DROP TRIGGER no_fence_delete")
        report = await store.sweep(now_ms=T0 + 5000)
        assert (report.responses_removed, report.fences_removed) == (1, 1)
        assert await store.watermark() == T0 + 5000
    finally:
        await store.close()


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
