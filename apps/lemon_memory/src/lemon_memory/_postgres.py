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

The embeddings lane (given an :class:`~lemon_memory.embeddings.Embedder`): each document's
vector (float32 bytes) is a row of ``memory_vectors``, whose foreign key deletes it in the
document's own transaction (forget, eviction, sweep, merge); recall ranks the visible,
unexpired rows' vectors by brute-force cosine (computed here, off the event loop) and fuses
that ranking with the lexical and identifier lanes by reciprocal rank (k = 60). When a lane
besides the lexical one runs, the recall stamp is written after the fusion, on the rows
actually returned.

This module imports psycopg: it is imported only when a PostgreSQL store is configured.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, LiteralString, Protocol, TypeVar, runtime_checkable

import msgspec
import psycopg
from psycopg import sql

from lemon_core.store.errors import StoreError
from lemon_memory._fusion import dense_top, fuse_lanes, identifiers, like_pattern
from lemon_memory._rows import CANDIDATES as _CANDIDATES
from lemon_memory._rows import COLUMNS as _COLUMNS
from lemon_memory._rows import PIN_BOOST as _PIN_BOOST
from lemon_memory._rows import document as _document
from lemon_memory._rows import now_ms as _now_ms
from lemon_memory._rows import visible
from lemon_memory._versions import (
    MAX_VERSIONS_PER_SCOPE,
    VERSION_TTL_MS,
    Change,
    decode,
    encode,
    new_change_id,
    size_of,
)
from lemon_memory.documents import (
    SCOPE_WEIGHTS,
    MemoryContext,
    MemoryDocument,
    MemoryStatistics,
    RecallHit,
    RecallResult,
    Undone,
    Version,
)
from lemon_memory.embeddings import Embedder, document_text, vector_text
from lemon_memory.embeddings import status as embeddings_status
from lemon_memory.errors import MemoryUnavailableError, ScopeError, ScopeFullError
from lemon_memory.query import tsquery
from lemon_memory.store import HALF_LIFE_MS, MAX_RECALL, Write, new_doc_id

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
    """CREATE OR REPLACE FUNCTION {schema}.memory_bump(p_name text, p_by bigint) RETURNS void
        LANGUAGE sql AS $$
        INSERT INTO {schema}.memory_counters VALUES (p_name, p_by) ON CONFLICT (name)
            DO UPDATE SET value = {schema}.memory_counters.value + excluded.value
        $$""",
    # One eviction, in the bounds' order: expired, then unpinned run summaries oldest first,
    # then unpinned explicit memories least recently recalled; NULL when only pinned ones are
    # left. ``p_scoped``: within the writer's scope, else store-wide.
    """CREATE OR REPLACE FUNCTION {schema}.memory_evict_one(
            p_agent text, p_scope text, p_key text, p_now bigint, p_scoped boolean)
        RETURNS bigint LANGUAGE plpgsql AS $$
        DECLARE v bigint; why text;
        BEGIN
            IF p_scoped THEN
                SELECT d.id INTO v FROM {schema}.memory_documents d WHERE d.agent_id = p_agent
                    AND d.scope = p_scope AND d.scope_key = p_key
                    AND d.expires_at_ms IS NOT NULL AND d.expires_at_ms <= p_now LIMIT 1;
                why := 'expired';
                IF v IS NULL THEN
                    SELECT d.id INTO v FROM {schema}.memory_documents d
                        WHERE d.agent_id = p_agent AND d.scope = p_scope AND d.scope_key = p_key
                        AND NOT d.pinned AND d.kind = 'run_summary'
                        ORDER BY d.updated_at_ms LIMIT 1;
                    why := 'run_summary';
                END IF;
                IF v IS NULL THEN
                    SELECT d.id INTO v FROM {schema}.memory_documents d
                        WHERE d.agent_id = p_agent AND d.scope = p_scope AND d.scope_key = p_key
                        AND NOT d.pinned
                        ORDER BY coalesce(d.last_recalled_at_ms, d.updated_at_ms) LIMIT 1;
                    why := 'explicit';
                END IF;
            ELSE
                SELECT d.id INTO v FROM {schema}.memory_documents d
                    WHERE d.expires_at_ms IS NOT NULL AND d.expires_at_ms <= p_now LIMIT 1;
                why := 'expired';
                IF v IS NULL THEN
                    SELECT d.id INTO v FROM {schema}.memory_documents d
                        WHERE NOT d.pinned AND d.kind = 'run_summary'
                        ORDER BY d.updated_at_ms LIMIT 1;
                    why := 'run_summary';
                END IF;
                IF v IS NULL THEN
                    SELECT d.id INTO v FROM {schema}.memory_documents d WHERE NOT d.pinned
                        ORDER BY coalesce(d.last_recalled_at_ms, d.updated_at_ms) LIMIT 1;
                    why := 'explicit';
                END IF;
            END IF;
            IF v IS NOT NULL THEN
                DELETE FROM {schema}.memory_documents d WHERE d.id = v;
                PERFORM {schema}.memory_bump('evicted_' || why, 1);
            END IF;
            RETURN v;
        END $$""",
    # A whole remember in one call (one round trip, one transaction): the writers' lock, the
    # upsert by content hash, the bounds with their evictions, the insert and its counters.
    # o_outcome: inserted | deduplicated | scope_full | store_full (with o_docs, o_bytes).
    """CREATE OR REPLACE FUNCTION {schema}.memory_put(
            p_doc_id text, p_kind text, p_scope text, p_key text, p_agent text, p_title text,
            p_body text, p_tags text, p_source text, p_now bigint, p_expires bigint,
            p_pinned boolean, p_hash text, p_size integer, p_redactions integer,
            p_scope_docs bigint, p_scope_bytes bigint, p_docs bigint, p_bytes bigint)
        RETURNS TABLE (o_outcome text, o_doc_id text, o_created bigint, o_pinned boolean,
            o_docs bigint, o_bytes bigint)
        LANGUAGE plpgsql AS $$
        DECLARE n bigint; b bigint; old record;
        BEGIN
            PERFORM 1 FROM {schema}.memory_totals t WHERE t.one = 1 FOR UPDATE;
            SELECT d.doc_id, d.created_at_ms, d.pinned INTO old FROM {schema}.memory_documents d
                WHERE d.agent_id = p_agent AND d.scope = p_scope AND d.scope_key = p_key
                AND d.content_hash = p_hash;
            IF FOUND THEN
                UPDATE {schema}.memory_documents d SET updated_at_ms = p_now,
                    pinned = d.pinned OR p_pinned, expires_at_ms = p_expires
                    WHERE d.doc_id = old.doc_id;
                PERFORM {schema}.memory_bump('deduplicated', 1);
                RETURN QUERY SELECT 'deduplicated'::text, old.doc_id::text,
                    old.created_at_ms::bigint, (old.pinned OR p_pinned)::boolean, 0::bigint,
                    0::bigint;
                RETURN;
            END IF;
            LOOP
                SELECT s.docs, s.bytes INTO n, b FROM {schema}.memory_scopes s
                    WHERE s.agent_id = p_agent AND s.scope = p_scope AND s.scope_key = p_key;
                IF NOT FOUND THEN n := 0; b := 0; END IF;
                EXIT WHEN n + 1 <= p_scope_docs AND b + p_size <= p_scope_bytes;
                IF {schema}.memory_evict_one(p_agent, p_scope, p_key, p_now, true) IS NULL THEN
                    PERFORM {schema}.memory_bump('refused_full', 1);
                    RETURN QUERY SELECT 'scope_full'::text, NULL::text, NULL::bigint,
                        NULL::boolean, n, b;
                    RETURN;
                END IF;
            END LOOP;
            LOOP
                SELECT t.docs, t.bytes INTO n, b FROM {schema}.memory_totals t WHERE t.one = 1;
                EXIT WHEN n + 1 <= p_docs AND b + p_size <= p_bytes;
                IF {schema}.memory_evict_one(p_agent, p_scope, p_key, p_now, false) IS NULL THEN
                    PERFORM {schema}.memory_bump('refused_full', 1);
                    RETURN QUERY SELECT 'store_full'::text, NULL::text, NULL::bigint,
                        NULL::boolean, n, b;
                    RETURN;
                END IF;
            END LOOP;
            INSERT INTO {schema}.memory_documents (doc_id, kind, scope, scope_key, agent_id,
                title, body, tags, source, created_at_ms, updated_at_ms, expires_at_ms, pinned,
                content_hash, size) VALUES (p_doc_id, p_kind, p_scope, p_key, p_agent, p_title,
                p_body, p_tags, p_source, p_now, p_now, p_expires, p_pinned, p_hash, p_size);
            IF p_redactions > 0 THEN
                PERFORM {schema}.memory_bump('redactions', p_redactions);
            END IF;
            RETURN QUERY SELECT 'inserted'::text, p_doc_id, p_now, p_pinned, 0::bigint,
                0::bigint;
        END $$""",
    # The embeddings lane's vectors: deleted with their document, in its transaction.
    """CREATE TABLE IF NOT EXISTS {schema}.memory_vectors (
        id bigint PRIMARY KEY REFERENCES {schema}.memory_documents (id) ON DELETE CASCADE,
        vec bytea NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS {schema}.memory_meta (
        name text PRIMARY KEY, value text NOT NULL)""",
    # The previous content of documents a forget or a merge removed or changed (_versions),
    # written in the change's transaction.
    """CREATE TABLE IF NOT EXISTS {schema}.memory_versions (
        seq bigserial PRIMARY KEY,
        change_id text NOT NULL, change text NOT NULL, doc_id text NOT NULL,
        agent_id text NOT NULL, scope text NOT NULL, scope_key text NOT NULL,
        document text NOT NULL, at_ms bigint NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS memory_versions_change
        ON {schema}.memory_versions (change_id)""",
    """CREATE INDEX IF NOT EXISTS memory_versions_doc ON {schema}.memory_versions (doc_id, seq)""",
    """CREATE INDEX IF NOT EXISTS memory_versions_scope
        ON {schema}.memory_versions (agent_id, scope, scope_key, seq)""",
    """CREATE INDEX IF NOT EXISTS memory_versions_at ON {schema}.memory_versions (at_ms)""",
)

