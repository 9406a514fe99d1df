"""PostgreSQL Store backend: the store several daemons share (``[store] backend = "postgres"``).

Design: psycopg 3 in async mode over one bounded connection pool (``psycopg_pool``), every
statement in autocommit, so each write is its own transaction (a ``put_many`` batch: one
transaction on one connection), committed (and durable, with the server's default
``synchronous_commit``) before the call returns. Everything lives in one schema
(``[store] schema``): one deployment, or one test run, per schema. The tables are created by
versioned migrations (:data:`MIGRATIONS`), applied at open under a transaction-scoped advisory
lock, so daemons starting together never race; a schema migrated by a newer Lemon is refused.

The rows mirror the SQLite backend's (``tbl``, ``key``, the value's JSON bytes, expiry and
update stamps in the store clock's milliseconds); keys collate as ``"C"`` (code point order, the
order SQLite and the memory backend use). PostgreSQL text cannot hold NUL, so a key or prefix
with one is refused as invalid.

Failures: a lost connection, a server that refuses, a pool with no connection free within
``timeout_s`` all raise :class:`~lemon_core.store.errors.StoreUnavailableError` naming the
server (password redacted); the statement did not commit, and the broken connection is dropped
from the pool, so the next call reconnects. ``statistics()`` shows the pool.

A server that stops answering (every call waits the pool's whole ``timeout_s`` and then fails)
trips a breaker: from the first such timeout on, every call fails at once (no wait) with
:class:`~lemon_core.store.errors.StoreUnavailableError` saying so, except one probe call every
``probe_interval_s``, which waits as before; the first call that succeeds closes the breaker.
Each change is reported once to the callbacks of :meth:`PostgresStore.watch` (the runtime
publishes ``store_backend_changed`` on ``system``). A refused or dropped connection fails fast
on its own and does not trip it.

This module imports psycopg: it is imported only when a PostgreSQL store is configured.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, LiteralString, TypeVar, cast

import psycopg
import psycopg_pool
from psycopg import sql

from lemon_core.clock import SYSTEM_CLOCK
from lemon_core.config import redact_url
from lemon_core.errors import UsageTypeError
from lemon_core.leases import Lease, check_lease_name, check_ttl_ms
from lemon_core.store.errors import (
    InvalidStoreKeyError,
    StaleLeaseError,
    StoreClosedError,
    StoreUnavailableError,
)
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

__all__ = ["MIGRATIONS", "PostgresLeases", "PostgresStore", "drop_schema"]

T = TypeVar("T")

#: The schema's migrations: (version, what it does, statements). Append only; never edit one
#: that has shipped. ``{schema}`` is the quoted schema name.
MIGRATIONS: Final[tuple[tuple[int, str, tuple[LiteralString, ...]], ...]] = (
    (
        1,
        "key-value rows",
        (
            """CREATE TABLE {schema}.lemon_kv (
                tbl text NOT NULL,
                key text COLLATE "C" NOT NULL,
                value bytea NOT NULL,
                expires_at_ms bigint,
                updated_at_ms bigint NOT NULL,
                PRIMARY KEY (tbl, key))""",
            """CREATE INDEX lemon_kv_expiry ON {schema}.lemon_kv (expires_at_ms)
                WHERE expires_at_ms IS NOT NULL""",
        ),
    ),
    (
        2,
        "leases with fencing tokens",
        (
            """CREATE TABLE {schema}.lemon_leases (
                name text COLLATE "C" PRIMARY KEY,
                owner text NOT NULL,
                token bigint NOT NULL,
                expires_at_ms bigint NOT NULL)""",
            """CREATE SEQUENCE {schema}.lemon_fencing_tokens""",
        ),
    ),
    (
        3,
        "fire ledger: one claim per (job, due time), fenced",
        (
            """CREATE TABLE {schema}.lemon_fires (
                job_id text COLLATE "C" NOT NULL,
                due_at_ms bigint NOT NULL,
                owner text NOT NULL,
                fence bigint NOT NULL,
                lease_until_ms bigint NOT NULL,
                status text NOT NULL,
                done boolean NOT NULL DEFAULT false,
                run_id text,
                outcome text,
                claimed_at_ms bigint NOT NULL,
                updated_at_ms bigint NOT NULL,
                PRIMARY KEY (job_id, due_at_ms))""",
            """CREATE INDEX lemon_fires_open ON {schema}.lemon_fires (lease_until_ms)
                WHERE NOT done""",
        ),
    ),
)

_MIGRATION_LOCK: Final = "lemon_infra._postgres_store migrations"


_log = logging.getLogger("lemon_infra.postgres")


def _q(template: LiteralString, schema: str) -> str:
    return sql.SQL(template).format(schema=sql.Identifier(schema)).as_string(None)


class PostgresStore:
    """A Store in one PostgreSQL schema. Open with ``await PostgresStore.open(dsn, schema=...)``."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "lemon",
        clock: Clock = SYSTEM_CLOCK,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        min_connections: int = 1,
        max_connections: int = 8,
        timeout_s: float = 5.0,
        statement_timeout_ms: int = 10_000,
        probe_interval_s: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._dsn = dsn
        self._where = redact_url(dsn)
        self._schema = schema
        self._clock = clock
        self._max_value_bytes = max_value_bytes
        self._timeout_s = timeout_s
        self._pool = psycopg_pool.AsyncConnectionPool(
            dsn,
            min_size=min_connections,
            max_size=max_connections,
            open=False,
            timeout=timeout_s,
            kwargs={
                "autocommit": True,
                "connect_timeout": max(1, int(timeout_s)),
                "options": f"-c statement_timeout={int(statement_timeout_ms)}",
            },
            name=f"lemon-store-{schema}",
        )
        self._opened = False
        self._closed = False
        self._ops = 0
        self._errors = 0
        self._probe_interval_s = probe_interval_s
        self._monotonic = monotonic
        self._down: str | None = None  # the breaker: why the server is taken as gone
        self._next_probe = 0.0
        self._fast_failures = 0
        self._connect_errors_seen = 0
        self._watchers: list[Callable[[bool, str], None]] = []
        self._get = _q(
            "SELECT value FROM {schema}.lemon_kv WHERE tbl = %s AND key = %s "
            "AND (expires_at_ms IS NULL OR expires_at_ms > %s)",
            schema,
        )
        self._put = _q(
            "INSERT INTO {schema}.lemon_kv (tbl, key, value, expires_at_ms, updated_at_ms) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tbl, key) DO UPDATE SET "
            "value = excluded.value, expires_at_ms = excluded.expires_at_ms, "
            "updated_at_ms = excluded.updated_at_ms",
            schema,
        )
        # put_new's claim: inserted, or replacing an expired row; a row back when it held. A
        # concurrent claim of the same key waits for this one's transaction, then sees its row.
        self._put_new = _q(
            "INSERT INTO {schema}.lemon_kv AS kv (tbl, key, value, expires_at_ms, updated_at_ms) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tbl, key) DO UPDATE SET "
            "value = excluded.value, expires_at_ms = excluded.expires_at_ms, "
            "updated_at_ms = excluded.updated_at_ms "
            "WHERE kv.expires_at_ms IS NOT NULL AND kv.expires_at_ms <= %s RETURNING 1",
            schema,
        )
        self._delete = _q(
            "DELETE FROM {schema}.lemon_kv WHERE tbl = %s AND key = %s RETURNING expires_at_ms",
            schema,
        )
        scan = (
            "SELECT key, value FROM {schema}.lemon_kv WHERE tbl = %s AND key >= %s "
            "AND starts_with(key, %s) AND (expires_at_ms IS NULL OR expires_at_ms > %s) "
        )
        self._scan_asc = _q(scan + "ORDER BY key ASC LIMIT %s", schema)
        self._scan_desc = _q(scan + "ORDER BY key DESC LIMIT %s", schema)
        self._lease_check = _q(
            "SELECT 1 FROM {schema}.lemon_leases WHERE name = %s AND token = %s FOR SHARE",
            schema,
        )
        self._sweep = _q(
            "DELETE FROM {schema}.lemon_kv WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= %s",
            schema,
        )

    @property
    def schema(self) -> str:
        return self._schema

    @property
    def pool(self) -> psycopg_pool.AsyncConnectionPool:
        """The connection pool (shared with other users of this schema, e.g. leases)."""
        return self._pool

    @classmethod
    async def open(cls, dsn: str, **options: Any) -> PostgresStore:
        """Connect (the pool's first connection within ``timeout_s``) and apply the
        migrations; a server that cannot be reached raises StoreUnavailableError."""
        store = cls(dsn, **options)
        await store._open()
        return store

    async def _open(self) -> None:
        try:
            # One direct connection first: a refused or misconfigured server fails at once,
            # with the server's own reason (the pool would retry until its timeout).
            probe = await psycopg.AsyncConnection.connect(
                self._dsn, connect_timeout=max(1, int(self._timeout_s))
            )
            await probe.close()
            await self._pool.open(wait=True, timeout=self._timeout_s)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            await self._pool.close()
            self._closed = True
            raise StoreUnavailableError(
                f"PostgreSQL store {self._where}: cannot connect ({_reason(exc)})"
            ) from exc
        try:
            await self._call(self._migrate)
        except BaseException:
            await self._pool.close()
            self._closed = True
            raise
        self._opened = True

    async def __aenter__(self) -> PostgresStore:
        if not self._opened:
            await self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _migrate(self, conn: psycopg.AsyncConnection[Any]) -> None:
        schema = self._schema
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (_MIGRATION_LOCK,))
            await conn.execute(_q("CREATE SCHEMA IF NOT EXISTS {schema}", schema))
            await conn.execute(
                _q(
                    "CREATE TABLE IF NOT EXISTS {schema}.lemon_migrations ("
                    "version integer PRIMARY KEY, name text NOT NULL, "
                    "applied_at timestamptz NOT NULL DEFAULT now())",
                    schema,
                )
            )
            cur = await conn.execute(_q("SELECT version FROM {schema}.lemon_migrations", schema))
            applied = {int(row[0]) for row in await cur.fetchall()}
            newest = MIGRATIONS[-1][0]
            if applied and max(applied) > newest:
                raise StoreUnavailableError(
                    f"PostgreSQL store {self._where}: schema {schema!r} is at migration "
                    f"{max(applied)}, newer than this Lemon knows ({newest}); upgrade Lemon or "
                    "use another [store] schema"
                )
            for version, name, statements in MIGRATIONS:
                if version in applied:
                    continue
                for statement in statements:
                    await conn.execute(_q(statement, schema))
                await conn.execute(
                    _q(
                        "INSERT INTO {schema}.lemon_migrations (version, name) VALUES (%s, %s)",
                        schema,
                    ),
                    (version, name),
                )

    async def migrations(self) -> list[int]:
        """The versions applied to this schema, in order."""

        async def op(conn: psycopg.AsyncConnection[Any]) -> list[int]:
            cur = await conn.execute(
                _q("SELECT version FROM {schema}.lemon_migrations ORDER BY version", self._schema)
            )
            return [int(row[0]) for row in await cur.fetchall()]

        return await self._call(op)

    def watch(self, callback: Callable[[bool, str], None]) -> None:
        """Call ``callback(running, reason)`` once each time the breaker opens (``False``,
        the reason) or closes (``True``, ``""``); from the calling task, never blocking."""
        self._watchers.append(callback)

    @property
    def available(self) -> bool:
        """Whether the breaker is closed (the last calls reached the server)."""
        return self._down is None

    def _report(self, running: bool, reason: str) -> None:
        for callback in tuple(self._watchers):
            try:
                callback(running, reason)
            except Exception:  # a watcher's bug never fails a store call
                _log.exception("a store status watcher failed")

    def _server_gone(self) -> bool:
        """After a pool timeout: whether the server is gone (no connection was busy, so none
        could be made, or new connection attempts failed since the last look) rather than the
        pool being busy with slow calls of a live server (those must not trip the breaker)."""
        stats = self._pool.get_stats()
        busy = stats.get("pool_size", 0) - stats.get("pool_available", 0)
        errors = stats.get("connections_errors", 0)
        failed_to_connect = errors > self._connect_errors_seen
        self._connect_errors_seen = errors
        return busy <= 0 or failed_to_connect

    async def _call(self, fn: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        if self._closed:
            raise StoreClosedError(f"PostgresStore {self._where} ({self._schema}) is closed")
        self._ops += 1
        if self._down is not None:
            now = self._monotonic()
            if now < self._next_probe:  # not this call's turn to probe: fail at once
                self._errors += 1
                self._fast_failures += 1
                raise StoreUnavailableError(
                    f"PostgreSQL store {self._where} ({self._schema}) is not answering "
                    f"({self._down}); failing fast until a probe reaches it"
                )
            self._next_probe = now + self._probe_interval_s  # this call is the probe
        try:
            async with self._pool.connection() as conn:
                result = await fn(conn)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            self._errors += 1
            if self._closed:
                raise StoreClosedError(
                    f"PostgresStore {self._where} ({self._schema}) is closed"
                ) from exc
            reason = _reason(exc)
            if isinstance(exc, psycopg_pool.PoolTimeout) and self._server_gone():
                self._next_probe = self._monotonic() + self._probe_interval_s
                if self._down is None:
                    self._down = reason
                    _log.warning(
                        "PostgreSQL store %s (%s) is not answering (%s): store calls fail "
                        "fast until a probe every %.1f s reaches it",
                        self._where,
                        self._schema,
                        reason,
                        self._probe_interval_s,
                    )
                    self._report(False, reason)
            raise StoreUnavailableError(
                f"PostgreSQL store {self._where} ({self._schema}): {reason}"
            ) from exc
        if self._down is not None:
            self._down = None
            _log.warning("PostgreSQL store %s (%s) answers again", self._where, self._schema)
            self._report(True, "")
        return result

    async def run(self, fn: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Run ``fn(connection)`` on a pooled connection of this store, with this store's error
        translation (for components that keep their own tables in the schema, e.g. leases)."""
        return await self._call(fn)

    # -- the Store interface -----------------------------------------------------------

    async def get(self, table: str, key: str) -> Any | None:
        check_table(table)
        _check_pg_text(check_key(key), "key")
        params = (table, key, self._clock.now_ms())

        async def op(conn: psycopg.AsyncConnection[Any]) -> bytes | None:
            cur = await conn.execute(self._get, params)
            row = await cur.fetchone()
            return None if row is None else bytes(row[0])

        data = await self._call(op)
        return None if data is None else decode_value(data)

    async def put(self, table: str, key: str, value: Any, *, ttl_ms: int | None = None) -> None:
        check_table(table)
        _check_pg_text(check_key(key), "key")
        ttl = check_ttl(ttl_ms)
        data = encode_value(value, self._max_value_bytes)
        now = self._clock.now_ms()
        params = (table, key, data, None if ttl is None else now + ttl, now)

        async def op(conn: psycopg.AsyncConnection[Any]) -> None:
            await conn.execute(self._put, params)

        await self._call(op)

    def _batch(self, entries: Sequence[PutEntry]) -> list[tuple[Any, ...]]:
        if self._closed:
            raise StoreClosedError(f"PostgresStore {self._where} ({self._schema}) is closed")
        batch = check_entries(entries, self._max_value_bytes)
        for _, key, _, _ in batch:
            _check_pg_text(key, "key")
        now = self._clock.now_ms()
        rows = [(t, k, d, None if ttl is None else now + ttl, now) for t, k, d, ttl in batch]
        # Written in key order (a stable sort: a key's last entry still wins): two daemons'
        # batches over the same rows lock them in the same order and never deadlock.
        rows.sort(key=_row_order)
        return rows

    async def put_many(self, entries: Sequence[PutEntry]) -> None:
        """Every entry in one transaction on one pooled connection, in key order (nothing of it
        committed when the connection is lost first)."""
        rows = self._batch(entries)
        if not rows:
            return

        async def op(conn: psycopg.AsyncConnection[Any]) -> None:
            async with conn.transaction(), conn.cursor() as cur:
                await cur.executemany(self._put, rows)

        await self._call(op)

    async def put_many_fenced(self, entries: Sequence[PutEntry], lease: Lease) -> None:
        """``put_many`` in one transaction with one check of ``lease`` (as :meth:`put_fenced`);
        ``StaleLeaseError`` and nothing written otherwise."""
        rows = self._batch(entries)

        async def op(conn: psycopg.AsyncConnection[Any]) -> bool:
            async with conn.transaction():
                if not await self._holds(conn, lease):
                    return False
                if rows:
                    async with conn.cursor() as cur:
                        await cur.executemany(self._put, rows)
                return True

        if not await self._call(op):
            raise _stale(lease)

    async def put_new(
        self,
        table: str,
        key: str,
        value: Any,
        *,
        ttl_ms: int | None = None,
        also: Sequence[PutEntry] = (),
    ) -> bool:
        """``INSERT … ON CONFLICT DO UPDATE … WHERE expired RETURNING`` and ``also`` in one
        transaction (rolled back when the key was held)."""
        check_table(table)
        _check_pg_text(check_key(key), "key")
        ttl = check_ttl(ttl_ms)
        data = encode_value(value, self._max_value_bytes)
        rows = self._batch(also)
        now = self._clock.now_ms()
        claim = (table, key, data, None if ttl is None else now + ttl, now, now)

        async def op(conn: psycopg.AsyncConnection[Any]) -> bool:
            won = False
            async with conn.transaction() as tx:
                cur = await conn.execute(self._put_new, claim)
                won = await cur.fetchone() is not None
                if not won:
                    raise psycopg.Rollback(tx)  # nothing of the batch (the key was held)
                if rows:
                    async with conn.cursor() as many:
                        await many.executemany(self._put, rows)
            return won

        return await self._call(op)

    async def delete(self, table: str, key: str) -> bool:
        check_table(table)
        _check_pg_text(check_key(key), "key")
        now = self._clock.now_ms()

        async def op(conn: psycopg.AsyncConnection[Any]) -> bool:
            cur = await conn.execute(self._delete, (table, key))
            row = await cur.fetchone()
            return row is not None and (row[0] is None or int(row[0]) > now)

        return await self._call(op)

    async def scan(
        self, table: str, *, prefix: str = "", limit: int = 1000, reverse: bool = False
    ) -> list[tuple[str, Any]]:
        check_table(table)
        check_limit(limit)
        if not isinstance(prefix, str):
            raise UsageTypeError(f"scan prefix must be a string, got {prefix!r}")
        _check_pg_text(prefix, "prefix")
        query = self._scan_desc if reverse else self._scan_asc
        params = (table, prefix, prefix, self._clock.now_ms(), limit)

        async def op(conn: psycopg.AsyncConnection[Any]) -> list[tuple[str, bytes]]:
            cur = await conn.execute(query, params)
            return [(str(k), bytes(v)) for k, v in await cur.fetchall()]

        rows = await self._call(op)
        return [(k, decode_value(v)) for k, v in rows]

    async def put_fenced(
        self,
        table: str,
        key: str,
        value: Any,
        lease: Lease,
        *,
        ttl_ms: int | None = None,
    ) -> None:
        """``put``, in one transaction with a check that ``lease``'s token still holds its
        name (the lease row locked ``FOR SHARE``, so a takeover waits for this write or this
        write sees the takeover); ``StaleLeaseError`` and nothing written otherwise."""
        check_table(table)
        _check_pg_text(check_key(key), "key")
        ttl = check_ttl(ttl_ms)
        data = encode_value(value, self._max_value_bytes)
        now = self._clock.now_ms()
        params = (table, key, data, None if ttl is None else now + ttl, now)

        async def op(conn: psycopg.AsyncConnection[Any]) -> bool:
            async with conn.transaction():
                if not await self._holds(conn, lease):
                    return False
                await conn.execute(self._put, params)
                return True

        if not await self._call(op):
            raise _stale(lease)

    async def put_new_fenced(
        self,
        table: str,
        key: str,
        value: Any,
        lease: Lease,
        *,
        ttl_ms: int | None = None,
        also: Sequence[PutEntry] = (),
    ) -> bool:
        """``put_new`` in one transaction with one check of ``lease`` (as :meth:`put_fenced`);
        ``StaleLeaseError`` and nothing written when the lease was lost."""
        check_table(table)
        _check_pg_text(check_key(key), "key")
        ttl = check_ttl(ttl_ms)
        data = encode_value(value, self._max_value_bytes)
        rows = self._batch(also)
        now = self._clock.now_ms()
        claim = (table, key, data, None if ttl is None else now + ttl, now, now)

        async def op(conn: psycopg.AsyncConnection[Any]) -> bool | None:
            won = False
            async with conn.transaction() as tx:
                if not await self._holds(conn, lease):
                    return None
                cur = await conn.execute(self._put_new, claim)
                won = await cur.fetchone() is not None
                if not won:
                    raise psycopg.Rollback(tx)
                if rows:
                    async with conn.cursor() as many:
                        await many.executemany(self._put, rows)
            return won

        won = await self._call(op)
        if won is None:
            raise _stale(lease)
        return won

    async def delete_fenced(self, table: str, key: str, lease: Lease) -> bool:
        """``delete`` under ``lease`` (as :meth:`put_fenced`)."""
        check_table(table)
        _check_pg_text(check_key(key), "key")
        now = self._clock.now_ms()

        async def op(conn: psycopg.AsyncConnection[Any]) -> bool | None:
            async with conn.transaction():
                if not await self._holds(conn, lease):
                    return None
                cur = await conn.execute(self._delete, (table, key))
                row = await cur.fetchone()
                return row is not None and (row[0] is None or int(row[0]) > now)

        found = await self._call(op)
        if found is None:
            raise _stale(lease)
        return found

    async def _holds(self, conn: psycopg.AsyncConnection[Any], lease: Lease) -> bool:
        cur = await conn.execute(self._lease_check, (lease.name, lease.token))
        return await cur.fetchone() is not None

    async def sweep_expired(self) -> int:
        now = self._clock.now_ms()

        async def op(conn: psycopg.AsyncConnection[Any]) -> int:
            cur = await conn.execute(self._sweep, (now,))
            return max(cur.rowcount, 0)

        return await self._call(op)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._pool.close()

    def statistics(self) -> dict[str, Any]:
        pool = cast(dict[str, Any], self._pool.get_stats())
        return {
            "backend": "postgres",
            "server": self._where,
            "schema": self._schema,
            "closed": self._closed,
            "max_value_bytes": self._max_value_bytes,
            "ops": self._ops,
            "errors": self._errors,
            "available": self._down is None,
            "fast_failures": self._fast_failures,
            "pool_size": pool.get("pool_size", 0),
            "pool_available": pool.get("pool_available", 0),
            "requests_waiting": pool.get("requests_waiting", 0),
            "max_connections": self._pool.max_size,
        }


def _stale(lease: Lease) -> StaleLeaseError:
    return StaleLeaseError(
        f"lease {lease.name!r} token {lease.token} no longer holds it; nothing was written "
        "(another owner took over after it expired, or it was released)"
    )


_NOW_MS: Final = "(extract(epoch from clock_timestamp()) * 1000)::bigint"


class PostgresLeases:
    """Leases in the ``lemon_leases`` table of a :class:`PostgresStore`'s schema (migration 2).

    Tokens come from one sequence (they only grow). Expiry is judged by the server's clock, so
    daemons on machines whose clocks disagree still agree on it. Each call is one statement
    (acquire: an upsert that takes over only an expired row; renew and release: matched by
    token), so two daemons racing for a name never both win."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        schema = store.schema
        self._acquire = _q(
            "INSERT INTO {schema}.lemon_leases AS l (name, owner, token, expires_at_ms) "
            "VALUES (%s, %s, nextval('{schema}.lemon_fencing_tokens'), "
            + _NOW_MS
            + " + %s) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, "
            "token = excluded.token, expires_at_ms = excluded.expires_at_ms "
            "WHERE l.expires_at_ms <= " + _NOW_MS + " RETURNING owner, token, expires_at_ms",
            schema,
        )
        self._renew = _q(
            "UPDATE {schema}.lemon_leases SET expires_at_ms = "
            + _NOW_MS
            + " + %s WHERE name = %s AND token = %s RETURNING owner, token, expires_at_ms",
            schema,
        )
        self._release = _q(
            "DELETE FROM {schema}.lemon_leases WHERE name = %s AND token = %s", schema
        )
        self._holder = _q(
            "SELECT owner, token, expires_at_ms FROM {schema}.lemon_leases WHERE name = %s",
            schema,
        )

    async def _one(self, query: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        async def op(conn: psycopg.AsyncConnection[Any]) -> tuple[Any, ...] | None:
            cur = await conn.execute(query, params)
            return await cur.fetchone()

        return await self._store.run(op)

    async def acquire(self, name: str, owner: str, *, ttl_ms: int) -> Lease | None:
        check_lease_name(name)
        row = await self._one(self._acquire, (name, owner, check_ttl_ms(ttl_ms)))
        return None if row is None else _lease(name, row)

    async def renew(self, lease: Lease, *, ttl_ms: int) -> Lease | None:
        row = await self._one(self._renew, (check_ttl_ms(ttl_ms), lease.name, lease.token))
        return None if row is None else _lease(lease.name, row)

    async def release(self, lease: Lease) -> bool:
        async def op(conn: psycopg.AsyncConnection[Any]) -> bool:
            cur = await conn.execute(self._release, (lease.name, lease.token))
            return cur.rowcount > 0

        return await self._store.run(op)

    async def holder(self, name: str) -> Lease | None:
        row = await self._one(self._holder, (check_lease_name(name),))
        return None if row is None else _lease(name, row)

    def fenced(self, lease: Lease) -> _FencedPostgres:
        return _FencedPostgres(self._store, lease)


def _lease(name: str, row: tuple[Any, ...]) -> Lease:
    return Lease(name=name, owner=str(row[0]), token=int(row[1]), expires_at_ms=int(row[2]))


class _FencedPostgres:
    """The Store view of :meth:`PostgresLeases.fenced`: writes checked in their transaction."""

    def __init__(self, store: PostgresStore, lease: Lease) -> None:
        self._store = store
        self._lease = lease
        self.refused = 0

    async def get(self, table: str, key: str) -> Any | None:
        return await self._store.get(table, key)

    async def put(self, table: str, key: str, value: Any, *, ttl_ms: int | None = None) -> None:
        try:
            await self._store.put_fenced(table, key, value, self._lease, ttl_ms=ttl_ms)
        except StaleLeaseError:
            self.refused += 1
            raise

    async def put_many(self, entries: Sequence[PutEntry]) -> None:
        try:
            await self._store.put_many_fenced(entries, self._lease)
        except StaleLeaseError:
            self.refused += 1
            raise

    async def put_new(
        self,
        table: str,
        key: str,
        value: Any,
        *,
        ttl_ms: int | None = None,
        also: Sequence[PutEntry] = (),
    ) -> bool:
        try:
            return await self._store.put_new_fenced(
                table, key, value, self._lease, ttl_ms=ttl_ms, also=also
            )
        except StaleLeaseError:
            self.refused += 1
            raise

    async def delete(self, table: str, key: str) -> bool:
        try:
            return await self._store.delete_fenced(table, key, self._lease)
        except StaleLeaseError:
            self.refused += 1
            raise

    async def scan(
        self, table: str, *, prefix: str = "", limit: int = 1000, reverse: bool = False
    ) -> list[tuple[str, Any]]:
        return await self._store.scan(table, prefix=prefix, limit=limit, reverse=reverse)

    async def sweep_expired(self) -> int:
        return await self._store.sweep_expired()

    async def close(self) -> None:
        """The view owns nothing."""

    def statistics(self) -> dict[str, Any]:
        return {
            **self._store.statistics(),
            "fenced_by": self._lease.name,
            "token": self._lease.token,
            "refused": self.refused,
        }


def _check_pg_text(value: str, what: str) -> None:
    if "\x00" in value:
        raise InvalidStoreKeyError(
            f"invalid store {what} {value!r}: PostgreSQL text cannot hold NUL characters"
        )


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


async def drop_schema(dsn: str, schema: str) -> None:
    """Drop ``schema`` and everything in it (tests and ``lemon`` tooling; irreversible)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(_q("DROP SCHEMA IF EXISTS {schema} CASCADE", schema))


def _row_order(row: tuple[Any, ...]) -> tuple[str, str]:
    return (row[0], row[1])
