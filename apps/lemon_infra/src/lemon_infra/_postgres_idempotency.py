"""The PostgreSQL idempotency store: fences and response snapshots in the schema of a
:class:`~lemon_infra.PostgresStore` (``[store] backend = "postgres"``), so several
daemons sharing that schema share their reservations: a key sent to any of them executes once.

Design: the store's connection pool, reached through :meth:`PostgresStore.run` (one schema, the
store's error translation; a failure becomes :class:`IdempotencyStoreError`, and the caller
fails closed). Every operation is one transaction:

* ``reserve`` locks the key's fence and its message binding's (``SELECT ... FOR UPDATE``, one
  statement, in key order as the sweep locks, so no two transactions wait in a cycle),
  replaces an expired one, and inserts with ``ON CONFLICT DO NOTHING``: of any number of
  concurrent reservations of one key, on any number of connections or daemons, exactly one
  creates the fence; the others see it (the insert waits for the winner's commit, then
  conflicts);
* ``complete`` updates the pending fence and inserts its exact response together;
* ``sweep`` locks the expired fences, deletes their snapshots, then the fences, then advances
  the watermark (``GREATEST``): a failure at any step removes nothing and keeps the watermark.

Schema versions (``idem_meta.schema_version``, the same numbers as the SQLite backend):

1. a legacy raw-key table ``webhook_idempotency`` (the earlier format) in the schema;
2. ``idem_fences`` and ``idem_responses``, created at open under a transaction-scoped advisory
   lock (daemons starting together never race); a newer version is refused.
   :meth:`PostgresIdempotencyStore.migrate_legacy` moves raw rows as the SQLite backend does:
   the hashed fence and exact response first (committed), then the raw row is deleted only if
   it is unchanged and its copy is confirmed.

Whether the legacy table exists is read at open and by :meth:`migrate_legacy` (a reservation
with a raw key only looks for a legacy row when it existed then).

This module imports psycopg: import it only when a PostgreSQL store is configured.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, LiteralString, TypeVar

import psycopg
from psycopg import sql

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
from lemon_core.store.errors import StoreError
from lemon_infra._postgres_store import PostgresStore
from lemon_infra._sqlite_idempotency import LEGACY_TABLE, SCHEMA_VERSION

__all__ = ["PostgresIdempotencyStore", "create_postgres_legacy_table"]

T = TypeVar("T")
Conn = psycopg.AsyncConnection[Any]

_MIGRATION_LOCK: Final = "lemon_infra._postgres_idempotency migrations"

_SCHEMA: Final[tuple[LiteralString, ...]] = (
    """CREATE TABLE IF NOT EXISTS {schema}.idem_meta (
        name text PRIMARY KEY,
        value bigint NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS {schema}.idem_fences (
        key_hash text COLLATE "C" PRIMARY KEY,
        integration text NOT NULL,
        state text NOT NULL CHECK (state IN ('pending', 'accepted', 'outcome_unknown')),
        run_id text,
        body_hash text,
        session_key text,
        created_at_ms bigint NOT NULL,
        updated_at_ms bigint NOT NULL,
        expires_at_ms bigint NOT NULL,
        lease_until_ms bigint NOT NULL,
        legacy boolean NOT NULL DEFAULT false,
        CHECK (run_id IS NOT NULL OR (legacy AND state = 'pending')))""",
    """CREATE INDEX IF NOT EXISTS idem_fences_expiry ON {schema}.idem_fences (expires_at_ms)""",
    """CREATE INDEX IF NOT EXISTS idem_fences_created
        ON {schema}.idem_fences (created_at_ms)""",
    """CREATE INDEX IF NOT EXISTS idem_fences_run ON {schema}.idem_fences (run_id)""",
    """CREATE TABLE IF NOT EXISTS {schema}.idem_responses (
        key_hash text COLLATE "C" PRIMARY KEY REFERENCES {schema}.idem_fences (key_hash),
        status integer NOT NULL,
        content_type text NOT NULL,
        body bytea NOT NULL,
        stored_at_ms bigint NOT NULL)""",
)

_LEGACY_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS {schema}."
    + LEGACY_TABLE
    + """ (
        integration_id text NOT NULL,
        idempotency_key text NOT NULL,
        state text NOT NULL,
        run_id text,
        session_key text,
        response_json text,
        created_at_ms bigint NOT NULL,
        PRIMARY KEY (integration_id, idempotency_key))"""
)


def _q(template: str, schema: str) -> str:
    return sql.SQL(template).format(schema=sql.Identifier(schema)).as_string(None)


class PostgresIdempotencyStore:
    """See the module docstring. ``await PostgresIdempotencyStore.open(dsn, schema=...)`` opens
    (and owns) a pool; ``await PostgresIdempotencyStore.attach(store)`` shares an open
    :class:`PostgresStore`'s pool and schema (closing this store leaves that one open)."""

    def __init__(self, store: PostgresStore, *, owns_store: bool) -> None:
        self._store = store
        self._owns = owns_store
        self._closed = False
        self._has_legacy = False
        self._ops = 0
        self._errors = 0
        s = store.schema
        self._where = f"{store.statistics().get('server', '?')} ({s})"
        select = (
            f"SELECT {FENCE_COLUMNS} FROM {{schema}}.idem_fences f "
            "LEFT JOIN {schema}.idem_responses r ON r.key_hash = f.key_hash"
        )
        self._select = _q(select, s)
        self._fetch_sql = _q(select + " WHERE f.key_hash = %s", s)
        self._lock_sql = _q(
            "SELECT key_hash, expires_at_ms FROM {schema}.idem_fences "
            "WHERE key_hash = ANY(%s) ORDER BY key_hash FOR UPDATE",
            s,
        )
        self._remove_responses = _q("DELETE FROM {schema}.idem_responses WHERE key_hash = %s", s)
        self._remove_fence = _q("DELETE FROM {schema}.idem_fences WHERE key_hash = %s", s)
        self._insert = _q(
            "INSERT INTO {schema}.idem_fences (key_hash, integration, state, run_id, body_hash, "
            "session_key, created_at_ms, updated_at_ms, expires_at_ms, lease_until_ms) "
            "VALUES (%s, %s, 'pending', %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (key_hash) DO NOTHING RETURNING key_hash",
            s,
        )
        self._accept = _q(
            "UPDATE {schema}.idem_fences SET state = 'accepted', updated_at_ms = %s "
            "WHERE key_hash = %s AND run_id = %s AND state = 'pending' AND lease_until_ms > %s",
            s,
        )
        self._store_response = _q(
            "INSERT INTO {schema}.idem_responses (key_hash, status, content_type, body, "
            "stored_at_ms) VALUES (%s, %s, %s, %s, %s)",
            s,
        )
        self._unknown = _q(
            "UPDATE {schema}.idem_fences SET state = 'outcome_unknown', updated_at_ms = %s "
            "WHERE key_hash = %s AND run_id = %s AND state = 'pending'",
            s,
        )
        self._vanished = _q(
            "UPDATE {schema}.idem_fences SET state = 'outcome_unknown', updated_at_ms = %s "
            "WHERE run_id = %s AND integration = %s AND state IN ('pending', 'accepted')",
            s,
        )
        self._release = _q(
            "DELETE FROM {schema}.idem_fences f WHERE key_hash = %s AND run_id = %s "
            "AND state = 'pending' AND NOT EXISTS "
            "(SELECT 1 FROM {schema}.idem_responses r WHERE r.key_hash = f.key_hash)",
            s,
        )
        self._recover = _q(
            "UPDATE {schema}.idem_fences SET state = 'outcome_unknown', updated_at_ms = %s "
            "WHERE state = 'pending' AND run_id IS NOT NULL",
            s,
        )
        self._doomed = _q(
            "SELECT key_hash FROM {schema}.idem_fences WHERE expires_at_ms <= %s "
            "ORDER BY key_hash FOR UPDATE",
            s,
        )
        self._sweep_responses = _q(
            "DELETE FROM {schema}.idem_responses WHERE key_hash = ANY(%s)", s
        )
        self._sweep_fences = _q("DELETE FROM {schema}.idem_fences WHERE key_hash = ANY(%s)", s)
        self._advance = _q(
            "UPDATE {schema}.idem_meta SET value = GREATEST(value, %s) "
            "WHERE name = 'watermark_ms' RETURNING value",
            s,
        )
        self._watermark = _q("SELECT value FROM {schema}.idem_meta WHERE name = 'watermark_ms'", s)
        self._legacy_one = _q(
            f"SELECT {LEGACY_COLUMNS} FROM {{schema}}.{LEGACY_TABLE} "
            "WHERE integration_id = %s AND idempotency_key = %s FOR UPDATE",
            s,
        )
        self._legacy_all = _q(
            f"SELECT {LEGACY_COLUMNS} FROM {{schema}}.{LEGACY_TABLE} "
            "ORDER BY integration_id, idempotency_key",
            s,
        )
        self._legacy_fence = _q(
            "INSERT INTO {schema}.idem_fences AS f (key_hash, integration, state, run_id, "
            "body_hash, session_key, created_at_ms, updated_at_ms, expires_at_ms, "
            "lease_until_ms, legacy) VALUES (%s, %s, %s, %s, NULL, %s, %s, %s, %s, %s, true) "
            "ON CONFLICT (key_hash) DO UPDATE SET state = excluded.state, run_id = "
            "excluded.run_id, session_key = excluded.session_key, updated_at_ms = "
            "excluded.updated_at_ms, lease_until_ms = excluded.lease_until_ms WHERE f.legacy",
            s,
        )
        self._legacy_response = _q(
            "INSERT INTO {schema}.idem_responses (key_hash, status, content_type, body, "
            "stored_at_ms) VALUES (%s, 202, 'application/json', %s, %s) "
            "ON CONFLICT (key_hash) DO UPDATE SET body = excluded.body",
            s,
        )
        self._legacy_copy = _q(
            "SELECT f.run_id, r.body FROM {schema}.idem_fences f LEFT JOIN "
            "{schema}.idem_responses r ON r.key_hash = f.key_hash WHERE f.key_hash = %s",
            s,
        )
        self._legacy_delete = _q(
            f"DELETE FROM {{schema}}.{LEGACY_TABLE} WHERE integration_id = %s "
            "AND idempotency_key = %s AND state = %s AND run_id IS NOT DISTINCT FROM %s::text "
            "AND session_key IS NOT DISTINCT FROM %s::text "
            "AND response_json IS NOT DISTINCT FROM %s::text AND created_at_ms = %s",
            s,
        )

    @classmethod
    async def open(cls, dsn: str, **options: Any) -> PostgresIdempotencyStore:
        """Open a :class:`PostgresStore` (``options`` are its own: ``schema``, ``timeout_s``,
        pool sizes), owned by the returned store, and bring the idempotency tables to version
        2. A server that cannot be reached raises :class:`IdempotencyStoreError`."""
        try:
            store = await PostgresStore.open(dsn, **options)
        except StoreError as exc:
            raise IdempotencyStoreError(f"idempotency store: {exc}") from exc
        try:
            return await cls._ready(cls(store, owns_store=True))
        except BaseException:
            await store.close()
            raise

    @classmethod
    async def attach(cls, store: PostgresStore) -> PostgresIdempotencyStore:
        """An idempotency store in ``store``'s schema, on its pool (``store`` stays the
        caller's: :meth:`close` does not close it)."""
        return await cls._ready(cls(store, owns_store=False))

    @classmethod
    async def _ready(cls, idem: PostgresIdempotencyStore) -> PostgresIdempotencyStore:
        await idem._call(idem._migrate)
        return idem

    @property
    def schema(self) -> str:
        return self._store.schema

    # -- plumbing ----------------------------------------------------------------------------

    async def _migrate(self, conn: Conn) -> None:
        schema = self._store.schema
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (_MIGRATION_LOCK,))
            await conn.execute(_q("CREATE SCHEMA IF NOT EXISTS {schema}", schema))
            version = await self._version(conn)
            if version > SCHEMA_VERSION:
                raise IdempotencyStoreError(
                    f"PostgreSQL {self._where} has idempotency schema version {version}, newer "
                    f"than this Lemon understands ({SCHEMA_VERSION}); upgrade Lemon or use "
                    "another [store] schema"
                )
            for statement in _SCHEMA:
                await conn.execute(_q(statement, schema))
            await conn.execute(
                _q(
                    "INSERT INTO {schema}.idem_meta (name, value) VALUES ('schema_version', %s) "
                    "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                    schema,
                ),
                (SCHEMA_VERSION,),
            )
            await conn.execute(
                _q(
                    "INSERT INTO {schema}.idem_meta (name, value) VALUES ('watermark_ms', 0) "
                    "ON CONFLICT (name) DO NOTHING",
                    schema,
                )
            )
            self._has_legacy = await self._legacy_exists(conn)

    async def _version(self, conn: Conn) -> int:
        schema = self._store.schema
        cur = await conn.execute(
            "SELECT to_regclass(%s), to_regclass(%s)",
            (_qualified(schema, "idem_meta"), _qualified(schema, LEGACY_TABLE)),
        )
        row = await cur.fetchone()
        assert row is not None
        if row[0] is not None:
            found = await conn.execute(
                _q("SELECT value FROM {schema}.idem_meta WHERE name = 'schema_version'", schema)
            )
            value = await found.fetchone()
            if value is not None:
                return int(value[0])
        return 1 if row[1] is not None else 0

    async def _legacy_exists(self, conn: Conn) -> bool:
        cur = await conn.execute(
            "SELECT to_regclass(%s)", (_qualified(self._store.schema, LEGACY_TABLE),)
        )
        row = await cur.fetchone()
        return row is not None and row[0] is not None

    async def _call(self, fn: Callable[[Conn], Awaitable[T]]) -> T:
        if self._closed:
            raise IdempotencyStoreError(f"the idempotency store {self._where} is closed")
        self._ops += 1
        try:
            return await self._store.run(fn)
        except StoreError as exc:
            self._errors += 1
            raise IdempotencyStoreError(f"idempotency store {self._where}: {exc}") from exc

    async def _tx(self, fn: Callable[[Conn], Awaitable[T]]) -> T:
        async def op(conn: Conn) -> T:
            async with conn.transaction():
                return await fn(conn)

        return await self._call(op)

    async def _fetch(self, conn: Conn, key_hash: str) -> IdempotencyRecord | None:
        cur = await conn.execute(self._fetch_sql, (key_hash,))
        row = await cur.fetchone()
        return None if row is None else record_from_row(tuple(row))

    async def _remove(self, conn: Conn, key_hash: str) -> None:
        await conn.execute(self._remove_responses, (key_hash,))
        await conn.execute(self._remove_fence, (key_hash,))

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
        async def op(conn: Conn) -> Reservation:
            # the fences of the key and of the message, locked in one statement in key order
            # (as the sweep locks): two transactions never wait on each other in a cycle
            wanted = [key_hash] if bind is None else sorted({key_hash, bind.key_hash})
            cur = await conn.execute(self._lock_sql, (wanted,))
            locked = {str(row[0]): int(row[1]) for row in await cur.fetchall()}
            bound = False
            if bind is not None:
                # the message's binding first, in this transaction: bound to another key, the
                # reservation is refused with nothing written
                reused, bound = await self._bind_message(
                    conn, bind, locked.get(bind.key_hash), key_hash=key_hash, run_id=run_id,
                    session_key=session_key, now_ms=now_ms,
                )  # fmt: skip
                if reused is not None:
                    return Reservation(created=False, record=reused, message_reused=True)
            expiry = locked.get(key_hash)
            if expiry is not None and expiry > now_ms:
                existing = await self._fetch(conn, key_hash)
                assert existing is not None
                return Reservation(created=False, record=existing, bound=bound)
            if expiry is not None:
                await self._remove(conn, key_hash)
            if legacy_key is not None and self._has_legacy:
                found = await conn.execute(self._legacy_one, (integration, legacy_key))
                raw = await found.fetchone()
                if raw is not None:
                    legacy_row: LegacyRow = tuple(raw)
                    migrated = await self._write_legacy(
                        conn, legacy_row, now_ms=now_ms, ttl_ms=ttl_ms
                    )
                    await self._delete_legacy(conn, legacy_row)
                    if migrated is not None and migrated.expires_at_ms > now_ms:
                        return Reservation(created=False, record=migrated, bound=bound)
                    if migrated is not None:
                        await self._remove(conn, key_hash)
            inserted = await conn.execute(
                self._insert,
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
            created = await inserted.fetchone() is not None
            # lost the race: the insert waited for the winner's commit, which this reads
            record = await self._fetch(conn, key_hash)
            assert record is not None
            return Reservation(created=created, record=record, bound=bound)

        return await self._tx(op)

    async def _bind_message(
        self,
        conn: Conn,
        bind: MessageBinding,
        expiry: int | None,
        *,
        key_hash: str,
        run_id: str,
        session_key: str,
        now_ms: int,
    ) -> tuple[IdempotencyRecord | None, bool]:
        """(the binding to another key, or None; whether this call made the binding).
        ``expiry``: the locked binding's, or None when there was none."""
        if expiry is None or expiry <= now_ms:
            if expiry is not None:
                await self._remove(conn, bind.key_hash)
            inserted = await conn.execute(
                self._insert,
                binding_values(
                    bind, key_hash=key_hash, run_id=run_id, session_key=session_key, now_ms=now_ms
                ),
            )
            if await inserted.fetchone() is not None:
                return None, True
            # else a concurrent request bound it first (the insert waited for its commit)
        binding = await self._fetch(conn, bind.key_hash)
        assert binding is not None
        return binding_conflict(binding, key_hash), False

    async def lookup(self, key_hash: str, *, now_ms: int) -> IdempotencyRecord | None:
        async def op(conn: Conn) -> IdempotencyRecord | None:
            record = await self._fetch(conn, key_hash)
            return record if record is not None and record.expires_at_ms > now_ms else None

        return await self._call(op)

    async def complete(
        self, *, key_hash: str, run_id: str, response: StoredResponse, now_ms: int
    ) -> bool:
        async def op(conn: Conn) -> bool:
            # only while the lease is live: past it, replays already answer outcome_unknown,
            # and a late acceptance must not change the key's answer
            cur = await conn.execute(self._accept, (now_ms, key_hash, run_id, now_ms))
            if cur.rowcount != 1:
                return False
            await conn.execute(
                self._store_response,
                (key_hash, response.status, response.content_type, response.body, now_ms),
            )
            return True

        return await self._tx(op)

    async def mark_unknown(self, *, key_hash: str, run_id: str, now_ms: int) -> bool:
        async def op(conn: Conn) -> bool:
            cur = await conn.execute(self._unknown, (now_ms, key_hash, run_id))
            return cur.rowcount == 1

        return await self._call(op)

    async def mark_vanished(self, *, run_id: str, integration: str, now_ms: int) -> int:
        async def op(conn: Conn) -> int:
            cur = await conn.execute(self._vanished, (now_ms, run_id, integration))
            return max(cur.rowcount, 0)

        return await self._call(op)

    async def release(self, *, key_hash: str, run_id: str) -> bool:
        async def op(conn: Conn) -> bool:
            cur = await conn.execute(self._release, (key_hash, run_id))
            return cur.rowcount == 1

        return await self._call(op)

    async def recover(self, *, now_ms: int) -> int:
        async def op(conn: Conn) -> int:
            cur = await conn.execute(self._recover, (now_ms,))
            return max(cur.rowcount, 0)

        return await self._call(op)

    async def sweep(self, *, now_ms: int) -> SweepReport:
        async def op(conn: Conn) -> SweepReport:
            # The expired fences locked, their snapshots removed, then the fences, then the
            # watermark: one transaction, so a failure at any step removes nothing and leaves
            # the watermark where it was (and a concurrent complete of one waits, then finds
            # no fence).
            cur = await conn.execute(self._doomed, (now_ms,))
            keys = [str(row[0]) for row in await cur.fetchall()]
            responses = fences = 0
            if keys:
                responses = max((await conn.execute(self._sweep_responses, (keys,))).rowcount, 0)
                fences = max((await conn.execute(self._sweep_fences, (keys,))).rowcount, 0)
            mark = await (await conn.execute(self._advance, (now_ms,))).fetchone()
            assert mark is not None
            return SweepReport(
                responses_removed=responses, fences_removed=fences, watermark_ms=int(mark[0])
            )

        return await self._tx(op)

    async def watermark(self) -> int:
        async def op(conn: Conn) -> int:
            row = await (await conn.execute(self._watermark)).fetchone()
            return 0 if row is None else int(row[0])

        return await self._call(op)

    async def records(
        self, *, limit: int = 100, integration: str | None = None
    ) -> list[IdempotencyRecord]:
        check_limit(limit)
        where, args = ("WHERE f.integration = %s ", (integration,)) if integration else ("", ())
        query = f"{self._select} {where}ORDER BY f.created_at_ms DESC, f.key_hash LIMIT %s"

        async def op(conn: Conn) -> list[IdempotencyRecord]:
            cur = await conn.execute(query, (*args, limit))
            return [record_from_row(tuple(r)) for r in await cur.fetchall()]

        return await self._call(op)

    async def migrate_legacy(self, *, now_ms: int, ttl_ms: int) -> MigrationReport:
        async def read(conn: Conn) -> list[LegacyRow]:
            self._has_legacy = await self._legacy_exists(conn)
            if not self._has_legacy:
                return []
            cur = await conn.execute(self._legacy_all)
            out: list[LegacyRow] = [tuple(r) for r in await cur.fetchall()]
            return out

        async def write(raw: LegacyRow) -> bool:
            async def op(conn: Conn) -> bool:
                copied = await self._write_legacy(conn, raw, now_ms=now_ms, ttl_ms=ttl_ms)
                return copied is not None

            return await self._tx(op)

        async def remove(raw: LegacyRow) -> bool:
            async def op(conn: Conn) -> bool:
                return await self._delete_legacy(conn, raw)

            return await self._tx(op)

        return await migrate_rows(await self._call(read), write=write, remove=remove)

    async def schema_version(self) -> int:
        return await self._call(self._version)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owns:
            await self._store.close()

    def statistics(self) -> dict[str, Any]:
        return {
            "backend": "postgres",
            "where": self._where,
            "closed": self._closed,
            "owns_pool": self._owns,
            "ops": self._ops,
            "errors": self._errors,
        }

    # -- legacy helpers (inside a transaction) -----------------------------------------------

    async def _write_legacy(
        self, conn: Conn, raw: LegacyRow, *, now_ms: int, ttl_ms: int
    ) -> IdempotencyRecord | None:
        """Upsert the hashed fence (and exact response) of one raw row. A fence that is not
        legacy (written by this version) is never overwritten. None for an unusable row."""
        key_hash = legacy_key_hash(raw)
        if key_hash is None:
            return None
        current = await self._fetch(conn, key_hash)
        if current is not None and not current.legacy:
            return current
        fence = legacy_fence(raw, key_hash, now_ms=now_ms, ttl_ms=ttl_ms)
        await conn.execute(self._legacy_fence, fence.values)
        if fence.response_body is not None:
            await conn.execute(self._legacy_response, (key_hash, fence.response_body, now_ms))
        return await self._fetch(conn, key_hash)

    async def _delete_legacy(self, conn: Conn, raw: LegacyRow) -> bool:
        """Delete one raw row if it is exactly ``raw`` still and its hashed copy is there."""
        key_hash = legacy_key_hash(raw)
        if key_hash is None:
            return False
        copy = await (await conn.execute(self._legacy_copy, (key_hash,))).fetchone()
        if not legacy_copy_confirmed(raw, copy):
            return False
        integration, key, state, run_id, session_key, response_json, created = raw
        cur = await conn.execute(
            self._legacy_delete,
            (integration, key, state, run_id, session_key, response_json, int(created)),
        )
        return cur.rowcount == 1


def _qualified(schema: str, table: str) -> str:
    return sql.Identifier(schema, table).as_string(None)


async def create_postgres_legacy_table(conn: Conn, schema: str) -> None:
    """Create the schema-1 raw-key table in ``schema`` (tests and imports of earlier data)."""
    await conn.execute(_q("CREATE SCHEMA IF NOT EXISTS {schema}", schema))
    await conn.execute(_q(_LEGACY_SCHEMA, schema))
