"""The PostgreSQL backend (``[store] backend = "postgres"``): memory in the deployment's schema.

It runs on the shared store's connection pool: anything with ``schema`` and ``run(fn)`` (the
runtime's ``PostgresStore`` from lemon_infra is one; :class:`PgRunner`), so its statements get
that store's timeouts, breaker and error translation, and several daemons on one schema share
one memory.

``memory_documents`` holds the documents, with a generated ``tsv`` column
(``setweight`` A title, B tags, C body) and a GIN index on it. The text search configuration
``memory_fts`` is English with stemming and, when the ``unaccent`` extension can be had,
diacritics removed (the SQLite backend's ``porter unicode61 remove_diacritics 2``); the text
is split on every non-alphanumeric character before parsing, as the query side splits it
(:mod:`lemon_memory.query`), so ``lemon-cli``, paths and ``user@host`` match word by word.
``memory_scopes`` / ``memory_totals`` (kept by triggers in the document's transaction) give
each scope's and the store's count and bytes without a scan; a forget or an eviction is one
``DELETE`` in one transaction, and the index entry goes with the row.

Every write transaction first locks the ``memory_totals`` row: writes are serialized across
daemons (as SQLite's ``BEGIN IMMEDIATE`` does), so the bounds hold and an upsert by content
hash never duplicates, and no two writers can deadlock. A recall's scope rule is part of its
SQL ``WHERE`` clause, exactly as in SQLite; ranking is ``ts_rank_cd`` times the scope weight,
the recency decay and the pinned boost.

This module imports psycopg: it is imported only when a PostgreSQL store is configured.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, LiteralString, Protocol, TypeVar, runtime_checkable

import msgspec
import psycopg
from psycopg import sql

from lemon_core.store.errors import StoreError
from lemon_memory.documents import (
    SCOPE_WEIGHTS,
    MemoryContext,
    MemoryDocument,
    MemoryStatistics,
    RecallHit,
    RecallResult,
)
from lemon_memory.errors import MemoryUnavailableError, ScopeError, ScopeFullError
from lemon_memory.query import tsquery
from lemon_memory.store import MAX_RECALL, Write, decay, new_doc_id

__all__ = ["PgRunner", "PostgresMemoryStore"]

T = TypeVar("T")
Conn = psycopg.AsyncConnection[Any]


@runtime_checkable
class PgRunner(Protocol):
    """A PostgreSQL schema and a way to run a function on one of its pooled connections
    (lemon_infra's ``PostgresStore`` is one)."""

    @property
    def schema(self) -> str: ...

    async def run(self, fn: Callable[[Conn], Awaitable[T]]) -> T: ...


_VERSION: Final = 1
_LOCK: Final = "lemon_memory._postgres migrations"
_SPLIT: Final = r"'[^[:alnum:]]+', ' ', 'g'"

_SCHEMA: Final[tuple[LiteralString, ...]] = (
    """CREATE TABLE IF NOT EXISTS {schema}.memory_documents (
        id bigserial PRIMARY KEY,
        doc_id text NOT NULL UNIQUE,
        kind text NOT NULL,
        scope text NOT NULL,
        scope_key text NOT NULL,
        agent_id text NOT NULL,
        title text NOT NULL,
        body text NOT NULL,
        tags text NOT NULL,
        source text NOT NULL,
        created_at_ms bigint NOT NULL,
        updated_at_ms bigint NOT NULL,
        last_recalled_at_ms bigint,
        expires_at_ms bigint,
        pinned boolean NOT NULL DEFAULT false,
        supersedes text NOT NULL DEFAULT '',
        content_hash text NOT NULL,
        size integer NOT NULL,
        tsv tsvector GENERATED ALWAYS AS (
            setweight(to_tsvector({cfg}, regexp_replace(title, """
    + _SPLIT
    + """)), 'A') ||
            setweight(to_tsvector({cfg}, regexp_replace(tags, """
    + _SPLIT
    + """)), 'B') ||
            setweight(to_tsvector({cfg}, regexp_replace(body, """
    + _SPLIT
    + """)), 'C')
        ) STORED)""",
    """CREATE UNIQUE INDEX IF NOT EXISTS memory_documents_hash
        ON {schema}.memory_documents (agent_id, scope, scope_key, content_hash)""",
    """CREATE INDEX IF NOT EXISTS memory_documents_scope
        ON {schema}.memory_documents (agent_id, scope, scope_key, pinned, kind, updated_at_ms)""",
    """CREATE INDEX IF NOT EXISTS memory_documents_summaries
        ON {schema}.memory_documents (pinned, kind, updated_at_ms)""",
    """CREATE INDEX IF NOT EXISTS memory_documents_recalled
        ON {schema}.memory_documents (pinned, coalesce(last_recalled_at_ms, updated_at_ms))""",
    """CREATE INDEX IF NOT EXISTS memory_documents_expiry
        ON {schema}.memory_documents (expires_at_ms) WHERE expires_at_ms IS NOT NULL""",
    """CREATE INDEX IF NOT EXISTS memory_documents_tsv
        ON {schema}.memory_documents USING gin (tsv)""",
    """CREATE TABLE IF NOT EXISTS {schema}.memory_scopes (
        agent_id text NOT NULL, scope text NOT NULL, scope_key text NOT NULL,
        docs bigint NOT NULL, bytes bigint NOT NULL,
        PRIMARY KEY (agent_id, scope, scope_key))""",
    """CREATE TABLE IF NOT EXISTS {schema}.memory_totals (
        one integer PRIMARY KEY CHECK (one = 1), docs bigint NOT NULL, bytes bigint NOT NULL)""",
    """INSERT INTO {schema}.memory_totals VALUES (1, 0, 0) ON CONFLICT DO NOTHING""",
    """CREATE TABLE IF NOT EXISTS {schema}.memory_counters (
        name text PRIMARY KEY, value bigint NOT NULL)""",
    """CREATE OR REPLACE FUNCTION {schema}.memory_documents_count() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                INSERT INTO {schema}.memory_scopes
                    VALUES (NEW.agent_id, NEW.scope, NEW.scope_key, 1, NEW.size)
                    ON CONFLICT (agent_id, scope, scope_key) DO UPDATE SET
                    docs = {schema}.memory_scopes.docs + 1,
                    bytes = {schema}.memory_scopes.bytes + excluded.bytes;
                UPDATE {schema}.memory_totals SET docs = docs + 1, bytes = bytes + NEW.size;
                RETURN NEW;
            END IF;
            UPDATE {schema}.memory_scopes SET docs = docs - 1, bytes = bytes - OLD.size
                WHERE agent_id = OLD.agent_id AND scope = OLD.scope
                AND scope_key = OLD.scope_key;
            UPDATE {schema}.memory_totals SET docs = docs - 1, bytes = bytes - OLD.size;
            RETURN OLD;
        END $$""",
    """CREATE OR REPLACE TRIGGER memory_documents_count
        AFTER INSERT OR DELETE ON {schema}.memory_documents
        FOR EACH ROW EXECUTE FUNCTION {schema}.memory_documents_count()""",
    """CREATE TABLE IF NOT EXISTS {schema}.memory_meta (
        name text PRIMARY KEY, value text NOT NULL)""",
)

_COLUMNS: Final = (
    "doc_id, kind, scope, scope_key, agent_id, title, body, tags, source, created_at_ms, "
    "updated_at_ms, last_recalled_at_ms, expires_at_ms, pinned, supersedes, content_hash"
)
_D_COLUMNS: Final = ", ".join(f"d.{c.strip()}" for c in _COLUMNS.split(","))
_CANDIDATES: Final = 40
_PIN_BOOST: Final = 1.25
#: ts_rank_cd weights {D, C, B, A}: body 1, tags 2, title 3 (the SQLite bm25 weights);
#: normalization 1 divides by 1 + log(length), as bm25 favours the shorter of two matches.
_RANK: Final = "ts_rank_cd(array[0.1, 0.33, 0.67, 1.0]::float4[], d.tsv, q.q, 1)"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _document(row: tuple[Any, ...] | Any) -> MemoryDocument:
    (doc_id, kind, scope, scope_key, agent_id, title, body, tags, source, created, updated,
     recalled, expires, pinned, supersedes, content_hash) = row  # fmt: skip
    return MemoryDocument(
        doc_id=doc_id,
        kind=kind,
        scope=scope,
        scope_key=scope_key,
        agent_id=agent_id,
        title=title,
        body=body,
        tags=tuple(tags.split()) if tags else (),
        source=source,
        created_at_ms=created,
        updated_at_ms=updated,
        last_recalled_at_ms=recalled,
        expires_at_ms=expires,
        pinned=bool(pinned),
        supersedes=tuple(supersedes.split()) if supersedes else (),
        content_hash=content_hash,
    )


def _visible(ctx: MemoryContext, scope: str | None) -> tuple[str, list[Any]]:
    """The SQL condition (on alias ``d``) confining a read to the context's scopes."""
    keys = ctx.narrow(scope)
    ors = " OR ".join("(d.scope = %s AND d.scope_key = %s)" for _ in keys)
    params: list[Any] = [ctx.agent_id]
    for name, key in keys.items():
        params += [name, key]
    return f"d.agent_id = %s AND ({ors})", params


def _check_text(value: str) -> None:
    if "\x00" in value:  # prepare() refuses NUL already; PostgreSQL text cannot hold one
        raise MemoryUnavailableError("PostgreSQL text cannot hold NUL characters")


class PostgresMemoryStore:
    """The :class:`~lemon_memory.MemoryStore` of a shared PostgreSQL store (see the module
    docstring). Open with ``await PostgresMemoryStore.open(runner)``."""

    backend = "postgres"

    def __init__(
        self,
        runner: PgRunner,
        *,
        max_docs_per_scope: int = 500,
        max_bytes_per_scope: int = 2 * 1024 * 1024,
        max_docs: int = 50_000,
        max_bytes: int = 256 * 1024 * 1024,
        sweep_batch: int = 1000,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self._runner = runner
        self._schema = runner.schema
        self._limits = (max_docs_per_scope, max_bytes_per_scope, max_docs, max_bytes)
        self._sweep_batch = sweep_batch
        self._clock = clock
        self._unaccent = False
        self._cfg = ""
        self._sql: dict[str, str] = {}

    @classmethod
    async def open(cls, runner: PgRunner, **options: Any) -> PostgresMemoryStore:
        """Create the memory tables in ``runner``'s schema (idempotent, under an advisory
        lock) and return the store; ``MemoryUnavailableError`` when the server fails."""
        store = cls(runner, **options)
        await store._call(store._migrate)
        store._prepare_sql()
        return store

    @property
    def schema(self) -> str:
        return self._schema

    @property
    def unaccent(self) -> bool:
        """Whether diacritics are removed (the ``unaccent`` extension was available)."""
        return self._unaccent

    def _q(self, template: str) -> str:
        return (
            sql.SQL(template)
            .format(schema=sql.Identifier(self._schema), cfg=sql.Literal(self._cfg))
            .as_string(None)
        )

    def _prepare_sql(self) -> None:
        q = self._q
        self._sql = {
            "lock": q("SELECT docs, bytes FROM {schema}.memory_totals WHERE one = 1 FOR UPDATE"),
            "by_hash": q(
                f"SELECT {_COLUMNS} FROM {{schema}}.memory_documents WHERE agent_id = %s "
                "AND scope = %s AND scope_key = %s AND content_hash = %s"
            ),
            "refresh": q(
                "UPDATE {schema}.memory_documents SET updated_at_ms = %s, "
                "pinned = pinned OR %s, expires_at_ms = %s WHERE doc_id = %s"
            ),
            "insert": q(
                "INSERT INTO {schema}.memory_documents (doc_id, kind, scope, scope_key, "
                "agent_id, title, body, tags, source, created_at_ms, updated_at_ms, "
                "expires_at_ms, pinned, content_hash, size) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            ),
            "scope_size": q(
                "SELECT docs, bytes FROM {schema}.memory_scopes WHERE agent_id = %s "
                "AND scope = %s AND scope_key = %s"
            ),
            "bump": q(
                "INSERT INTO {schema}.memory_counters VALUES (%s, %s) ON CONFLICT (name) "
                "DO UPDATE SET value = {schema}.memory_counters.value + excluded.value"
            ),
            "delete_id": q("DELETE FROM {schema}.memory_documents WHERE id = %s"),
            "touch": q(
                "UPDATE {schema}.memory_documents SET last_recalled_at_ms = %s WHERE id IN "
                "(SELECT id FROM {schema}.memory_documents WHERE doc_id = ANY(%s) "
                "ORDER BY id FOR UPDATE SKIP LOCKED)"
            ),
        }
        scoped = "agent_id = %s AND scope = %s AND scope_key = %s"
        for prefix, where in (("scope", scoped), ("store", "true")):
            for reason, cond in (
                ("expired", "expires_at_ms IS NOT NULL AND expires_at_ms <= %s LIMIT 1"),
                ("run_summary", "NOT pinned AND kind = 'run_summary' ORDER BY updated_at_ms "
                 "LIMIT 1"),
                ("explicit", "NOT pinned ORDER BY coalesce(last_recalled_at_ms, updated_at_ms) "
                 "LIMIT 1"),
            ):  # fmt: skip
                self._sql[f"evict_{prefix}_{reason}"] = q(
                    f"SELECT id FROM {{schema}}.memory_documents WHERE {where} AND {cond}"
                )

    # -- plumbing ----------------------------------------------------------------------------

    async def _call(self, fn: Callable[[Conn], Awaitable[T]]) -> T:
        try:
            return await self._runner.run(fn)
        except (StoreError, psycopg.Error) as exc:
            raise MemoryUnavailableError(f"the memory store failed: {exc}") from exc

    async def _migrate(self, conn: Conn) -> None:
        schema = self._schema
        async with conn.transaction():
            # One lock for every schema: CREATE EXTENSION is database-wide.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (_LOCK,))
            ident = sql.Identifier(schema)
            await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
            cur = await conn.execute(
                "SELECT 1 FROM pg_ts_config c JOIN pg_namespace n ON n.oid = c.cfgnamespace "
                "WHERE n.nspname = %s AND c.cfgname = 'memory_fts'",
                (schema,),
            )
            if await cur.fetchone() is None:
                dictionary = await self._unaccent_dictionary(conn)
                await conn.execute(
                    sql.SQL(
                        "CREATE TEXT SEARCH CONFIGURATION {}.memory_fts (COPY = pg_catalog.english)"
                    ).format(ident)
                )
                if dictionary is not None:
                    await conn.execute(
                        sql.SQL(
                            "ALTER TEXT SEARCH CONFIGURATION {}.memory_fts ALTER MAPPING FOR "
                            "hword, hword_part, word WITH {}, english_stem"
                        ).format(ident, sql.Identifier(*dictionary))
                    )
            cur = await conn.execute(
                "SELECT 1 FROM pg_ts_config_map m JOIN pg_ts_config c ON c.oid = m.mapcfg "
                "JOIN pg_namespace n ON n.oid = c.cfgnamespace JOIN pg_ts_dict d "
                "ON d.oid = m.mapdict WHERE n.nspname = %s AND c.cfgname = 'memory_fts' "
                "AND d.dictname = 'unaccent'",
                (schema,),
            )
            self._unaccent = await cur.fetchone() is not None
            cfg = sql.Literal(f"{sql.Identifier(schema).as_string(None)}.memory_fts")
            self._cfg = sql.Identifier(schema).as_string(None) + ".memory_fts"
            for statement in _SCHEMA:
                await conn.execute(
                    sql.SQL(statement).format(
                        schema=ident, cfg=sql.SQL("{}::regconfig").format(cfg)
                    )
                )
            await conn.execute(
                sql.SQL(
                    "INSERT INTO {}.memory_meta VALUES ('version', %s) "
                    "ON CONFLICT (name) DO NOTHING"
                ).format(ident),
                (str(_VERSION),),
            )

    @staticmethod
    async def _unaccent_dictionary(conn: Conn) -> tuple[str, str] | None:
        """The ``unaccent`` dictionary (schema, name), creating the extension when allowed;
        None when it cannot be had (diacritics then stay significant)."""
        try:
            async with conn.transaction():  # a savepoint: a refusal leaves the migration whole
                await conn.execute("CREATE EXTENSION IF NOT EXISTS unaccent")
        except psycopg.Error:
            pass
        cur = await conn.execute(
            "SELECT n.nspname FROM pg_ts_dict d JOIN pg_namespace n ON n.oid = d.dictnamespace "
            "WHERE d.dictname = 'unaccent' LIMIT 1"
        )
        row = await cur.fetchone()
        return None if row is None else (str(row[0]), "unaccent")

    # -- writes ------------------------------------------------------------------------------

    async def put(self, write: Write) -> MemoryDocument:
        for value in (write.title, write.body, *write.tags):
            _check_text(value)
        now = self._clock()
        s = self._sql

        async def op(conn: Conn) -> MemoryDocument:
            try:
                async with conn.transaction():
                    return await self._put(conn, write, now)
            except ScopeFullError:
                await conn.execute(s["bump"], ("refused_full", 1))
                raise

        return await self._call(op)

    async def _put(self, conn: Conn, w: Write, now: int) -> MemoryDocument:
        s = self._sql
        cur = await conn.execute(s["lock"])
        totals = await cur.fetchone()
        assert totals is not None
        cur = await conn.execute(s["by_hash"], (w.agent_id, w.scope, w.scope_key, w.content_hash))
        row = await cur.fetchone()
        if row is not None:
            await conn.execute(s["refresh"], (now, w.pinned, w.expires_at_ms, row[0]))
            await conn.execute(s["bump"], ("deduplicated", 1))
            old = _document(row)
            return msgspec.structs.replace(
                old, updated_at_ms=now, pinned=old.pinned or w.pinned, expires_at_ms=w.expires_at_ms
            )
        await self._make_room(conn, w, now, (int(totals[0]), int(totals[1])))
        doc_id = new_doc_id()
        await conn.execute(
            s["insert"],
            (doc_id, w.kind, w.scope, w.scope_key, w.agent_id, w.title, w.body,
             " ".join(w.tags), w.source, now, now, w.expires_at_ms, w.pinned,
             w.content_hash, w.size),
        )  # fmt: skip
        if w.redactions:
            await conn.execute(s["bump"], ("redactions", w.redactions))
        return MemoryDocument(
            doc_id=doc_id, kind=w.kind, scope=w.scope, scope_key=w.scope_key,
            agent_id=w.agent_id, title=w.title, body=w.body, tags=w.tags, source=w.source,
            created_at_ms=now, updated_at_ms=now, expires_at_ms=w.expires_at_ms,
            pinned=w.pinned, content_hash=w.content_hash,
        )  # fmt: skip

    async def _make_room(self, conn: Conn, w: Write, now: int, totals: tuple[int, int]) -> None:
        """Evict until ``w`` fits (the SQLite backend's order); ScopeFullError when only
        pinned documents are left."""
        max_scope_docs, max_scope_bytes, max_docs, max_bytes = self._limits
        s = self._sql
        scope_params = (w.agent_id, w.scope, w.scope_key)
        for prefix, limits, what in (
            ("scope", (max_scope_docs, max_scope_bytes), "this scope"),
            ("store", (max_docs, max_bytes), "the memory store"),
        ):
            while True:
                if prefix == "store":
                    docs, size = totals
                else:
                    cur = await conn.execute(s["scope_size"], scope_params)
                    found = await cur.fetchone()
                    docs, size = (int(found[0]), int(found[1])) if found else (0, 0)
                if docs + 1 <= limits[0] and size + w.size <= limits[1]:
                    break
                if not await self._evict_one(conn, prefix, scope_params, now):
                    raise ScopeFullError(
                        f"{what} is full ({docs} documents, {size} bytes) and every document "
                        "in it is pinned: forget or unpin one (lemon memory list / forget) "
                        "before remembering more"
                    )
                if prefix == "store":
                    cur = await conn.execute(s["lock"])
                    again = await cur.fetchone()
                    assert again is not None
                    totals = (int(again[0]), int(again[1]))

    async def _evict_one(
        self, conn: Conn, prefix: str, scope_params: tuple[str, str, str], now: int
    ) -> bool:
        s = self._sql
        params: tuple[Any, ...] = scope_params if prefix == "scope" else ()
        for reason in ("expired", "run_summary", "explicit"):
            extra: tuple[Any, ...] = (now,) if reason == "expired" else ()
            cur = await conn.execute(s[f"evict_{prefix}_{reason}"], (*params, *extra))
            found = await cur.fetchone()
            if found is not None:
                await conn.execute(s["delete_id"], (found[0],))
                await conn.execute(s["bump"], (f"evicted_{reason}", 1))
                return True
        return False

    async def forget(self, ctx: MemoryContext, doc_id: str) -> None:
        where, params = _visible(ctx, None)
        query = self._q(
            f"DELETE FROM {{schema}}.memory_documents AS d WHERE d.doc_id = %s AND {where}"
        )

        async def op(conn: Conn) -> int:
            async with conn.transaction():
                await conn.execute(self._sql["lock"])
                cur = await conn.execute(query, (doc_id, *params))
                return cur.rowcount

        if await self._call(op) == 0:
            raise ScopeError(
                f"no document {doc_id!r} in the scopes this run can see (session, "
                "project, agent, user of this run): recall first to find its id"
            )

    async def forget_any(self, doc_id: str) -> bool:
        query = self._q("DELETE FROM {schema}.memory_documents WHERE doc_id = %s")

        async def op(conn: Conn) -> bool:
            async with conn.transaction():
                await conn.execute(self._sql["lock"])
                cur = await conn.execute(query, (doc_id,))
                return cur.rowcount > 0

        return await self._call(op)

    async def sweep(self, now_ms: int | None = None) -> int:
        now = self._clock() if now_ms is None else now_ms
        query = self._q(
            "DELETE FROM {schema}.memory_documents WHERE id IN (SELECT id FROM "
            "{schema}.memory_documents WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= %s "
            "LIMIT %s)"
        )

        async def op(conn: Conn) -> int:
            async with conn.transaction():
                await conn.execute(self._sql["lock"])
                cur = await conn.execute(query, (now, self._sweep_batch))
                if cur.rowcount:
                    await conn.execute(self._sql["bump"], ("swept", cur.rowcount))
                return cur.rowcount

        return await self._call(op)

    # -- reads -------------------------------------------------------------------------------

    async def recall(
        self, ctx: MemoryContext, query: str, *, scope: str | None = None, limit: int = 5
    ) -> RecallResult:
        where, params = _visible(ctx, scope)  # ScopeError here, before any SQL
        return await self._search(query, where, params, limit, touch=True)

    async def search_all(self, query: str, *, limit: int = 10) -> RecallResult:
        return await self._search(query, "true", [], limit, touch=False)

    async def _search(
        self, query: str, where: str, params: list[Any], limit: int, *, touch: bool
    ) -> RecallResult:
        expression = tsquery(query)
        if expression is None:
            return RecallResult(empty_query=True)
        limit = max(1, min(limit, MAX_RECALL))
        now = self._clock()
        statement = self._q(
            f"SELECT {_D_COLUMNS}, {_RANK} FROM {{schema}}.memory_documents AS d, "
            "to_tsquery({cfg}::regconfig, %s) AS q(q) WHERE d.tsv @@ q.q "
            f"AND {where} AND (d.expires_at_ms IS NULL OR d.expires_at_ms > %s) "
            f"ORDER BY {_RANK} DESC LIMIT %s"
        )
        args = (expression, *params, now, max(_CANDIDATES, limit * 4))

        async def op(conn: Conn) -> list[Any]:
            cur = await conn.execute(statement, args)
            rows = await cur.fetchall()
            hits = _rank(rows, now)[:limit]
            if touch and hits:
                await conn.execute(self._sql["touch"], (now, [h.document.doc_id for h in hits]))
            return hits

        return RecallResult(hits=tuple(await self._call(op)))

    async def get(self, doc_id: str) -> MemoryDocument | None:
        query = self._q(f"SELECT {_COLUMNS} FROM {{schema}}.memory_documents WHERE doc_id = %s")

        async def op(conn: Conn) -> Any:
            cur = await conn.execute(query, (doc_id,))
            return await cur.fetchone()

        row = await self._call(op)
        return None if row is None else _document(row)

    async def list_documents(
        self, *, agent_id: str | None = None, scope: str | None = None, limit: int = 100
    ) -> list[MemoryDocument]:
        conds, params = ["true"], []
        if agent_id is not None:
            conds.append("agent_id = %s")
            params.append(agent_id)
        if scope is not None:
            conds.append("scope = %s")
            params.append(scope)
        query = self._q(
            f"SELECT {_COLUMNS} FROM {{schema}}.memory_documents WHERE {' AND '.join(conds)} "
            "ORDER BY updated_at_ms DESC, id DESC LIMIT %s"
        )

        async def op(conn: Conn) -> list[Any]:
            cur = await conn.execute(query, (*params, limit))
            return await cur.fetchall()

        return [_document(r) for r in await self._call(op)]

    async def statistics(self) -> MemoryStatistics:
        from lemon_memory._sqlite import _statistics

        totals = self._q("SELECT docs, bytes FROM {schema}.memory_totals WHERE one = 1")
        scopes = self._q("SELECT scope, sum(docs) FROM {schema}.memory_scopes GROUP BY scope")
        counters = self._q("SELECT name, value FROM {schema}.memory_counters")

        async def op(conn: Conn) -> tuple[Any, list[Any], list[Any]]:
            cur = await conn.execute(totals)
            row = await cur.fetchone()
            cur = await conn.execute(scopes)
            per_scope = await cur.fetchall()
            cur = await conn.execute(counters)
            return row, per_scope, await cur.fetchall()

        row, per_scope, names = await self._call(op)
        return _statistics(
            self.backend,
            int(row[0]),
            int(row[1]),
            {str(k): int(v) for k, v in per_scope},
            {str(k): int(v) for k, v in names},
            self._limits,
        )

    async def index_count(self) -> int:
        """Rows with an index entry (tests: no row without its ``tsv``, none left over)."""
        query = self._q("SELECT count(*) FROM {schema}.memory_documents WHERE tsv IS NOT NULL")

        async def op(conn: Conn) -> int:
            cur = await conn.execute(query)
            row = await cur.fetchone()
            return 0 if row is None else int(row[0])

        return await self._call(op)

    async def close(self) -> None:
        """Nothing of its own to close: the pool is the shared store's."""


def _rank(rows: list[Any], now: int) -> list[RecallHit]:
    hits: list[RecallHit] = []
    for row in rows:
        doc = _document(row[:-1])
        lexical = float(row[-1])
        weight = SCOPE_WEIGHTS[doc.scope]
        fade = decay(now - doc.updated_at_ms)
        score = lexical * weight * fade * (_PIN_BOOST if doc.pinned else 1.0)
        hits.append(
            RecallHit(document=doc, score=score, lexical=lexical, scope_weight=weight, decay=fade)
        )
    hits.sort(key=lambda h: -h.score)
    return hits
