"""SQLite Store backend (WAL), the default.

Design: one connection owned by one dedicated thread; every call is shipped to that
thread, so blocking I/O never runs on the event loop and SQLite's connection is never
shared between threads. Each write (and each ``put_many`` batch) is its own transaction,
committed before the call returns (``synchronous=FULL`` by default: durable across power loss).

Bounds: at most ``max_pending`` calls are queued for the thread; further callers wait
(backpressure) instead of growing the queue. ``statistics()`` shows the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, TypeVar

from lemon_core.clock import SYSTEM_CLOCK
from lemon_core.errors import UsageTypeError
from lemon_core.store.errors import StoreClosedError, StoreUnavailableError
from lemon_core.store.protocol import (
    DEFAULT_MAX_VALUE_BYTES,
    Clock,
    PutEntry,
    check_entries,
    check_key,
    check_limit,
    check_table,
    check_ttl,
    decode_value,
    encode_value,
)
from lemon_infra._sqlite_integrity import (
    corrupt_store_error,
    empty_store_error,
    is_corruption,
    quick_check,
)

__all__ = ["SQLiteStore"]

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS lemon_kv (
    tbl TEXT NOT NULL,
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    expires_at_ms INTEGER,
    updated_at_ms INTEGER NOT NULL,
    PRIMARY KEY (tbl, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS lemon_kv_expiry ON lemon_kv (expires_at_ms)
    WHERE expires_at_ms IS NOT NULL;
"""

_PUT = (
    "INSERT INTO lemon_kv (tbl, key, value, expires_at_ms, updated_at_ms) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tbl, key) DO UPDATE SET "
    "value=excluded.value, expires_at_ms=excluded.expires_at_ms, "
    "updated_at_ms=excluded.updated_at_ms"
)
#: The claim of ``put_new``: inserted, or replacing an expired row; a row back when it held.
_PUT_NEW = (
    "INSERT INTO lemon_kv (tbl, key, value, expires_at_ms, updated_at_ms) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tbl, key) DO UPDATE SET "
    "value=excluded.value, expires_at_ms=excluded.expires_at_ms, "
    "updated_at_ms=excluded.updated_at_ms "
    "WHERE lemon_kv.expires_at_ms IS NOT NULL AND lemon_kv.expires_at_ms <= ? "
    "RETURNING 1"
)


