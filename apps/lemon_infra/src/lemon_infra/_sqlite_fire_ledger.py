"""SQLiteFireLedger: the fire ledger in one SQLite file, shared by every process that opens it.

One connection owned by one dedicated thread (blocking I/O never runs on the event loop); every
operation is one ``BEGIN IMMEDIATE`` transaction (the database write lock is taken first), so a
claim (``INSERT OR IGNORE`` on the primary key ``(job_id, due_at_ms)``), a fenced write and a
takeover are atomic against every other connection to the same file. Expiry is judged by the
injected clock (the machine's clock by default: every process on one file shares it).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final, TypeVar

from lemon_core.clock import SYSTEM_CLOCK
from lemon_core.fire_ledger import (
    TERMINAL_STATUSES,
    Fire,
    FireWrite,
    check_fire_key,
    check_fire_keys,
    check_lease_ms,
    check_prune,
    check_status,
    check_writes,
)
from lemon_core.store.errors import StoreClosedError, StoreUnavailableError
from lemon_core.store.protocol import Clock
from lemon_infra._fire_rows import FIRE_COLUMNS, fire_of

__all__ = ["SQLiteFireLedger"]

T = TypeVar("T")

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS lemon_fires (
    job_id TEXT NOT NULL,
    due_at_ms INTEGER NOT NULL,
    owner TEXT NOT NULL,
    fence INTEGER NOT NULL,
    lease_until_ms INTEGER NOT NULL,
    status TEXT NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    run_id TEXT,
    outcome TEXT,
    claimed_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    PRIMARY KEY (job_id, due_at_ms)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS lemon_fires_open ON lemon_fires (lease_until_ms) WHERE done = 0;
"""


def _insert(
    conn: sqlite3.Connection, job_id: str, due_at_ms: int, owner: str, now: int, lease_ms: int
) -> Fire | None:
    """One claim inside the caller's transaction: the new fire, or None when it exists."""
    cur = conn.execute(
        "INSERT OR IGNORE INTO lemon_fires (job_id, due_at_ms, owner, fence, "
        "lease_until_ms, status, claimed_at_ms, updated_at_ms) "
        "VALUES (?, ?, ?, 1, ?, 'claimed', ?, ?)",
        (job_id, due_at_ms, owner, now + lease_ms, now, now),
    )
    if cur.rowcount != 1:
        return None
    return Fire.claimed(job_id, due_at_ms, owner, now_ms=now, lease_ms=lease_ms)