_D_COLUMNS: Final = ", ".join(f"d.{c.strip()}" for c in _COLUMNS.split(","))
#: ts_rank_cd weights {D, C, B, A}: body 1, tags 2, title 3 (the SQLite bm25 weights);
#: normalization 1 divides by 1 + log(length), as bm25 favours the shorter of two matches.
_RANK: Final = "ts_rank_cd(array[0.1, 0.33, 0.67, 1.0]::float4[], d.tsv, {query}, 1)"
#: The scope weights and the recency decay of lemon_memory.store, in SQL (the ranking is
#: done by the server, so a recall is one statement).
_WEIGHT: Final = (
    "(CASE d.scope "
    + " ".join(f"WHEN '{k}' THEN {v}" for k, v in SCOPE_WEIGHTS.items())
    + " ELSE 0 END)"
)
_DECAY: Final = (
    f"(0.5 + 0.5 * power(0.5, greatest(0, %s - d.updated_at_ms)::float8 / {HALF_LIFE_MS}))"
)


#: The text the identifier lane searches (``pg_trgm``'s GIN index is on this expression).
_TEXT: Final = "lower(d.title || ' ' || d.tags || ' ' || d.body)"
#: The identifier lane: rows of the visible scopes whose text holds one of the identifiers
#: (LIKE patterns), most identifiers first, then by scope weight, decay and pin.
_TRIGRAM: Final = (
    f"SELECT * FROM (SELECT {_D_COLUMNS}, d.id AS rid, {_WEIGHT} AS weight, {_DECAY} AS fade, "
    f"(SELECT count(*) FROM unnest(%s::text[]) AS p(p) WHERE {_TEXT} LIKE p.p) AS n "
    f"FROM {{{{schema}}}}.memory_documents AS d WHERE {_TEXT} LIKE ANY (%s::text[]) "
    "AND {where} AND (d.expires_at_ms IS NULL OR d.expires_at_ms > %s)) AS t "
    f"ORDER BY t.n DESC, t.weight * t.fade * (CASE WHEN t.pinned THEN {_PIN_BOOST} ELSE 1 END) "
    "DESC, t.rid LIMIT %s"
)