class SQLiteStore:
    """A Store in one SQLite file (WAL). Open with ``await SQLiteStore.open(path)``."""

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Clock = SYSTEM_CLOCK,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        max_pending: int = 1024,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        verify: bool = True,
    ) -> None:
        self._path = Path(path)
        self._verify = verify
        self._clock = clock
        self._max_value_bytes = max_value_bytes
        self._max_pending = max_pending
        self._synchronous = synchronous
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lemon-sqlite")
        self._slots = asyncio.Semaphore(max_pending)
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._opened = False
        self._pending = 0
        self._ops = 0
        self._errors = 0
        self._owner_thread: threading.Thread | None = None

    @classmethod
    async def open(cls, path: str | Path, **options: Any) -> SQLiteStore:
        """Create/open the database file, check it (``PRAGMA quick_check``, unless
        ``verify=False``), enable WAL and create the schema. A damaged file, or a zero-length
        one, raises :class:`~lemon_core.store.errors.StoreCorruptError` (see
        :mod:`lemon_infra._sqlite_integrity`); a missing one is created."""
        store = cls(path, **options)
        await store._call(store._connect)
        store._opened = True
        return store

    async def __aenter__(self) -> SQLiteStore:
        if not self._opened:
            await self._call(self._connect)
            self._opened = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- thread side -------------------------------------------------------------------

    def _connect(self) -> None:
        path = self._path
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            _create(path)
        elif path.is_file() and path.stat().st_size == 0:
            raise empty_store_error(path)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA busy_timeout=5000")
            if self._verify:
                problem = quick_check(conn)
                if problem is not None:
                    raise corrupt_store_error(path, f"PRAGMA quick_check: {problem}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            conn.close()
            if is_corruption(exc):
                raise corrupt_store_error(path, str(exc)) from exc
            raise
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._owner_thread = threading.current_thread()

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreClosedError(f"SQLiteStore {self._path} is not open")
        return self._conn

    async def _call(self, fn: Callable[[], T]) -> T:
        if self._closed:
            raise StoreClosedError(f"SQLiteStore {self._path} is closed")
        async with self._slots:
            self._pending += 1
            try:
                loop = asyncio.get_running_loop()
                return await loop.run_in_executor(self._thread, fn)
            except sqlite3.Error as exc:
                self._errors += 1
                raise StoreUnavailableError(f"SQLite store {self._path}: {exc}") from exc
            finally:
                self._pending -= 1
                self._ops += 1

    # -- the Store interface -----------------------------------------------------------

    async def get(self, table: str, key: str) -> Any | None:
        check_table(table)
        check_key(key)
        now = self._clock.now_ms()

        def op() -> bytes | None:
            row = (
                self._db()
                .execute(
                    "SELECT value FROM lemon_kv WHERE tbl=? AND key=? "
                    "AND (expires_at_ms IS NULL OR expires_at_ms > ?)",
                    (table, key, now),
                )
                .fetchone()
            )
            return None if row is None else bytes(row[0])

        data = await self._call(op)
        return None if data is None else decode_value(data)

    async def put(self, table: str, key: str, value: Any, *, ttl_ms: int | None = None) -> None:
        check_table(table)
        check_key(key)
        ttl = check_ttl(ttl_ms)
        data = encode_value(value, self._max_value_bytes)
        now = self._clock.now_ms()
        expires = None if ttl is None else now + ttl

        def op() -> None:
            self._db().execute(_PUT, (table, key, data, expires, now))

        await self._call(op)

    async def put_many(self, entries: Sequence[PutEntry]) -> None:
        if self._closed:
            raise StoreClosedError(f"SQLiteStore {self._path} is closed")
        batch = check_entries(entries, self._max_value_bytes)
        now = self._clock.now_ms()
        rows = [(t, k, d, None if ttl is None else now + ttl, now) for t, k, d, ttl in batch]

        def op() -> None:
            db = self._db()
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(_PUT, rows)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

        if rows:
            await self._call(op)

    async def put_new(
        self,
        table: str,
        key: str,
        value: Any,
        *,
        ttl_ms: int | None = None,
        also: Sequence[PutEntry] = (),
    ) -> bool:
        """One ``BEGIN IMMEDIATE`` transaction (the write lock first, so another process on the
        file waits): the insert replaces only an expired row, then ``also``."""
        if self._closed:
            raise StoreClosedError(f"SQLiteStore {self._path} is closed")
        check_table(table)
        check_key(key)
        ttl = check_ttl(ttl_ms)
        data = encode_value(value, self._max_value_bytes)
        batch = check_entries(also, self._max_value_bytes)
        now = self._clock.now_ms()
        claim = (table, key, data, None if ttl is None else now + ttl, now, now)
        rows = [(t, k, d, None if e is None else now + e, now) for t, k, d, e in batch]

        def op() -> bool:
            db = self._db()
            db.execute("BEGIN IMMEDIATE")
            try:
                won = db.execute(_PUT_NEW, claim).fetchone() is not None
                if won and rows:
                    db.executemany(_PUT, rows)
                db.execute("COMMIT" if won else "ROLLBACK")
                return won
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

        return await self._call(op)

    async def delete(self, table: str, key: str) -> bool:
        check_table(table)
        check_key(key)
        now = self._clock.now_ms()

        def op() -> bool:
            cur = self._db().execute(
                "DELETE FROM lemon_kv WHERE tbl=? AND key=? RETURNING expires_at_ms",
                (table, key),
            )
            row = cur.fetchone()
            return row is not None and (row[0] is None or row[0] > now)

        return await self._call(op)

    async def scan(
        self, table: str, *, prefix: str = "", limit: int = 1000, reverse: bool = False
    ) -> list[tuple[str, Any]]:
        check_table(table)
        check_limit(limit)
        if not isinstance(prefix, str):
            raise UsageTypeError(f"scan prefix must be a string, got {prefix!r}")
        now = self._clock.now_ms()
        order = "DESC" if reverse else "ASC"

        def op() -> list[tuple[str, bytes]]:
            rows = self._db().execute(
                "SELECT key, value FROM lemon_kv WHERE tbl=? AND key >= ? "
                "AND substr(key, 1, ?) = ? "
                "AND (expires_at_ms IS NULL OR expires_at_ms > ?) "
                f"ORDER BY key {order} LIMIT ?",
                (table, prefix, len(prefix), prefix, now, limit),
            )
            return [(str(k), bytes(v)) for k, v in rows]

        rows = await self._call(op)
        return [(k, decode_value(v)) for k, v in rows]

    async def sweep_expired(self) -> int:
        now = self._clock.now_ms()

        def op() -> int:
            cur = self._db().execute(
                "DELETE FROM lemon_kv WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= ?",
                (now,),
            )
            return cur.rowcount

        return await self._call(op)

    async def close(self) -> None:
        if self._closed:
            return

        def op() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        try:
            await self._call(op)
        finally:
            self._closed = True
            self._thread.shutdown(wait=True)

    def statistics(self) -> dict[str, Any]:
        return {
            "backend": "sqlite",
            "path": str(self._path),
            "closed": self._closed,
            "pending": self._pending,
            "max_pending": self._max_pending,
            "max_value_bytes": self._max_value_bytes,
            "ops": self._ops,
            "errors": self._errors,
        }


def _create(path: Path) -> None:
    """A new store at ``path``, built under a temporary name and linked into place whole, so
    a store file is never seen empty (a zero-length file is then a damaged store, never a new
    one). Another process creating it meanwhile wins; its store is used."""
    tmp = path.with_name(f".{path.name}.new-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
        finally:
            conn.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # no hard links on this file system: a rename, unless one appeared
            if not path.exists():
                os.replace(tmp, path)
    finally:
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