class SQLiteFireLedger:
    """Open with ``await SQLiteFireLedger.open(path)``; close with :meth:`close`."""

    def __init__(self, path: str | Path, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._path = Path(path)
        self._clock = clock
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lemon-fires")
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    @classmethod
    async def open(cls, path: str | Path, *, clock: Clock = SYSTEM_CLOCK) -> SQLiteFireLedger:
        ledger = cls(path, clock=clock)
        await ledger._call(ledger._connect)
        return ledger

    def _connect(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA busy_timeout=10000")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.executescript(_SCHEMA)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    async def _call(self, fn: Callable[[], T]) -> T:
        if self._closed:
            raise StoreClosedError(f"SQLiteFireLedger {self._path} is closed")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._thread, fn)
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f"SQLite fire ledger {self._path}: {exc}") from exc

    def _tx(self, fn: Callable[[sqlite3.Connection], T]) -> Callable[[], T]:
        def op() -> T:
            conn = self._conn
            if conn is None:
                raise StoreClosedError(f"SQLiteFireLedger {self._path} is not open")
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

        return op

    async def claim(self, job_id: str, due_at_ms: int, owner: str, *, lease_ms: int) -> Fire | None:
        check_fire_key(job_id, due_at_ms)
        check_lease_ms(lease_ms)
        now = self._clock.now_ms()
        return await self._call(
            self._tx(lambda conn: _insert(conn, job_id, due_at_ms, owner, now, lease_ms))
        )

    async def claim_many(
        self, keys: Sequence[tuple[str, int]], owner: str, *, lease_ms: int
    ) -> list[Fire | None]:
        checked = check_fire_keys(keys)
        check_lease_ms(lease_ms)
        if not checked:
            return []
        now = self._clock.now_ms()

        def op(conn: sqlite3.Connection) -> list[Fire | None]:
            # One BEGIN IMMEDIATE transaction: every insert of the batch holds the write lock.
            return [_insert(conn, job_id, due, owner, now, lease_ms) for job_id, due in checked]

        return await self._call(self._tx(op))

    def _select(self, conn: sqlite3.Connection, job_id: str, due_at_ms: int) -> Fire | None:
        row = conn.execute(
            f"SELECT {FIRE_COLUMNS} FROM lemon_fires WHERE job_id = ? AND due_at_ms = ?",
            (job_id, due_at_ms),
        ).fetchone()
        return None if row is None else fire_of(row)

    async def renew(self, fire: Fire, *, lease_ms: int) -> Fire | None:
        check_lease_ms(lease_ms)
        now = self._clock.now_ms()

        def op(conn: sqlite3.Connection) -> Fire | None:
            cur = conn.execute(
                "UPDATE lemon_fires SET lease_until_ms = ?, updated_at_ms = ? "
                "WHERE job_id = ? AND due_at_ms = ? AND fence = ? AND done = 0",
                (now + lease_ms, now, fire.job_id, fire.due_at_ms, fire.fence),
            )
            return self._select(conn, fire.job_id, fire.due_at_ms) if cur.rowcount else None

        return await self._call(self._tx(op))

    async def record(
        self,
        fire: Fire,
        *,
        status: str,
        run_id: str | None = None,
        outcome: str | None = None,
    ) -> Fire | None:
        check_status(status)
        write = FireWrite(fire=fire, status=status, run_id=run_id, outcome=outcome)
        now = self._clock.now_ms()
        return await self._call(self._tx(lambda conn: self._update(conn, write, now)))

    async def record_many(self, writes: Sequence[FireWrite]) -> list[Fire | None]:
        checked = check_writes(writes)
        if not checked:
            return []
        now = self._clock.now_ms()

        def op(conn: sqlite3.Connection) -> list[Fire | None]:
            return [self._update(conn, write, now) for write in checked]  # one transaction

        return await self._call(self._tx(op))

    def _update(self, conn: sqlite3.Connection, write: FireWrite, now: int) -> Fire | None:
        """One fenced record inside the caller's transaction."""
        done = int(write.status in TERMINAL_STATUSES)
        fire = write.fire
        cur = conn.execute(
            "UPDATE lemon_fires SET status = ?, done = ?, run_id = COALESCE(?, run_id), "
            "outcome = COALESCE(?, outcome), "
            "lease_until_ms = CASE WHEN ? THEN 0 ELSE lease_until_ms END, updated_at_ms = ? "
            "WHERE job_id = ? AND due_at_ms = ? AND fence = ? AND done = 0",
            (
                write.status,
                done,
                write.run_id,
                write.outcome,
                done,
                now,
                fire.job_id,
                fire.due_at_ms,
                fire.fence,
            ),
        )
        return self._select(conn, fire.job_id, fire.due_at_ms) if cur.rowcount else None

    async def take_over_expired(self, owner: str, *, lease_ms: int, limit: int = 100) -> list[Fire]:
        check_lease_ms(lease_ms)
        now = self._clock.now_ms()

        def op(conn: sqlite3.Connection) -> list[Fire]:
            rows = conn.execute(
                "SELECT job_id, due_at_ms FROM lemon_fires WHERE done = 0 AND lease_until_ms <= ? "
                "ORDER BY lease_until_ms, job_id, due_at_ms LIMIT ?",
                (now, max(0, limit)),
            ).fetchall()
            taken = []
            for job_id, due_at_ms in rows:
                conn.execute(
                    "UPDATE lemon_fires SET owner = ?, fence = fence + 1, lease_until_ms = ?, "
                    "updated_at_ms = ? WHERE job_id = ? AND due_at_ms = ?",
                    (owner, now + lease_ms, now, job_id, due_at_ms),
                )
                new = self._select(conn, job_id, due_at_ms)
                assert new is not None
                taken.append(new)
            return taken

        return await self._call(self._tx(op))

    async def get(self, job_id: str, due_at_ms: int) -> Fire | None:
        check_fire_key(job_id, due_at_ms)
        return await self._call(self._tx(lambda conn: self._select(conn, job_id, due_at_ms)))

    async def prune(self, job_id: str, *, keep: int, limit: int = 100) -> list[int]:
        keep, limit = check_prune(keep, limit)

        def op(conn: sqlite3.Connection) -> list[int]:
            rows = conn.execute(
                "SELECT due_at_ms FROM lemon_fires WHERE job_id = ? AND done = 1 AND "
                "due_at_ms < (SELECT due_at_ms FROM lemon_fires WHERE job_id = ? "
                "ORDER BY due_at_ms DESC LIMIT 1 OFFSET ?) ORDER BY due_at_ms LIMIT ?",
                (job_id, job_id, keep - 1, limit),
            ).fetchall()
            dues = [int(r[0]) for r in rows]
            conn.executemany(
                "DELETE FROM lemon_fires WHERE job_id = ? AND due_at_ms = ? AND done = 1",
                [(job_id, d) for d in dues],
            )
            return dues

        return await self._call(self._tx(op))

    async def fires(self, job_id: str, *, limit: int = 100) -> list[Fire]:
        def op(conn: sqlite3.Connection) -> list[Fire]:
            rows = conn.execute(
                f"SELECT {FIRE_COLUMNS} FROM lemon_fires WHERE job_id = ? "
                "ORDER BY due_at_ms DESC LIMIT ?",
                (job_id, max(0, limit)),
            ).fetchall()
            return [fire_of(r) for r in rows]

        return await self._call(self._tx(op))

    async def close(self) -> None:
        if self._closed:
            return

        def op() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        await self._call(op)
        self._closed = True
        self._thread.shutdown(wait=True)
