"""The SQLite idempotency store: fences and response snapshots in one file (WAL).

Design: one connection owned by one dedicated thread (every call is shipped to it, so blocking
I/O never runs on the event loop); every write runs inside a ``BEGIN IMMEDIATE`` transaction, so
a reservation is atomic against every other connection to the same file too, and a fence and
its snapshot are written, and removed, together.

Group commit: writes that arrive while the thread is busy (typically waiting for the previous
commit's fsync) wait in a batch, and the next flush runs the whole batch in one transaction,
each write inside its own ``SAVEPOINT`` (a write that fails rolls back alone and gets its own
error). Every caller is answered only after the ``COMMIT`` that made its write durable, so the
contract is that of one transaction per write, executed in arrival order; only the fsyncs are
shared (one per batch rather than one per write).

Schema versions (``idem_meta.schema_version``):

1. the legacy raw-key table ``webhook_idempotency`` (the earlier format, see the README): the
   caller's key stored as is, states ``pending`` / ``submitted`` / ``completed``;
2. hashed fences ``idem_fences`` and snapshots ``idem_responses`` (this module). Opening a
   version-1 file adds the version-2 tables; :meth:`SQLiteIdempotencyStore.migrate_legacy` then
   moves the raw rows (hashed fence and exact response first, durably; then the raw row is
   deleted only if it is unchanged and its copy is confirmed).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

from lemon_core.idempotency.errors import IdempotencyStoreError
from lemon_core.idempotency.logic import (
    FENCE_COLUMNS,
    LEGACY_COLUMNS,
    LegacyRow,
    binding_conflict,
    binding_values,
    check_limit,
    fence_values,
    legacy_copy_confirmed,
    legacy_fence,
    legacy_key_hash,
    migrate_rows,
    record_from_row,
)
from lemon_core.idempotency.records import (
    IdempotencyRecord,
    MessageBinding,
    MigrationReport,
    Reservation,
    StoredResponse,
    SweepReport,
)
from lemon_infra._sqlite_integrity import is_corruption, quick_check

__all__ = ["LEGACY_TABLE", "SCHEMA_VERSION", "SQLiteIdempotencyStore", "create_legacy_table"]

T = TypeVar("T")

#: The schema version this module writes.
SCHEMA_VERSION: Final = 2
#: The legacy (schema 1) raw-key table.
LEGACY_TABLE: Final = "webhook_idempotency"

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS idem_meta (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS idem_fences (
    key_hash TEXT PRIMARY KEY,
    integration TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'accepted', 'outcome_unknown')),
    run_id TEXT,
    body_hash TEXT,
    session_key TEXT,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    lease_until_ms INTEGER NOT NULL,
    legacy INTEGER NOT NULL DEFAULT 0,
    CHECK (run_id IS NOT NULL OR (legacy = 1 AND state = 'pending'))
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idem_fences_expiry ON idem_fences (expires_at_ms);
CREATE INDEX IF NOT EXISTS idem_fences_created ON idem_fences (created_at_ms);
CREATE INDEX IF NOT EXISTS idem_fences_run ON idem_fences (run_id);
CREATE TABLE IF NOT EXISTS idem_responses (
    key_hash TEXT PRIMARY KEY REFERENCES idem_fences (key_hash),
    status INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    body BLOB NOT NULL,
    stored_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
"""

_LEGACY_SCHEMA: Final = f"""
CREATE TABLE IF NOT EXISTS {LEGACY_TABLE} (
    integration_id TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    state TEXT NOT NULL,
    run_id TEXT,
    session_key TEXT,
    response_json TEXT,
    created_at_ms INTEGER NOT NULL,
    PRIMARY KEY (integration_id, idempotency_key)
)
"""

_INSERT_FENCE: Final = (
    "INSERT INTO idem_fences (key_hash, integration, state, run_id, body_hash, session_key, "
    "created_at_ms, updated_at_ms, expires_at_ms, lease_until_ms) "
    "VALUES (?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT: Final = (
    f"SELECT {FENCE_COLUMNS} FROM idem_fences f "
    "LEFT JOIN idem_responses r ON r.key_hash = f.key_hash"
)


