"""SQLite backend specifics: WAL, calls off the loop, durable reopen, failures translated."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the fixture's class, from this folder's conftest
    from lemon_core.clock import ManualClock

import contextlib
import sqlite3
import threading
from pathlib import Path

import pytest

from lemon_core.execution import ResumeToken
from lemon_core.store import (
    ChatStateStore,
    RunStore,
    RunSummary,
    SessionIndexStore,
    StoreClosedError,
    StoreUnavailableError,
)
from lemon_infra import MemoryStore, SQLiteStore


async def test_store_sqlite_uses_wal_and_runs_off_the_event_loop(tmp_path: Path) -> None:
    path = tmp_path / "lemon.sqlite3"
    async with await SQLiteStore.open(path) as store:
        await store.put("t", "k", {"v": 1})
        assert store._owner_thread is not None
        assert store._owner_thread is not threading.current_thread()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


async def test_store_sqlite_survives_reopen_with_ttl_kept(
    tmp_path: Path, clock: ManualClock
) -> None:
    clock.now = 1_000
    path = tmp_path / "db.sqlite3"
    store = await SQLiteStore.open(path, clock=clock)
    chat = ChatStateStore(store, ttl_ms=100, clock=clock)
    await chat.put("s", ResumeToken.native("v1"))
    await store.close()
    again = await SQLiteStore.open(path, clock=clock)
    chat = ChatStateStore(again, ttl_ms=100, clock=clock)
    assert await chat.resume_token("s") == ResumeToken.native("v1")
    clock.now += 100
    assert await chat.resume_token("s") is None
    await again.close()


async def test_store_sqlite_translates_backend_failures(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    store = await SQLiteStore.open(path)
    await store.put("t", "k", 1)
    # Another connection holds the write lock: the write fails as StoreUnavailableError
    # (after busy_timeout), and the previous value stays.
    blocker = sqlite3.connect(path, timeout=0)
    blocker.execute("BEGIN IMMEDIATE")
    store._db().execute("PRAGMA busy_timeout=1")
    try:
        with pytest.raises(StoreUnavailableError, match="locked"):
            await store.put("t", "k", 2)
    finally:
        blocker.rollback()
        blocker.close()
    assert await store.get("t", "k") == 1
    assert store.statistics()["errors"] == 1
    await store.close()
    with pytest.raises(StoreClosedError):
        await store.put("t", "k", 3)


async def test_store_memory_bound_is_enforced() -> None:
    store = MemoryStore(max_entries=2)
    await store.put("t", "a", 1)
    await store.put("t", "b", 1)
    await store.put("t", "a", 2)
    with pytest.raises(StoreUnavailableError, match="full"):
        await store.put("t", "c", 1)


async def test_store_default_is_sqlite_under_lemon_home(tmp_path: Path) -> None:
    from lemon_infra import default_store_path, open_default_store

    env = {"LEMON_HOME": str(tmp_path / "home")}
    assert default_store_path(env) == tmp_path / "home" / "store" / "lemon.sqlite3"
    store = await open_default_store(environ=env)
    try:
        await store.put("t", "k", 1)
        assert store.statistics()["backend"] == "sqlite"
    finally:
        await store.close()
    assert (tmp_path / "home" / "store" / "lemon.sqlite3").exists()


async def test_run_store_finalize_that_fails_half_way_records_nothing_of_the_run(
    tmp_path: Path,
) -> None:
    # The storage refuses the recent row (the third of the run's rows): neither the run by id
    # nor its history row is left behind, and the session index is not touched.
    path = tmp_path / "lemon.sqlite3"
    async with await SQLiteStore.open(path) as store:
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute(
                "CREATE TRIGGER refuse_recent BEFORE INSERT ON lemon_kv "
                "WHEN NEW.tbl = 'run_recent' BEGIN SELECT RAISE(ABORT, 'disk full'); END"
            )
            conn.commit()
        runs = RunStore(store)
        summary = RunSummary(run_id="r1", session_key="s1", ok=True, finished_at_ms=1_000)
        with pytest.raises(StoreUnavailableError, match="disk full"):
            await runs.finalize(summary)
        assert await runs.get("r1") is None
        assert await runs.history("s1") == []
        assert await runs.recent() == []
        assert await SessionIndexStore(store).get("s1") is None
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute("DROP TRIGGER refuse_recent")
            conn.commit()
        await runs.finalize(summary)
        assert [r.run_id for r in await runs.history("s1")] == ["r1"]
        index = await SessionIndexStore(store).get("s1")
        assert index is not None
        assert index.runs == 1