def _lexical_hits(rows: Sequence[Any]) -> list[RecallHit]:
    """The lexical statement's rows (16 columns, id, ts_rank_cd, weight, decay) as hits,
    best first."""
    hits = []
    for row in rows:
        doc = _document(row[:16])
        lexical, weight, fade = float(row[17]), float(row[18]), float(row[19])
        score = lexical * weight * fade * (_PIN_BOOST if doc.pinned else 1.0)
        hits.append(
            RecallHit(document=doc, score=score, lexical=lexical, scope_weight=weight,
                      decay=fade)
        )  # fmt: skip
    hits.sort(key=lambda h: -h.score)
    return hits


def _visible(ctx: MemoryContext, scope: str | None) -> tuple[str, list[Any]]:
    return visible(ctx, scope, "%s")


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
        embedder: Embedder | None = None,
    ) -> None:
        self._embedder = embedder
        self._runner = runner
        self._schema = runner.schema
        self._limits = (max_docs_per_scope, max_bytes_per_scope, max_docs, max_bytes)
        self._sweep_batch = sweep_batch
        self._clock = clock
        self._unaccent = False
        self._trigram = False
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
    def trigram(self) -> bool:
        """Whether the identifier lane has ``pg_trgm``'s index."""
        return self._trigram

    @property
    def unaccent(self) -> bool:
        """Whether diacritics are removed (the ``unaccent`` extension was available)."""
        return self._unaccent

    def _q(self, template: str) -> str:
        return (
            sql.SQL(template)
            .format(
                schema=sql.Identifier(self._schema),
                cfg=sql.Literal(self._cfg),
                query=sql.SQL("to_tsquery({}::regconfig, %s)").format(sql.Literal(self._cfg)),
            )
            .as_string(None)
        )

    def _prepare_sql(self) -> None:
        q = self._q
        self._sql = {
            "lock": q("SELECT docs, bytes FROM {schema}.memory_totals WHERE one = 1 FOR UPDATE"),
            "put": q(
                "SELECT * FROM {schema}.memory_put(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
                "%s, %s, %s, %s, %s, %s, %s, %s)"
            ),
            "bump": q("SELECT {schema}.memory_bump(%s, %s)"),
            "vector": q(
                "INSERT INTO {schema}.memory_vectors (id, vec) SELECT id, %s FROM "
                "{schema}.memory_documents WHERE doc_id = %s ON CONFLICT (id) DO NOTHING"
            ),
            "unvectored": q(
                "SELECT d.id, d.title, d.tags, d.body FROM {schema}.memory_documents AS d "
                "WHERE NOT EXISTS (SELECT 1 FROM {schema}.memory_vectors AS v WHERE v.id = d.id) "
                "ORDER BY d.id LIMIT %s"
            ),
            "vectors": q(  # a row forgotten meanwhile gets none (the join)
                "INSERT INTO {schema}.memory_vectors (id, vec) SELECT d.id, x.vec FROM "
                "unnest(%s::bigint[], %s::bytea[]) AS x(id, vec) JOIN {schema}.memory_documents "
                "AS d ON d.id = x.id ON CONFLICT (id) DO NOTHING"
            ),
            "vector_count": q("SELECT count(*) FROM {schema}.memory_vectors"),
            "version": q(
                "INSERT INTO {schema}.memory_versions (change_id, change, doc_id, agent_id, "
                "scope, scope_key, document, at_ms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
            ),
            "version_bound": q(
                "DELETE FROM {schema}.memory_versions WHERE agent_id = %s AND scope = %s AND "
                "scope_key = %s AND seq <= (SELECT seq FROM {schema}.memory_versions WHERE "
                "agent_id = %s AND scope = %s AND scope_key = %s ORDER BY seq DESC LIMIT 1 "
                "OFFSET %s)"
            ),
            "version_expire": q("DELETE FROM {schema}.memory_versions WHERE at_ms < %s"),
            "version_count": q("SELECT count(*) FROM {schema}.memory_versions"),
            "undo_last": q(
                "SELECT seq, change_id, change, document FROM {schema}.memory_versions WHERE "
                "change_id = (SELECT change_id FROM {schema}.memory_versions WHERE at_ms >= %s "
                "ORDER BY seq DESC LIMIT 1) ORDER BY seq"
            ),
            "undo_doc": q(
                "SELECT seq, change_id, change, document FROM {schema}.memory_versions WHERE "
                "doc_id = %s AND at_ms >= %s ORDER BY seq DESC LIMIT 1"
            ),
            "undo_kept": q(
                "UPDATE {schema}.memory_documents SET supersedes = %s WHERE doc_id = %s AND "
                "content_hash = %s RETURNING " + _COLUMNS
            ),
            "undo_drop": q("DELETE FROM {schema}.memory_documents WHERE doc_id = %s"),
            "undo_insert": q(
                "INSERT INTO {schema}.memory_documents (doc_id, kind, scope, scope_key, "
                "agent_id, title, body, tags, source, created_at_ms, updated_at_ms, "
                "last_recalled_at_ms, expires_at_ms, pinned, supersedes, content_hash, size) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT DO NOTHING"
            ),
            "history": q(
                "SELECT change_id, change, at_ms, document FROM {schema}.memory_versions WHERE "
                "doc_id = %s AND at_ms >= %s ORDER BY seq DESC LIMIT %s"
            ),
            "versions_used": q("DELETE FROM {schema}.memory_versions WHERE seq = ANY(%s)"),
            "stamp": q(
                "WITH locked AS (SELECT m.id FROM {schema}.memory_documents m WHERE "
                "m.doc_id = ANY(%s) ORDER BY m.id FOR UPDATE SKIP LOCKED) "
                "UPDATE {schema}.memory_documents t SET last_recalled_at_ms = %s FROM "
                "(SELECT set_config('synchronous_commit', 'off', true)) AS nosync "
                "WHERE t.id IN (SELECT id FROM locked)"
            ),
        }

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
            trgm = await self._trigram_schema(conn)
            if trgm is not None:  # the identifier lane's index (else LIKE reads the scope)
                await conn.execute(
                    sql.SQL(
                        "CREATE INDEX IF NOT EXISTS memory_documents_trgm ON {}.memory_documents "
                        "USING gin ((lower(title || ' ' || tags || ' ' || body)) {}.gin_trgm_ops)"
                    ).format(ident, sql.Identifier(trgm))
                )
            self._trigram = trgm is not None
            await conn.execute(
                sql.SQL(
                    "INSERT INTO {}.memory_meta VALUES ('version', %s) "
                    "ON CONFLICT (name) DO NOTHING"
                ).format(ident),
                (str(_VERSION),),
            )

    @staticmethod
    async def _trigram_schema(conn: Conn) -> str | None:
        """The schema of ``pg_trgm``'s operator classes, creating the extension when allowed;
        None when it cannot be had (the identifier lane then scans the visible scopes)."""
        try:
            async with conn.transaction():  # a savepoint: a refusal leaves the migration whole
                await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        except psycopg.Error:
            pass
        cur = await conn.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
            "WHERE e.extname = 'pg_trgm'"
        )
        row = await cur.fetchone()
        return None if row is None else str(row[0])

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

    @property
    def embeddings(self) -> str:
        """The embeddings lane: its model, or why it is off."""
        return embeddings_status(self._embedder)

    def attach(self, embedder: Embedder | None) -> None:
        """Turn the embeddings lane on (or off with ``None``); :meth:`backfill` gives the
        documents stored before it their vectors."""
        self._embedder = embedder

    async def backfill(self, batch: int = 64) -> int:
        """Give every document without a vector its vector, ``batch`` at a time (encoding
        off the event loop, between two calls on the pool); how many were encoded."""
        added = 0
        while (embedder := self._embedder) is not None:

            async def pick(conn: Conn) -> list[Any]:
                cur = await conn.execute(self._sql["unvectored"], (batch,))
                return await cur.fetchall()

            rows = await self._call(pick)
            if not rows:
                break
            vectors = await asyncio.to_thread(
                embedder.encode, [vector_text(r[1], r[2], r[3]) for r in rows]
            )
            ids = [int(r[0]) for r in rows]

            async def store(
                conn: Conn, ids: list[int] = ids, vectors: list[bytes] = vectors
            ) -> None:
                async with conn.transaction():  # the writers' lock: no delete meanwhile
                    await conn.execute(self._sql["lock"])
                    await conn.execute(self._sql["vectors"], (ids, vectors))

            await self._call(store)
            added += len(rows)
        return added

    async def vector_count(self) -> int:
        """Rows of ``memory_vectors`` (tests: none left behind)."""

        async def op(conn: Conn) -> int:
            cur = await conn.execute(self._sql["vector_count"])
            row = await cur.fetchone()
            return 0 if row is None else int(row[0])

        return await self._call(op)

    async def _encode(self, texts: list[str]) -> list[bytes] | None:
        embedder = self._embedder
        if embedder is None:
            return None
        return await asyncio.to_thread(embedder.encode, texts)

    async def put(self, write: Write) -> MemoryDocument:
        w = write
        for value in (w.title, w.body, *w.tags):
            _check_text(value)
        found = await self._encode([document_text(w)])
        vector = found[0] if found else None
        now = self._clock()
        doc_id = new_doc_id()
        args = (doc_id, w.kind, w.scope, w.scope_key, w.agent_id, w.title, w.body,
                " ".join(w.tags), w.source, now, w.expires_at_ms, w.pinned, w.content_hash,
                w.size, w.redactions, *self._limits)  # fmt: skip

        async def op(conn: Conn) -> Any:
            if vector is None:
                cur = await conn.execute(self._sql["put"], args)
                return await cur.fetchone()
            async with conn.transaction():  # the vector in the document's transaction
                cur = await conn.execute(self._sql["put"], args)
                row = await cur.fetchone()
                if row is not None and row[0] in ("inserted", "deduplicated"):
                    await conn.execute(self._sql["vector"], (vector, row[1]))
                return row

        outcome, stored_id, created, pinned, docs, size = await self._call(op)
        if outcome in ("scope_full", "store_full"):
            what = "this scope" if outcome == "scope_full" else "the memory store"
            raise ScopeFullError(
                f"{what} is full ({docs} documents, {size} bytes) and every document in it is "
                "pinned: forget or unpin one (lemon memory list / forget) before remembering "
                "more"
            )
        return MemoryDocument(
            doc_id=stored_id, kind=w.kind, scope=w.scope, scope_key=w.scope_key,
            agent_id=w.agent_id, title=w.title, body=w.body, tags=w.tags, source=w.source,
            created_at_ms=int(created), updated_at_ms=now, expires_at_ms=w.expires_at_ms,
            pinned=bool(pinned), content_hash=w.content_hash,
        )  # fmt: skip

    async def put_many(self, writes: Sequence[Write]) -> list[MemoryDocument]:
        for w in writes:
            for value in (w.title, w.body, *w.tags):
                _check_text(value)
        vectors = await self._encode([document_text(w) for w in writes]) if writes else None

        async def op(conn: Conn) -> list[MemoryDocument]:
            done = []
            async with conn.transaction():  # all or nothing: a full scope rolls back the lot
                for i, w in enumerate(writes):
                    now = self._clock()
                    args = (new_doc_id(), w.kind, w.scope, w.scope_key, w.agent_id, w.title,
                            w.body, " ".join(w.tags), w.source, now, w.expires_at_ms, w.pinned,
                            w.content_hash, w.size, w.redactions, *self._limits)  # fmt: skip
                    cur = await conn.execute(self._sql["put"], args)
                    row = await cur.fetchone()
                    assert row is not None  # memory_put returns one row
                    done.append(self._stored(w, now, row))
                    if vectors is not None:
                        await conn.execute(self._sql["vector"], (vectors[i], row[1]))
            return done

        return await self._call(op)

    def _stored(self, w: Write, now: int, row: Any) -> MemoryDocument:
        outcome, stored_id, created, pinned, docs, size = row
        if outcome in ("scope_full", "store_full"):
            what = "this scope" if outcome == "scope_full" else "the memory store"
            raise ScopeFullError(
                f"{what} is full ({docs} documents, {size} bytes) and every document in it is "
                "pinned: forget or unpin one (lemon memory list / forget) before remembering "
                "more"
            )
        return MemoryDocument(
            doc_id=stored_id, kind=w.kind, scope=w.scope, scope_key=w.scope_key,
            agent_id=w.agent_id, title=w.title, body=w.body, tags=w.tags, source=w.source,
            created_at_ms=int(created), updated_at_ms=now, expires_at_ms=w.expires_at_ms,
            pinned=bool(pinned), content_hash=w.content_hash,
        )  # fmt: skip

    async def forget_scope(
        self, scope: str, *, agent_id: str | None = None, scope_key: str | None = None
    ) -> int:
        conds, params = ["scope = %s"], [scope]
        for column, value in (("agent_id", agent_id), ("scope_key", scope_key)):
            if value is not None:
                conds.append(f"{column} = %s")
                params.append(value)
        query = self._q(
            "DELETE FROM {schema}.memory_documents WHERE " + " AND ".join(conds)
            + " RETURNING " + _COLUMNS
        )  # fmt: skip

        async def op(conn: Conn) -> int:
            async with conn.transaction():
                await conn.execute(self._sql["lock"])
                cur = await conn.execute(query, params)
                gone = [_document(r) for r in await cur.fetchall()]
                await self._keep_versions(conn, "forget_scope", gone)
                return len(gone)

        return await self._call(op)

    async def merge(self, keep_id: str, drop_ids: Sequence[str]) -> bool:
        select = self._q(
            "SELECT " + _COLUMNS + " FROM {schema}.memory_documents WHERE doc_id = %s FOR UPDATE"
        )
        delete = self._q(
            "DELETE FROM {schema}.memory_documents WHERE doc_id = ANY(%s) AND doc_id <> %s "
            "RETURNING " + _COLUMNS
        )
        update = self._q("UPDATE {schema}.memory_documents SET supersedes = %s WHERE doc_id = %s")

        class _Gone(Exception):
            pass

        async def op(conn: Conn) -> bool:
            try:
                async with conn.transaction():
                    await conn.execute(self._sql["lock"])
                    cur = await conn.execute(select, (keep_id,))
                    row = await cur.fetchone()
                    cur = await conn.execute(delete, (list(drop_ids), keep_id))
                    gone = [_document(r) for r in await cur.fetchall()]
                    if row is None or len(gone) != len(drop_ids):
                        raise _Gone
                    await self._keep_versions(conn, "merge", [_document(row), *gone])
                    merged = " ".join(dict.fromkeys([*str(row[14]).split(), *drop_ids]))
                    await conn.execute(update, (merged, keep_id))
                    await conn.execute(self._sql["bump"], ("consolidated", len(drop_ids)))
            except _Gone:
                return False
            return True

        return await self._call(op)

    async def forget(self, ctx: MemoryContext, doc_id: str) -> None:
        where, params = _visible(ctx, None)
        query = self._q(
            f"DELETE FROM {{schema}}.memory_documents AS d WHERE d.doc_id = %s AND {where} "
            f"RETURNING {_COLUMNS}"
        )

        async def op(conn: Conn) -> int:
            async with conn.transaction():
                await conn.execute(self._sql["lock"])
                cur = await conn.execute(query, (doc_id, *params))
                gone = [_document(r) for r in await cur.fetchall()]
                await self._keep_versions(conn, "forget", gone)
                return len(gone)

        if await self._call(op) == 0:
            raise ScopeError(
                f"no document {doc_id!r} in the scopes this run can see (session, "
                "project, agent, user of this run): recall first to find its id"
            )

    async def forget_any(self, doc_id: str) -> bool:
        query = self._q(
            "DELETE FROM {schema}.memory_documents WHERE doc_id = %s RETURNING " + _COLUMNS
        )

        async def op(conn: Conn) -> bool:
            async with conn.transaction():
                await conn.execute(self._sql["lock"])
                cur = await conn.execute(query, (doc_id,))
                gone = [_document(r) for r in await cur.fetchall()]
                await self._keep_versions(conn, "forget", gone)
                return bool(gone)

        return await self._call(op)

    async def _keep_versions(
        self, conn: Conn, change: Change, docs: Sequence[MemoryDocument]
    ) -> None:
        """Record ``docs`` as they are, as one change, in the caller's transaction (which
        holds the writers' lock), then apply the bounds."""
        if not docs:
            return
        now, change_id = self._clock(), new_change_id()
        async with conn.cursor() as cur:
            await cur.executemany(
                self._sql["version"],
                [(change_id, change, d.doc_id, d.agent_id, d.scope, d.scope_key, encode(d), now)
                 for d in docs],
            )  # fmt: skip
        for sid in {(d.agent_id, d.scope, d.scope_key) for d in docs}:
            await conn.execute(self._sql["version_bound"], (*sid, *sid, MAX_VERSIONS_PER_SCOPE))
        await conn.execute(self._sql["version_expire"], (now - VERSION_TTL_MS,))

    async def undo(self, doc_id: str | None = None) -> Undone | None:
        floor = self._clock() - VERSION_TTL_MS

        async def op(conn: Conn) -> Undone | None:
            async with conn.transaction():
                await conn.execute(self._sql["lock"])
                if doc_id is None:
                    cur = await conn.execute(self._sql["undo_last"], (floor,))
                else:
                    cur = await conn.execute(self._sql["undo_doc"], (doc_id, floor))
                rows = await cur.fetchall()
                if not rows:
                    return None
                restored: list[MemoryDocument] = []
                skipped: list[str] = []
                for _seq, _change_id, _change, text in rows:
                    old = decode(text)
                    cur = await conn.execute(  # a merge's kept document: only supersedes
                        self._sql["undo_kept"],
                        (" ".join(old.supersedes), old.doc_id, old.content_hash),
                    )
                    kept = await cur.fetchone()
                    if kept is not None:
                        restored.append(_document(kept))
                        continue
                    await conn.execute(self._sql["undo_drop"], (old.doc_id,))
                    cur = await conn.execute(self._sql["undo_insert"], (
                        old.doc_id, old.kind, old.scope, old.scope_key, old.agent_id,
                        old.title, old.body, " ".join(old.tags), old.source,
                        old.created_at_ms, old.updated_at_ms, old.last_recalled_at_ms,
                        old.expires_at_ms, old.pinned, " ".join(old.supersedes),
                        old.content_hash, size_of(old),
                    ))  # fmt: skip
                    if cur.rowcount != 1:
                        skipped.append(old.doc_id)  # the same text is stored again
                        continue
                    restored.append(old)
                await conn.execute(self._sql["versions_used"], ([r[0] for r in rows],))
                return Undone(change_id=rows[0][1], change=rows[0][2],
                              restored=tuple(restored), skipped=tuple(skipped))  # fmt: skip

        done = await self._call(op)
        if done is not None and done.restored and self._embedder is not None:
            await self.backfill()  # a restored document's vector went with its delete
        return done

    async def history(self, doc_id: str, *, limit: int = 20) -> list[Version]:
        floor = self._clock() - VERSION_TTL_MS

        async def op(conn: Conn) -> list[Any]:
            cur = await conn.execute(self._sql["history"], (doc_id, floor, limit))
            return await cur.fetchall()

        return [Version(change_id=r[0], change=r[1], at_ms=int(r[2]), document=decode(r[3]))
                for r in await self._call(op)]  # fmt: skip

    async def version_count(self) -> int:
        async def op(conn: Conn) -> int:
            cur = await conn.execute(self._sql["version_count"])
            row = await cur.fetchone()
            return int(row[0]) if row else 0

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
        embedder = self._embedder
        found_vec = await self._encode([query]) if embedder is not None else None
        vector = found_vec[0] if found_vec else None
        idents = identifiers(query)
        wanted = max(_CANDIDATES, limit * 4)
        now = self._clock()
        # Alone, the lexical lane stamps its own top ``limit`` in its statement; with another
        # lane the stamp waits for the fusion and marks the rows returned.
        alone = not idents and vector is None
        # One statement, one round trip: the best 40 matches by ts_rank_cd within the visible
        # scopes (as SQLite takes 40 by bm25), re-ranked by ts_rank_cd x scope weight x recency
        # decay x pinned boost, the top ``limit`` (all of them when fused), and, when alone,
        # their last-recalled stamp (rows another recall holds are skipped, never waited on).
        stamp_here = touch and alone
        statement = self._q(
            f"WITH cand AS (SELECT {_D_COLUMNS}, d.id, {_RANK} AS lexical "
            "FROM {schema}.memory_documents AS d WHERE d.tsv @@ {query} "
            f"AND {where} AND (d.expires_at_ms IS NULL OR d.expires_at_ms > %s) "
            "ORDER BY lexical DESC, d.id LIMIT %s), "
            f"ranked AS (SELECT d.*, {_WEIGHT} AS weight, {_DECAY} AS fade FROM cand AS d "
            f"ORDER BY d.lexical * {_WEIGHT} * {_DECAY} * (CASE WHEN d.pinned THEN "
            f"{_PIN_BOOST} ELSE 1 END) DESC, d.id LIMIT %s)"
            + (
                ", locked AS (SELECT m.id FROM {schema}.memory_documents m WHERE m.id IN "
                "(SELECT id FROM ranked) ORDER BY m.id FOR UPDATE SKIP LOCKED), "
                "touched AS (UPDATE {schema}.memory_documents t SET last_recalled_at_ms = %s "
                "WHERE t.id IN (SELECT id FROM locked)) "
                if stamp_here
                else " "
            )
            # The stamp is bookkeeping for eviction order: its commit need not wait for the
            # WAL flush (a crash may lose the last stamps, never a document).
            + (
                "SELECT ranked.* FROM ranked, (SELECT set_config('synchronous_commit', 'off', "
                "true)) AS nosync"
                if stamp_here
                else "SELECT * FROM ranked"
            )
        )
        args = (expression, expression, *params, now, wanted, now, now,
                limit if alone else wanted, *((now,) if stamp_here else ()))  # fmt: skip
        by_text = self._q(_TRIGRAM.format(where=where)) if idents else ""
        patterns = [like_pattern(i) for i in idents]
        text_args = (now, patterns, patterns, *params, now, wanted)
        by_vector = self._q(
            "SELECT d.doc_id, d.scope, d.updated_at_ms, d.pinned, v.vec FROM "
            "{schema}.memory_vectors AS v JOIN {schema}.memory_documents AS d ON d.id = v.id "
            f"WHERE {where} AND (d.expires_at_ms IS NULL OR d.expires_at_ms > %s)"
        )
        by_ids = self._q(
            f"SELECT {_D_COLUMNS}, {_WEIGHT}, {_DECAY} FROM {{schema}}.memory_documents AS d "
            f"WHERE d.doc_id = ANY(%s) AND {where} "
            "AND (d.expires_at_ms IS NULL OR d.expires_at_ms > %s)"
        )

        async def op(conn: Conn) -> list[RecallHit]:
            cur = await conn.execute(statement, args)
            hits = _lexical_hits(await cur.fetchall())
            if alone:
                return [msgspec.structs.replace(h, lexical_rank=i) for i, h in enumerate(hits, 1)]
            known = {h.document.doc_id: h for h in hits}
            by_ident: list[str] = []
            if idents:
                cur = await conn.execute(by_text, text_args)
                for row in await cur.fetchall():  # 16 columns, id, weight, fade, n
                    doc = _document(row[:16])
                    by_ident.append(doc.doc_id)
                    known.setdefault(doc.doc_id, RecallHit(
                        document=doc, score=0.0, lexical=0.0, scope_weight=float(row[17]),
                        decay=float(row[18])))  # fmt: skip
            near: list[str] = []
            if vector is not None and embedder is not None:
                cur = await conn.execute(by_vector, (*params, now))
                rows = await cur.fetchall()
                sims = await asyncio.to_thread(
                    embedder.similarities, vector, [bytes(r[4]) for r in rows]
                )
                keys = [(str(r[0]), str(r[1]), int(r[2]), bool(r[3])) for r in rows]
                near = [t[1] for t in dense_top(sims, keys, now, wanted)]
            fused = fuse_lanes([h.document.doc_id for h in hits], by_ident, near)
            if fused is None:
                out = [msgspec.structs.replace(h, lexical_rank=i) for i, h in enumerate(hits, 1)]
                chosen = out[:limit]
            else:
                top = fused[:limit]
                missing = [key for key, _s, _r in top if key not in known]
                if missing:  # found by the embeddings lane alone: read their rows
                    cur = await conn.execute(by_ids, (now, missing, *params, now))
                    for row in await cur.fetchall():  # 16 columns, weight, fade
                        known[str(row[0])] = RecallHit(
                            document=_document(row[:16]), score=0.0, lexical=0.0,
                            scope_weight=float(row[16]), decay=float(row[17]))  # fmt: skip
                chosen = [
                    msgspec.structs.replace(known[key], score=score, lexical_rank=ranks[0],
                                            trigram_rank=ranks[1], embedding_rank=ranks[2])
                    for key, score, ranks in top if key in known
                ]  # fmt: skip
            if touch and chosen:
                await conn.execute(self._sql["stamp"], ([h.document.doc_id for h in chosen], now))
            return chosen

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

    async def page(self, *, after: str | None = None, limit: int = 200) -> list[MemoryDocument]:
        query = self._q(
            f"SELECT {_COLUMNS} FROM {{schema}}.memory_documents WHERE doc_id > %s "
            "ORDER BY doc_id LIMIT %s"
        )

        async def op(conn: Conn) -> list[Any]:
            cur = await conn.execute(query, (after or "", limit))
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