class SQLiteIdempotencyStore:
    """See the module docstring. Open with ``await SQLiteIdempotencyStore.open(path)``."""

    def __init__(
        self, path: str | Path, *, synchronous: Literal["FULL", "NORMAL"] = "FULL"
    ) -> None:
        self._path = Path(path)
        self._synchronous = synchronous
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lemon-idempotency")
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._ops = 0
        self._errors = 0
        # Group commit (see the module docstring): writes waiting for the next flush.
        self._batch: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]] = []
        self._batch_lock = threading.Lock()
        self._flush_queued = False
        self._batches = 0

    @classmethod
    async def open(cls, path: str | Path, **options: Any) -> SQLiteIdempotencyStore:
        """Create or open the file and bring its schema to version 2 (a newer version is
        refused: this code would misread it)."""
        store = cls(path, **options)
        try:
            await store._call(store._connect)
        except BaseException:
            await store.close()
            raise
        return store

    @property
    def path(self) -> Path:
        return self._path

    # -- thread side -------------------------------------------------------------------------

    def _connect(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            try:
                problem = quick_check(conn)
            except sqlite3.DatabaseError as exc:
                if not is_corruption(exc):
                    raise
                problem = str(exc)
            if problem is not None:
                raise IdempotencyStoreError(
                    f"the idempotency store {self._path} is damaged (PRAGMA quick_check: "
                    f"{problem}); it was not opened. Move it and its -wal and -shm files aside "
                    "to start with an empty one (the keys it held are forgotten: a request "
                    "sent again with one of them runs again)"
                )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            conn.execute("PRAGMA busy_timeout=10000")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("BEGIN IMMEDIATE")
            try:
                version = self._version(conn)
                if version > SCHEMA_VERSION:
                    raise IdempotencyStoreError(
                        f"{self._path} has idempotency schema version {version}, newer than "
                        f"this Lemon understands ({SCHEMA_VERSION}); upgrade Lemon"
                    )
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(
                    "INSERT INTO idem_meta (name, value) VALUES ('schema_version', ?) "
                    "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                    (SCHEMA_VERSION,),
                )
                conn.execute(
                    "INSERT OR IGNORE INTO idem_meta (name, value) VALUES ('watermark_ms', 0)"
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    @staticmethod
    def _version(conn: sqlite3.Connection) -> int:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "idem_meta" in tables:
            row = conn.execute(
                "SELECT value FROM idem_meta WHERE name = 'schema_version'"
            ).fetchone()
            if row is not None:
                return int(row[0])
        return 1 if LEGACY_TABLE in tables else 0

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise IdempotencyStoreError(f"the idempotency store {self._path} is not open")
        return self._conn

    def _transaction(self, fn: Callable[[sqlite3.Connection], T]) -> Callable[[], T]:
        def run() -> T:
            conn = self._db()
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

        return run

    async def _call(self, fn: Callable[[], T]) -> T:
        if self._closed:
            raise IdempotencyStoreError(f"the idempotency store {self._path} is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._thread, fn)
        except sqlite3.Error as exc:
            self._errors += 1
            raise IdempotencyStoreError(f"idempotency store {self._path}: {exc}") from exc
        finally:
            self._ops += 1

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in a transaction of its own (a savepoint in the next group commit) and
        return its result once the commit is durable."""
        if self._closed:
            raise IdempotencyStoreError(f"the idempotency store {self._path} is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._batch_lock:
            self._batch.append((fn, future))
            queue = not self._flush_queued
            self._flush_queued = True
        if queue:
            loop.run_in_executor(self._thread, self._flush, loop)
        try:
            return await future
        except sqlite3.Error as exc:
            raise IdempotencyStoreError(f"idempotency store {self._path}: {exc}") from exc

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        # Thread side: take every write that waits now and commit them together.
        with self._batch_lock:
            batch, self._batch = self._batch, []
            self._flush_queued = False
        if not batch:
            return
        outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        try:
            conn = self._db()
            conn.execute("BEGIN IMMEDIATE")
            done: list[tuple[asyncio.Future[Any], Any]] = []
            for fn, future in batch:
                conn.execute("SAVEPOINT lemon_write")
                try:
                    value = fn(conn)
                except BaseException as exc:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK TO lemon_write")
                        conn.execute("RELEASE lemon_write")
                        outcomes.append((future, None, exc))
                        continue
                    # SQLite ended the whole transaction: the writes before this one are gone
                    # too; tell them so and go on with the rest in a new transaction.
                    outcomes.extend((f, None, exc) for f, _ in done)
                    outcomes.append((future, None, exc))
                    done = []
                    conn.execute("BEGIN IMMEDIATE")
                    continue
                conn.execute("RELEASE lemon_write")
                done.append((future, value))
            conn.execute("COMMIT")
            outcomes.extend((f, value, None) for f, value in done)
        except BaseException as exc:
            live = self._conn
            if live is not None and live.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    live.execute("ROLLBACK")
            # The batch's transaction is gone: every write in it failed (a write that had
            # already failed keeps its own error).
            failed = {id(f): e for f, _, e in outcomes if e is not None}
            outcomes = [(f, None, failed.get(id(f), exc)) for _, f in batch]
        self._batches += 1
        self._ops += len(batch)
        self._errors += sum(1 for _, _, exc in outcomes if isinstance(exc, sqlite3.Error))
        # A loop closed while its writes were committed: nobody waits for the answers.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, outcomes)

    # -- the port ----------------------------------------------------------------------------

    async def reserve(
        self,
        *,
        key_hash: str,
        integration: str,
        body_hash: str,
        run_id: str,
        session_key: str,
        now_ms: int,
        ttl_ms: int,
        lease_ms: int,
        legacy_key: str | None = None,
        bind: MessageBinding | None = None,
    ) -> Reservation:
        def op(conn: sqlite3.Connection) -> Reservation:
            bound = False
            if bind is not None:
                binding = self._fetch(conn, bind.key_hash)
                if binding is not None and binding.expires_at_ms > now_ms:
                    reused = binding_conflict(binding, key_hash)
                    if reused is not None:
                        return Reservation(created=False, record=reused, message_reused=True)
                else:
                    if binding is not None:
                        self._remove(conn, bind.key_hash)
                    conn.execute(
                        _INSERT_FENCE,
                        binding_values(
                            bind,
                            key_hash=key_hash,
                            run_id=run_id,
                            session_key=session_key,
                            now_ms=now_ms,
                        ),
                    )
                    bound = True
            existing = self._fetch(conn, key_hash)
            if existing is not None and existing.expires_at_ms > now_ms:
                return Reservation(created=False, record=existing, bound=bound)
            if existing is not None:
                self._remove(conn, key_hash)
            if legacy_key is not None and self._has_legacy(conn):
                found = conn.execute(
                    f"SELECT {LEGACY_COLUMNS} FROM {LEGACY_TABLE} "
                    "WHERE integration_id = ? AND idempotency_key = ?",
                    (integration, legacy_key),
                ).fetchone()
                if found is not None:
                    raw: LegacyRow = tuple(found)
                    migrated = self._write_legacy(conn, raw, now_ms=now_ms, ttl_ms=ttl_ms)
                    self._delete_legacy(conn, raw)
                    if migrated is not None and migrated.expires_at_ms > now_ms:
                        return Reservation(created=False, record=migrated, bound=bound)
                    if migrated is not None:
                        self._remove(conn, key_hash)
            conn.execute(
                _INSERT_FENCE,
                fence_values(
                    key_hash=key_hash,
                    integration=integration,
                    run_id=run_id,
                    body_hash=body_hash,
                    session_key=session_key,
                    now_ms=now_ms,
                    ttl_ms=ttl_ms,
                    lease_ms=lease_ms,
                ),
            )
            record = self._fetch(conn, key_hash)
            assert record is not None
            return Reservation(created=True, record=record, bound=bound)

        return await self._write(op)

    async def lookup(self, key_hash: str, *, now_ms: int) -> IdempotencyRecord | None:
        def op() -> IdempotencyRecord | None:
            record = self._fetch(self._db(), key_hash)
            return record if record is not None and record.expires_at_ms > now_ms else None

        return await self._call(op)

    async def complete(
        self, *, key_hash: str, run_id: str, response: StoredResponse, now_ms: int
    ) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            # only while the lease is live: past it, replays already answer outcome_unknown,
            # and a late acceptance must not change the key's answer
            cur = conn.execute(
                "UPDATE idem_fences SET state = 'accepted', updated_at_ms = ? "
                "WHERE key_hash = ? AND run_id = ? AND state = 'pending' AND lease_until_ms > ?",
                (now_ms, key_hash, run_id, now_ms),
            )
            if cur.rowcount != 1:
                return False
            conn.execute(
                "INSERT INTO idem_responses (key_hash, status, content_type, body, stored_at_ms) "
                "VALUES (?, ?, ?, ?, ?)",
                (key_hash, response.status, response.content_type, response.body, now_ms),
            )
            return True

        return await self._write(op)

    async def mark_unknown(self, *, key_hash: str, run_id: str, now_ms: int) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "UPDATE idem_fences SET state = 'outcome_unknown', updated_at_ms = ? "
                "WHERE key_hash = ? AND run_id = ? AND state = 'pending'",
                (now_ms, key_hash, run_id),
            )
            return cur.rowcount == 1

        return await self._write(op)

    async def mark_vanished(self, *, run_id: str, integration: str, now_ms: int) -> int:
        def op(conn: sqlite3.Connection) -> int:
            cur = conn.execute(
                "UPDATE idem_fences SET state = 'outcome_unknown', updated_at_ms = ? "
                "WHERE run_id = ? AND integration = ? AND state IN ('pending', 'accepted')",
                (now_ms, run_id, integration),
            )
            return cur.rowcount

        return await self._write(op)

    async def release(self, *, key_hash: str, run_id: str) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "DELETE FROM idem_fences WHERE key_hash = ? AND run_id = ? AND state = 'pending' "
                "AND NOT EXISTS (SELECT 1 FROM idem_responses r WHERE r.key_hash = ?)",
                (key_hash, run_id, key_hash),
            )
            return cur.rowcount == 1

        return await self._write(op)

    async def recover(self, *, now_ms: int) -> int:
        def op(conn: sqlite3.Connection) -> int:
            cur = conn.execute(
                "UPDATE idem_fences SET state = 'outcome_unknown', updated_at_ms = ? "
                "WHERE state = 'pending' AND run_id IS NOT NULL",
                (now_ms,),
            )
            return cur.rowcount

        return await self._write(op)

    async def sweep(self, *, now_ms: int) -> SweepReport:
        def op(conn: sqlite3.Connection) -> SweepReport:
            # Snapshots first, then fences, then the watermark: one transaction, so a failure
            # at any step removes nothing and leaves the watermark where it was.
            responses = conn.execute(
                "DELETE FROM idem_responses WHERE key_hash IN "
                "(SELECT key_hash FROM idem_fences WHERE expires_at_ms <= ?)",
                (now_ms,),
            ).rowcount
            fences = conn.execute(
                "DELETE FROM idem_fences WHERE expires_at_ms <= ?", (now_ms,)
            ).rowcount
            conn.execute(
                "UPDATE idem_meta SET value = max(value, ?) WHERE name = 'watermark_ms'",
                (now_ms,),
            )
            mark = conn.execute("SELECT value FROM idem_meta WHERE name = 'watermark_ms'")
            return SweepReport(
                responses_removed=responses,
                fences_removed=fences,
                watermark_ms=int(mark.fetchone()[0]),
            )

        return await self._write(op)

    async def watermark(self) -> int:
        def op() -> int:
            row = self._db().execute("SELECT value FROM idem_meta WHERE name = 'watermark_ms'")
            found = row.fetchone()
            return 0 if found is None else int(found[0])

        return await self._call(op)

    async def records(
        self, *, limit: int = 100, integration: str | None = None
    ) -> list[IdempotencyRecord]:
        check_limit(limit)

        def op() -> list[IdempotencyRecord]:
            where, args = ("WHERE f.integration = ? ", (integration,)) if integration else ("", ())
            rows = self._db().execute(
                f"{_SELECT} {where}ORDER BY f.created_at_ms DESC, f.key_hash LIMIT ?",
                (*args, limit),
            )
            return [record_from_row(tuple(r)) for r in rows]

        return await self._call(op)

    async def migrate_legacy(self, *, now_ms: int, ttl_ms: int) -> MigrationReport:
        def read() -> list[LegacyRow]:
            conn = self._db()
            if not self._has_legacy(conn):
                return []
            rows = conn.execute(
                f"SELECT {LEGACY_COLUMNS} FROM {LEGACY_TABLE} "
                "ORDER BY integration_id, idempotency_key"
            )
            out: list[LegacyRow] = [tuple(r) for r in rows]
            return out

        async def write(raw: LegacyRow) -> bool:
            def op(conn: sqlite3.Connection) -> bool:
                return self._write_legacy(conn, raw, now_ms=now_ms, ttl_ms=ttl_ms) is not None

            return await self._call(self._transaction(op))

        async def remove(raw: LegacyRow) -> bool:
            return await self._call(self._transaction(lambda conn: self._delete_legacy(conn, raw)))

        return await migrate_rows(await self._call(read), write=write, remove=remove)

    async def schema_version(self) -> int:
        return await self._call(lambda: self._version(self._db()))

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
            "ops": self._ops,
            "write_batches": self._batches,
            "errors": self._errors,
        }

    # -- helpers (thread side, inside a transaction) -----------------------------------------

    @staticmethod
    def _fetch(conn: sqlite3.Connection, key_hash: str) -> IdempotencyRecord | None:
        row = conn.execute(f"{_SELECT} WHERE f.key_hash = ?", (key_hash,)).fetchone()
        return None if row is None else record_from_row(tuple(row))

    @staticmethod
    def _remove(conn: sqlite3.Connection, key_hash: str) -> None:
        conn.execute("DELETE FROM idem_responses WHERE key_hash = ?", (key_hash,))
        conn.execute("DELETE FROM idem_fences WHERE key_hash = ?", (key_hash,))

    @staticmethod
    def _has_legacy(conn: sqlite3.Connection) -> bool:
        row = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (LEGACY_TABLE,)
        ).fetchone()
        return row is not None

    def _write_legacy(
        self, conn: sqlite3.Connection, raw: LegacyRow, *, now_ms: int, ttl_ms: int
    ) -> IdempotencyRecord | None:
        """Upsert the hashed fence (and exact response) of one raw row. A fence that is not
        legacy (written by this version) is never overwritten. None for an unusable row."""
        key_hash = legacy_key_hash(raw)
        if key_hash is None:
            return None
        current = self._fetch(conn, key_hash)
        if current is not None and not current.legacy:
            return current
        fence = legacy_fence(raw, key_hash, now_ms=now_ms, ttl_ms=ttl_ms)
        conn.execute(
            "INSERT INTO idem_fences (key_hash, integration, state, run_id, body_hash, "
            "session_key, created_at_ms, updated_at_ms, expires_at_ms, lease_until_ms, legacy) "
            "VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, 1) ON CONFLICT (key_hash) DO UPDATE SET "
            "state = excluded.state, run_id = excluded.run_id, session_key = "
            "excluded.session_key, updated_at_ms = excluded.updated_at_ms, lease_until_ms = "
            "excluded.lease_until_ms WHERE idem_fences.legacy = 1",
            fence.values,
        )
        if fence.response_body is not None:
            conn.execute(
                "INSERT INTO idem_responses (key_hash, status, content_type, body, stored_at_ms) "
                "VALUES (?, 202, 'application/json', ?, ?) ON CONFLICT (key_hash) DO UPDATE SET "
                "body = excluded.body",
                (key_hash, fence.response_body, now_ms),
            )
        return self._fetch(conn, key_hash)

    @staticmethod
    def _delete_legacy(conn: sqlite3.Connection, raw: LegacyRow) -> bool:
        """Delete one raw row if it is exactly ``raw`` still and its hashed copy is there."""
        key_hash = legacy_key_hash(raw)
        if key_hash is None:
            return False
        copy = conn.execute(
            "SELECT f.run_id, r.body FROM idem_fences f LEFT JOIN idem_responses r "
            "ON r.key_hash = f.key_hash WHERE f.key_hash = ?",
            (key_hash,),
        ).fetchone()
        if not legacy_copy_confirmed(raw, copy):
            return False
        cur = conn.execute(
            f"DELETE FROM {LEGACY_TABLE} WHERE integration_id = ? AND idempotency_key = ? "
            "AND state = ? AND run_id IS ? AND session_key IS ? AND response_json IS ? "
            "AND created_at_ms = ?",
            raw,
        )
        return cur.rowcount == 1


def create_legacy_table(conn: sqlite3.Connection) -> None:
    """Create the schema-1 raw-key table (tests and imports of earlier data use it)."""
    conn.execute(_LEGACY_SCHEMA)


def _settle(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, value, exc in outcomes:
        if future.cancelled():
            continue
        if exc is None:
            future.set_result(value)
        else:
            future.set_exception(exc)
