"""The SQLite backend: ``$LEMON_HOME/store/memory.sqlite3`` (WAL), its own file.

``memory_documents`` holds the documents; ``memory_fts`` is an FTS5 external-content index
over title, tags and body (``porter unicode61 remove_diacritics 2``), kept by triggers in the
same transaction as the row, so a forget or an eviction never leaves an FTS row behind.
``memory_scopes`` and ``memory_totals`` (also trigger-kept) give each scope's and the
store's count and bytes without a scan. A recall's scope rule is part of its SQL ``WHERE``
clause: a row of another agent or another session is never read, so never returned.

One connection, used from worker threads under a lock (every public method is a coroutine
that runs its SQL off the event loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

import msgspec

from lemon_memory._fusion import fuse, identifiers, trigram_query
from lemon_memory._index import Bucket, RecallIndex
from lemon_memory._rows import CANDIDATES as _CANDIDATES
from lemon_memory._rows import COLUMNS as _COLUMNS
from lemon_memory._rows import PIN_BOOST as _PIN_BOOST
from lemon_memory._rows import document as _document
from lemon_memory._rows import now_ms as _now_ms
from lemon_memory._rows import visible
from lemon_memory._tokens import index_tokens
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
from lemon_memory.query import fts5_query, tokens
from lemon_memory.store import MAX_RECALL, Write, decay, new_doc_id

__all__ = ["SqliteMemoryStore"]

T = TypeVar("T")
#: A change the recall index has to follow: ("add", rowid, doc_id, bucket, (title, tags,
#: body), expires, updated, pinned), ("del", rowid) or ("exp", rowid, expires, updated,
#: pinned).
_Op = tuple[Any, ...]
#: Committed changes kept for the recall index before it is dropped and read afresh.
_MAX_QUEUE: Final = 50_000

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS memory_documents (
    id INTEGER PRIMARY KEY,
    doc_id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    scope TEXT NOT NULL,
    scope_key TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    tags TEXT NOT NULL,
    source TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    last_recalled_at_ms INTEGER,
    expires_at_ms INTEGER,
    pinned INTEGER NOT NULL DEFAULT 0,
    supersedes TEXT NOT NULL DEFAULT '',
    content_hash TEXT NOT NULL,
    size INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS memory_documents_hash
    ON memory_documents (agent_id, scope, scope_key, content_hash);
CREATE INDEX IF NOT EXISTS memory_documents_scope
    ON memory_documents (agent_id, scope, scope_key, pinned, kind, updated_at_ms);
CREATE INDEX IF NOT EXISTS memory_documents_summaries
    ON memory_documents (pinned, kind, updated_at_ms);
CREATE INDEX IF NOT EXISTS memory_documents_recalled
    ON memory_documents (pinned, coalesce(last_recalled_at_ms, updated_at_ms));
CREATE INDEX IF NOT EXISTS memory_documents_expiry
    ON memory_documents (expires_at_ms) WHERE expires_at_ms IS NOT NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(
    title, tags, body, content='memory_documents', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS memory_scopes (
    agent_id TEXT NOT NULL, scope TEXT NOT NULL, scope_key TEXT NOT NULL,
    docs INTEGER NOT NULL, bytes INTEGER NOT NULL,
    PRIMARY KEY (agent_id, scope, scope_key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS memory_totals (
    one INTEGER PRIMARY KEY CHECK (one = 1), docs INTEGER NOT NULL, bytes INTEGER NOT NULL
);
INSERT OR IGNORE INTO memory_totals VALUES (1, 0, 0);
CREATE TABLE IF NOT EXISTS memory_counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TRIGGER IF NOT EXISTS memory_documents_ai AFTER INSERT ON memory_documents BEGIN
    INSERT INTO memory_fts (rowid, title, tags, body)
        VALUES (new.id, new.title, new.tags, new.body);
    INSERT INTO memory_scopes VALUES (new.agent_id, new.scope, new.scope_key, 1, new.size)
        ON CONFLICT DO UPDATE SET docs = docs + 1, bytes = bytes + excluded.bytes;
    UPDATE memory_totals SET docs = docs + 1, bytes = bytes + new.size;
END;
CREATE TRIGGER IF NOT EXISTS memory_documents_ad AFTER DELETE ON memory_documents BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, title, tags, body)
        VALUES ('delete', old.id, old.title, old.tags, old.body);
    UPDATE memory_scopes SET docs = docs - 1, bytes = bytes - old.size
        WHERE agent_id = old.agent_id AND scope = old.scope AND scope_key = old.scope_key;
    UPDATE memory_totals SET docs = docs - 1, bytes = bytes - old.size;
END;
"""
#: The identifier lane's substring index (added to files made before it: built at open),
#: and the embeddings lane's vectors (float32, L2-normalized), each kept by triggers in the
#: document's transaction.
_SCHEMA_LANES: Final = """
CREATE VIRTUAL TABLE IF NOT EXISTS memory_trigram USING fts5(
    title, tags, body, content='memory_documents', content_rowid='id', tokenize='trigram'
);
CREATE TRIGGER IF NOT EXISTS memory_documents_ai_trigram AFTER INSERT ON memory_documents BEGIN
    INSERT INTO memory_trigram (rowid, title, tags, body)
        VALUES (new.id, new.title, new.tags, new.body);
END;
CREATE TRIGGER IF NOT EXISTS memory_documents_ad_trigram AFTER DELETE ON memory_documents BEGIN
    INSERT INTO memory_trigram (memory_trigram, rowid, title, tags, body)
        VALUES ('delete', old.id, old.title, old.tags, old.body);
    DELETE FROM memory_vectors WHERE id = old.id;
END;
CREATE TABLE IF NOT EXISTS memory_vectors (id INTEGER PRIMARY KEY, vec BLOB NOT NULL);
"""
#: The previous content of documents a forget or a merge removed or changed (``_versions``;
#: a file from before it gets the table at open).
_SCHEMA_VERSIONS: Final = """
CREATE TABLE IF NOT EXISTS memory_versions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    change_id TEXT NOT NULL, change TEXT NOT NULL, doc_id TEXT NOT NULL,
    agent_id TEXT NOT NULL, scope TEXT NOT NULL, scope_key TEXT NOT NULL,
    document TEXT NOT NULL, at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_versions_change ON memory_versions (change_id);
CREATE INDEX IF NOT EXISTS memory_versions_doc ON memory_versions (doc_id, seq);
CREATE INDEX IF NOT EXISTS memory_versions_scope
    ON memory_versions (agent_id, scope, scope_key, seq);
CREATE INDEX IF NOT EXISTS memory_versions_at ON memory_versions (at_ms);
"""
_RESTORE: Final = (
    "INSERT INTO memory_documents (doc_id, kind, scope, scope_key, agent_id, title, body, tags, "
    "source, created_at_ms, updated_at_ms, last_recalled_at_ms, expires_at_ms, pinned, "
    "supersedes, content_hash, size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT DO NOTHING"
)
_BM25: Final = "bm25(memory_fts, 3.0, 2.0, 1.0)"  # title, tags, body
_INSERT: Final = (
    "INSERT INTO memory_documents (doc_id, kind, scope, scope_key, agent_id, title, body, tags, "
    "source, created_at_ms, updated_at_ms, expires_at_ms, pinned, content_hash, size) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
#: At most this many scopes' counts are kept (then forgotten and read again).
_KNOWN_SCOPES: Final = 4096
#: A write's reads in one statement: the id of a document with the same content hash in the
#: same scope (or NULL), the scope's count and bytes (NULL: none yet), the store's.
_PROBE: Final = (
    "SELECT d.id, s.docs, s.bytes, t.docs, t.bytes FROM memory_totals AS t "
    "LEFT JOIN memory_scopes AS s ON s.agent_id = ? AND s.scope = ? AND s.scope_key = ? "
    "LEFT JOIN memory_documents AS d ON d.agent_id = ? AND d.scope = ? AND d.scope_key = ? "
    "AND d.content_hash = ?"
)


_D_COLUMNS: Final = ", ".join(f"d.{c.strip()}" for c in _COLUMNS.split(","))


def _visible(ctx: MemoryContext, scope: str | None) -> tuple[str, list[Any]]:
    return visible(ctx, scope, "?")


def _buckets(ctx: MemoryContext, scope: str | None) -> tuple[Bucket, ...]:
    """The ``(agent, scope, key)`` buckets a recall of ``ctx`` reads (``ScopeError`` for a
    scope it cannot see)."""
    return tuple((ctx.agent_id, name, key) for name, key in ctx.narrow(scope).items())


class SqliteMemoryStore:
    """The default :class:`~lemon_memory.MemoryStore` (see the module docstring)."""

    backend = "sqlite"

    def __init__(
        self,
        path: Path,
        *,
        max_docs_per_scope: int = 500,
        max_bytes_per_scope: int = 2 * 1024 * 1024,
        max_docs: int = 50_000,
        max_bytes: int = 256 * 1024 * 1024,
        sweep_batch: int = 1000,
        clock: Callable[[], int] = _now_ms,
        embedder: Embedder | None = None,
    ) -> None:
        self.path = path
        self._embedder = embedder
        self._limits = (max_docs_per_scope, max_bytes_per_scope, max_docs, max_bytes)
        self._sweep_batch = sweep_batch
        self._clock = clock
        self._lock = threading.Lock()
        self._touched: dict[str, int] = {}  # doc_id -> last recalled, not yet written
        self._batch = False  # inside put_many: all or nothing
        # Counts of the scopes written lately and of the store, as this connection left them
        # (kept by its own puts; dropped on any other change, or when another connection
        # committed: PRAGMA data_version), so a put that fits needs no read first.
        self._known: dict[tuple[str, str, str], tuple[int, int]] = {}
        self._known_totals: tuple[int, int] | None = None
        self._version: int | None = None
        self._evicted = 0
        # The recall index (built at the first recall or by warm()), the data_version it was
        # read at, the changes of the open transaction and the committed ones not applied yet.
        self._index: RecallIndex | None = None
        self._index_version: int | None = None
        self._pending: list[_Op] = []
        self._queue: list[_Op] = []
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(_SCHEMA)
            had_trigram = self._db.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'memory_trigram'"
            ).fetchone()
            self._db.executescript(_SCHEMA_LANES)
            self._db.executescript(_SCHEMA_VERSIONS)
            if had_trigram is None:  # a file from before the identifier lane
                self._db.execute("INSERT INTO memory_trigram (memory_trigram) VALUES ('rebuild')")
            found = self._db.execute("PRAGMA quick_check(1)").fetchone()
            if found is None or found[0] != "ok":
                raise sqlite3.DatabaseError(f"integrity check: {found[0] if found else '?'}")
        except (sqlite3.Error, OSError) as exc:
            with contextlib.suppress(AttributeError, sqlite3.Error):
                self._db.close()
            raise MemoryUnavailableError(
                f"the memory store {path} cannot be opened ({exc}); stop the daemon and move "
                f"it aside to start afresh (mv {path} {path}.corrupt; export first with lemon "
                "memory export if it still reads). Recall is unavailable until then; chat "
                "still works"
            ) from None

    # -- plumbing ----------------------------------------------------------------------------

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.to_thread(self._locked, fn)

    def _locked(self, fn: Callable[[], T]) -> T:
        with self._lock:
            try:
                return fn()
            except sqlite3.Error as exc:
                raise MemoryUnavailableError(f"the memory store failed: {exc}") from exc

    def _commit(self) -> None:
        self._db.execute("COMMIT")
        if self._pending:
            self._queue.extend(self._pending)
            self._pending.clear()
            if len(self._queue) > _MAX_QUEUE:
                self._drop_index()

    def _rollback(self) -> None:
        self._db.execute("ROLLBACK")
        self._pending.clear()

    def _note(self, op: _Op) -> None:
        """Record a change for the recall index (applied once its transaction commits)."""
        if self._index is None:
            return
        if self._db.in_transaction:
            self._pending.append(op)
        else:
            self._queue.append(op)
            if len(self._queue) > _MAX_QUEUE:
                self._drop_index()

    def _note_deleted(self, rows: Iterable[tuple[Any, ...]]) -> None:
        for row in rows:
            self._note(("del", row[0]))

    def _drop_index(self) -> None:
        self._index = None
        self._queue.clear()
        self._pending.clear()

    def _flush_touches(self) -> None:
        """Write the pending last-recalled stamps (inside the caller's transaction, or as one
        statement of its own)."""
        if self._touched:
            self._db.executemany(
                "UPDATE memory_documents SET last_recalled_at_ms = max(coalesce("
                "last_recalled_at_ms, 0), ?) WHERE doc_id = ?",
                [(at, doc_id) for doc_id, at in self._touched.items()],
            )
            self._touched.clear()

    def _forget_counts(self) -> None:
        self._known.clear()
        self._known_totals = None

    def _check_version(self) -> None:
        """Inside a write transaction: drop the known counts if another connection committed."""
        version = self._db.execute("PRAGMA data_version").fetchone()[0]
        if version != self._version:
            self._forget_counts()
            self._version = version

    def _bump(self, name: str, by: int = 1) -> None:
        self._db.execute(
            "INSERT INTO memory_counters VALUES (?, ?) "
            "ON CONFLICT DO UPDATE SET value = value + excluded.value",
            (name, by),
        )

    # -- writes ------------------------------------------------------------------------------

    @property
    def embeddings(self) -> str:
        """The embeddings lane: its model, or why it is off."""
        return embeddings_status(self._embedder)

    def attach(self, embedder: Embedder | None) -> None:
        """Turn the embeddings lane on (or off with ``None``): new documents get a vector,
        recall fuses the cosine ranking in; :meth:`backfill` gives older ones theirs."""
        self._embedder = embedder

    async def backfill(self, batch: int = 64) -> int:
        """Give every document without a vector its vector, ``batch`` at a time (encoding
        off the lock); how many were added."""
        added = 0
        while (embedder := self._embedder) is not None:
            rows = await self._run(lambda: self._db.execute(
                "SELECT d.id, d.title, d.tags, d.body FROM memory_documents AS d WHERE NOT "
                "EXISTS (SELECT 1 FROM memory_vectors AS v WHERE v.id = d.id) LIMIT ?", (batch,)
            ).fetchall())  # fmt: skip
            if not rows:
                break
            vectors = await asyncio.to_thread(
                embedder.encode, [vector_text(r[1], r[2], r[3]) for r in rows]
            )
            pairs = [(v, r[0], r[0]) for r, v in zip(rows, vectors, strict=True)]

            def store(pairs: list[tuple[bytes, int, int]] = pairs) -> None:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.executemany(  # a row forgotten meanwhile gets none
                        "INSERT OR IGNORE INTO memory_vectors SELECT ?2, ?1 WHERE EXISTS "
                        "(SELECT 1 FROM memory_documents WHERE id = ?3)",
                        pairs,
                    )
                    self._commit()
                except BaseException:
                    self._rollback()
                    raise

            await self._run(store)
            added += len(rows)
        return added

    def vector_count(self) -> int:
        """Rows of ``memory_vectors`` (tests: none left behind)."""
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM memory_vectors").fetchone()[0])

    async def _vectors(self, writes: Sequence[Write]) -> list[bytes] | None:
        if self._embedder is None:
            return None
        embedder = self._embedder
        return await asyncio.to_thread(embedder.encode, [document_text(w) for w in writes])

    async def put(self, write: Write) -> MemoryDocument:
        vectors = await self._vectors([write])
        return await self._run(lambda: self._put(write, vectors[0] if vectors else None))

    def put_sync(self, write: Write) -> MemoryDocument:
        """:meth:`put` in the calling thread (benchmarks)."""
        return self._locked(lambda: self._put(write))

    async def put_many(self, writes: Sequence[Write]) -> list[MemoryDocument]:
        vectors = await self._vectors(writes)

        def go() -> list[MemoryDocument]:
            self._db.execute("BEGIN IMMEDIATE")
            self._batch = True
            try:
                self._check_version()
                self._flush_touches()
                done = [
                    self._put_in(w, self._clock(), vectors[i] if vectors else None)
                    for i, w in enumerate(writes)
                ]
                self._commit()
            except BaseException:
                self._rollback()
                self._forget_counts()
                raise
            finally:
                self._batch = False
            return done

        return await self._run(go)

    def _put(self, w: Write, vector: bytes | None = None) -> MemoryDocument:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            self._check_version()
            self._flush_touches()
            doc = self._put_in(w, self._clock(), vector)
            self._commit()
        except BaseException:
            self._rollback()
            self._forget_counts()
            raise
        return doc

    def _put_in(self, w: Write, now: int, vector: bytes | None = None) -> MemoryDocument:
        """One write inside the caller's transaction."""
        db = self._db
        key = (w.agent_id, w.scope, w.scope_key)
        w_size = w.size
        known, totals = self._known.get(key), self._known_totals
        if known is not None and totals is not None and self._fits(known, totals, w_size):
            # Fits without an eviction: insert unless the same content is there (then the
            # upsert below). One statement.
            doc_id = new_doc_id()
            cur = db.execute(
                _INSERT + " ON CONFLICT (agent_id, scope, scope_key, content_hash) DO NOTHING",
                self._insert_params(doc_id, w, w_size, now),
            )
            if cur.rowcount == 1:
                self._note_insert(cur.lastrowid, doc_id, w, now)
                if vector is not None:
                    db.execute("INSERT INTO memory_vectors VALUES (?, ?)", (cur.lastrowid, vector))
                self._known[key] = (known[0] + 1, known[1] + w_size)
                self._known_totals = (totals[0] + 1, totals[1] + w_size)
                return self._inserted(doc_id, w, now)
        # One statement: the duplicate's id (if any), the scope's and the store's counts.
        dup, scope_docs, scope_bytes, docs, size = db.execute(
            _PROBE, (*key, *key, w.content_hash)
        ).fetchone()
        if dup is not None:
            row = db.execute(
                f"SELECT {_COLUMNS} FROM memory_documents WHERE id = ?", (dup,)
            ).fetchone()
            db.execute(
                "UPDATE memory_documents SET updated_at_ms = ?, pinned = max(pinned, ?), "
                "expires_at_ms = ? WHERE doc_id = ?",
                (now, int(w.pinned), w.expires_at_ms, row[0]),
            )
            self._note(("exp", dup, w.expires_at_ms, now, bool(row[13]) or w.pinned))
            self._bump("deduplicated")
            old = _document(row)
            return msgspec.structs.replace(
                old,
                updated_at_ms=now,
                pinned=old.pinned or w.pinned,
                expires_at_ms=w.expires_at_ms,
            )
        evicted = self._evicted
        self._make_room(w, w_size, now, (scope_docs or 0, scope_bytes or 0, docs, size))
        doc_id = new_doc_id()
        cur = db.execute(_INSERT, self._insert_params(doc_id, w, w_size, now))
        self._note_insert(cur.lastrowid, doc_id, w, now)
        if vector is not None:
            db.execute("INSERT INTO memory_vectors VALUES (?, ?)", (cur.lastrowid, vector))
        if self._evicted == evicted:  # the counts read above, plus this document
            if len(self._known) >= _KNOWN_SCOPES:
                self._known.clear()
            self._known[key] = ((scope_docs or 0) + 1, (scope_bytes or 0) + w_size)
            self._known_totals = (docs + 1, size + w_size)
        return self._inserted(doc_id, w, now)

    def _note_insert(self, rowid: int | None, doc_id: str, w: Write, now: int) -> None:
        if self._index is not None and rowid is not None:
            self._note(("add", rowid, doc_id, (w.agent_id, w.scope, w.scope_key),
                        (w.title, " ".join(w.tags), w.body), w.expires_at_ms, now,
                        w.pinned))  # fmt: skip

    def _fits(self, known: tuple[int, int], totals: tuple[int, int], w_size: int) -> bool:
        max_scope_docs, max_scope_bytes, max_docs, max_bytes = self._limits
        return (
            known[0] + 1 <= max_scope_docs
            and known[1] + w_size <= max_scope_bytes
            and totals[0] + 1 <= max_docs
            and totals[1] + w_size <= max_bytes
        )

    @staticmethod
    def _insert_params(doc_id: str, w: Write, w_size: int, now: int) -> tuple[Any, ...]:
        return (doc_id, w.kind, w.scope, w.scope_key, w.agent_id, w.title, w.body,
                " ".join(w.tags), w.source, now, now, w.expires_at_ms, int(w.pinned),
                w.content_hash, w_size)  # fmt: skip

    def _inserted(self, doc_id: str, w: Write, now: int) -> MemoryDocument:
        if w.redactions:
            self._bump("redactions", w.redactions)
        return MemoryDocument(
            doc_id=doc_id, kind=w.kind, scope=w.scope, scope_key=w.scope_key,
            agent_id=w.agent_id, title=w.title, body=w.body, tags=w.tags, source=w.source,
            created_at_ms=now, updated_at_ms=now, expires_at_ms=w.expires_at_ms,
            pinned=w.pinned, content_hash=w.content_hash,
        )  # fmt: skip

    def _make_room(
        self, w: Write, w_size: int, now: int, counts: tuple[int, int, int, int]
    ) -> None:
        """Evict until ``w`` fits its scope's and the store's budgets: expired documents,
        then unpinned run summaries oldest first, then unpinned explicit memories least
        recently recalled; :class:`ScopeFullError` when only pinned ones are left."""
        max_scope_docs, max_scope_bytes, max_docs, max_bytes = self._limits
        db = self._db
        scope_where = "agent_id = ? AND scope = ? AND scope_key = ?"
        scope_params = (w.agent_id, w.scope, w.scope_key)
        for where, params, limits, what in (
            (scope_where, scope_params, (max_scope_docs, max_scope_bytes), "this scope"),
            ("1 = 1", (), (max_docs, max_bytes), "the memory store"),
        ):
            fresh = True  # the counts read with the duplicate probe, until an eviction
            while True:
                if fresh:
                    docs, size = counts[:2] if where != "1 = 1" else counts[2:]
                    fresh = False
                elif where == "1 = 1":
                    docs, size = db.execute("SELECT docs, bytes FROM memory_totals").fetchone()
                else:
                    found = db.execute(
                        f"SELECT docs, bytes FROM memory_scopes WHERE {scope_where}", scope_params
                    ).fetchone()
                    docs, size = found if found is not None else (0, 0)
                if docs + 1 <= limits[0] and size + w_size <= limits[1]:
                    break
                if not self._evict_one(where, params, now, scoped=where != "1 = 1"):
                    if not self._batch:  # keep the counter (a batch keeps nothing)
                        self._bump("refused_full")
                        self._commit()
                        db.execute("BEGIN IMMEDIATE")
                    raise ScopeFullError(
                        f"{what} is full ({docs} documents, {size} bytes) and every document "
                        "in it is pinned: forget or unpin one (lemon memory list / forget) "
                        "before remembering more"
                    )

    def _evict_one(self, where: str, params: tuple[Any, ...], now: int, *, scoped: bool) -> bool:
        db = self._db
        self._evicted += 1
        self._forget_counts()
        # A scope's pass reads its own rows through the scope index (at most a scope's budget
        # of them); the store-wide passes use the indexes on pinned.
        table = (
            "memory_documents INDEXED BY memory_documents_scope" if scoped else ("memory_documents")
        )
        for reason, sql, extra in (
            ("expired", f"{where} AND expires_at_ms IS NOT NULL AND expires_at_ms <= ? LIMIT 1",
             (now,)),
            ("run_summary", f"{where} AND pinned = 0 AND kind = 'run_summary' "
             "ORDER BY updated_at_ms LIMIT 1", ()),
            ("explicit", f"{where} AND pinned = 0 "
             "ORDER BY coalesce(last_recalled_at_ms, updated_at_ms) LIMIT 1", ()),
        ):  # fmt: skip
            row = db.execute(f"SELECT id FROM {table} WHERE {sql}", (*params, *extra))
            found = row.fetchone()
            if found is not None:
                db.execute("DELETE FROM memory_documents WHERE id = ?", (found[0],))
                self._note(("del", found[0]))
                self._bump(f"evicted_{reason}")
                return True
        return False

    def _delete_versioned(
        self, change: Change, where: str, params: Sequence[Any], also: Sequence[Any] = ()
    ) -> int:
        """Delete the rows of ``where`` (on alias ``d``) inside the caller's transaction,
        keeping each one's version (and ``also``'s, rows selected with :data:`_COLUMNS`) as one
        change; how many were deleted."""
        deleted = self._db.execute(
            f"DELETE FROM memory_documents AS d WHERE {where} RETURNING id, {_COLUMNS}", params
        ).fetchall()
        self._note_deleted(deleted)
        self._keep_versions(change, [*(_document(r) for r in also),
                                     *(_document(r[1:]) for r in deleted)])  # fmt: skip
        return len(deleted)

    def _keep_versions(self, change: Change, docs: Sequence[MemoryDocument]) -> None:
        if not docs:
            return
        db, now, change_id = self._db, self._clock(), new_change_id()
        db.executemany(
            "INSERT INTO memory_versions (change_id, change, doc_id, agent_id, scope, scope_key, "
            "document, at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(change_id, change, d.doc_id, d.agent_id, d.scope, d.scope_key, encode(d), now)
             for d in docs],
        )  # fmt: skip
        for sid in {(d.agent_id, d.scope, d.scope_key) for d in docs}:
            db.execute(
                "DELETE FROM memory_versions WHERE agent_id = ? AND scope = ? AND scope_key = ? "
                "AND seq <= (SELECT seq FROM memory_versions WHERE agent_id = ? AND scope = ? "
                "AND scope_key = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                (*sid, *sid, MAX_VERSIONS_PER_SCOPE),
            )
        db.execute("DELETE FROM memory_versions WHERE at_ms < ?", (now - VERSION_TTL_MS,))

    def _write(self, fn: Callable[[], T]) -> T:
        """``fn`` in a write transaction of its own (rolled back when it raises)."""
        self._forget_counts()  # counts change other than by a put
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._flush_touches()
            out = fn()
            self._commit()
        except BaseException:
            self._rollback()
            raise
        return out

    async def forget(self, ctx: MemoryContext, doc_id: str) -> None:
        where, params = _visible(ctx, None)

        def go() -> int:
            return self._delete_versioned("forget", f"d.doc_id = ? AND {where}", (doc_id, *params))

        if not await self._run(lambda: self._write(go)):
            raise ScopeError(
                f"no document {doc_id!r} in the scopes this run can see (session, "
                "project, agent, user of this run): recall first to find its id"
            )

    async def forget_any(self, doc_id: str) -> bool:
        def go() -> bool:
            return bool(self._delete_versioned("forget", "d.doc_id = ?", (doc_id,)))

        return await self._run(lambda: self._write(go))

    async def undo(self, doc_id: str | None = None) -> Undone | None:
        def go() -> Undone | None:
            db = self._db
            floor = self._clock() - VERSION_TTL_MS
            if doc_id is None:
                rows = db.execute(
                    "SELECT seq, change_id, change, document FROM memory_versions WHERE "
                    "change_id = (SELECT change_id FROM memory_versions WHERE at_ms >= ? "
                    "ORDER BY seq DESC LIMIT 1) ORDER BY seq",
                    (floor,),
                ).fetchall()
            else:
                rows = db.execute(
                    "SELECT seq, change_id, change, document FROM memory_versions WHERE "
                    "doc_id = ? AND at_ms >= ? ORDER BY seq DESC LIMIT 1",
                    (doc_id, floor),
                ).fetchall()
            if not rows:
                return None
            restored: list[MemoryDocument] = []
            skipped: list[str] = []
            for _seq, _change_id, _change, text in rows:
                old = decode(text)
                kept = db.execute(  # a merge's kept document: only its supersedes changed
                    "UPDATE memory_documents SET supersedes = ? WHERE doc_id = ? AND "
                    f"content_hash = ? RETURNING {_COLUMNS}",
                    (" ".join(old.supersedes), old.doc_id, old.content_hash),
                ).fetchone()
                if kept is not None:
                    restored.append(_document(kept))
                    continue
                self._note_deleted(db.execute(
                    "DELETE FROM memory_documents WHERE doc_id = ? RETURNING id", (old.doc_id,)
                ).fetchall())  # fmt: skip
                cur = db.execute(_RESTORE, (
                    old.doc_id, old.kind, old.scope, old.scope_key, old.agent_id, old.title,
                    old.body, " ".join(old.tags), old.source, old.created_at_ms,
                    old.updated_at_ms, old.last_recalled_at_ms, old.expires_at_ms,
                    int(old.pinned), " ".join(old.supersedes), old.content_hash, size_of(old),
                ))  # fmt: skip
                if cur.rowcount != 1:
                    skipped.append(old.doc_id)  # the same text is stored again under another id
                    continue
                if self._index is not None and cur.lastrowid is not None:
                    self._note(("add", cur.lastrowid, old.doc_id,
                                (old.agent_id, old.scope, old.scope_key),
                                (old.title, " ".join(old.tags), old.body), old.expires_at_ms,
                                old.updated_at_ms, old.pinned))  # fmt: skip
                restored.append(old)
            db.executemany("DELETE FROM memory_versions WHERE seq = ?", [(r[0],) for r in rows])
            return Undone(change_id=rows[0][1], change=rows[0][2], restored=tuple(restored),
                          skipped=tuple(skipped))  # fmt: skip

        done = await self._run(lambda: self._write(go))
        if done is not None and done.restored and self._embedder is not None:
            await self.backfill()  # a restored document's vector went with its delete
        return done

    async def history(self, doc_id: str, *, limit: int = 20) -> list[Version]:
        def go() -> list[Version]:
            rows = self._db.execute(
                "SELECT change_id, change, at_ms, document FROM memory_versions WHERE "
                "doc_id = ? AND at_ms >= ? ORDER BY seq DESC LIMIT ?",
                (doc_id, self._clock() - VERSION_TTL_MS, limit),
            ).fetchall()
            return [Version(change_id=r[0], change=r[1], at_ms=r[2], document=decode(r[3]))
                    for r in rows]  # fmt: skip

        return await self._run(go)

    async def version_count(self) -> int:
        def go() -> int:
            return int(self._db.execute("SELECT count(*) FROM memory_versions").fetchone()[0])

        return await self._run(go)

    async def forget_scope(
        self, scope: str, *, agent_id: str | None = None, scope_key: str | None = None
    ) -> int:
        def go() -> int:
            self._forget_counts()  # counts change other than by a put
            conds, params = ["scope = ?"], [scope]
            for column, value in (("agent_id", agent_id), ("scope_key", scope_key)):
                if value is not None:
                    conds.append(f"{column} = ?")
                    params.append(value)
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._flush_touches()
                n = self._delete_versioned("forget_scope", " AND ".join(conds), params)
                self._commit()
            except BaseException:
                self._rollback()
                raise
            return n

        return await self._run(go)

    async def merge(self, keep_id: str, drop_ids: Sequence[str]) -> bool:
        def go() -> bool:
            self._forget_counts()  # counts change other than by a put
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                self._flush_touches()
                row = db.execute(
                    f"SELECT {_COLUMNS} FROM memory_documents WHERE doc_id = ?", (keep_id,)
                ).fetchone()
                marks = ",".join("?" for _ in drop_ids)
                gone = self._delete_versioned(
                    "merge",
                    f"d.doc_id IN ({marks}) AND d.doc_id != ?",
                    (*drop_ids, keep_id),
                    also=() if row is None else (row,),
                )
                if row is None or gone != len(drop_ids):
                    self._rollback()
                    return False
                merged = " ".join(dict.fromkeys([*str(row[14]).split(), *drop_ids]))
                db.execute(
                    "UPDATE memory_documents SET supersedes = ? WHERE doc_id = ?",
                    (merged, keep_id),
                )
                self._bump("consolidated", gone)
                self._commit()
            except BaseException:
                self._rollback()
                raise
            return True

        return await self._run(go)

    async def sweep(self, now_ms: int | None = None) -> int:
        def go() -> int:
            self._forget_counts()  # counts change other than by a put
            now = self._clock() if now_ms is None else now_ms
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            self._flush_touches()
            deleted = db.execute(
                "DELETE FROM memory_documents WHERE id IN (SELECT id FROM memory_documents "
                "WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= ? LIMIT ?) RETURNING id",
                (now, self._sweep_batch),
            ).fetchall()
            self._note_deleted(deleted)
            if deleted:
                self._bump("swept", len(deleted))
            self._commit()
            return len(deleted)

        return await self._run(go)

    # -- reads -------------------------------------------------------------------------------

    async def recall(
        self, ctx: MemoryContext, query: str, *, scope: str | None = None, limit: int = 5
    ) -> RecallResult:
        where, params = _visible(ctx, scope)  # ScopeError here, before any SQL
        buckets = _buckets(ctx, scope)
        vector = await self._query_vector(query)
        return await self._run(
            lambda: self._search(
                query, where, params, limit, touch=True, buckets=buckets, vector=vector
            )
        )

    async def _query_vector(self, query: str) -> bytes | None:
        if self._embedder is None or not tokens(query):
            return None
        embedder = self._embedder
        return (await asyncio.to_thread(embedder.encode, [query]))[0]

    def recall_sync(
        self, ctx: MemoryContext, query: str, *, scope: str | None = None, limit: int = 5
    ) -> RecallResult:
        """:meth:`recall` in the calling thread (benchmarks)."""
        where, params = _visible(ctx, scope)
        buckets = _buckets(ctx, scope)
        return self._locked(
            lambda: self._search(query, where, params, limit, touch=True, buckets=buckets)
        )

    def recall_fts_sync(
        self, ctx: MemoryContext, query: str, *, scope: str | None = None, limit: int = 5
    ) -> RecallResult:
        """:meth:`recall` by FTS5 alone (``MATCH ... ORDER BY bm25``), without the recall
        index: the path recall took before it (benchmarks and tests compare the two)."""
        where, params = _visible(ctx, scope)
        return self._locked(lambda: self._search(query, where, params, limit, touch=True))

    async def warm(self) -> int:
        """Build the recall index now (else the first recall builds it); its size."""
        return await self._run(self._sync_index)

    def _sync_index(self) -> int:
        """Bring the recall index up to this connection's view of the table."""
        db = self._db
        version = db.execute("PRAGMA data_version").fetchone()[0]
        index = self._index
        if index is None or version != self._index_version:
            self._queue.clear()  # the table below includes them
            self._index = index = self._read_index(index)
            self._index_version = version
        elif self._queue:
            for op in self._queue:
                if op[0] == "add":
                    index.add(*op[1:])
                elif op[0] == "del":
                    index.remove(op[1])
                else:
                    index.refresh(*op[1:])
            self._queue.clear()
        return len(index)

    def _read_index(self, index: RecallIndex | None) -> RecallIndex:
        """A new index of the whole table, or ``index`` brought in line with it (another
        connection committed: rows gone, new, or with another expiry)."""
        db = self._db
        select = ("SELECT id, doc_id, agent_id, scope, scope_key, title, tags, body, "
                  "expires_at_ms, updated_at_ms, pinned FROM memory_documents")  # fmt: skip
        if index is None:
            index = RecallIndex()
            for row in db.execute(select):
                index.add(row[0], row[1], (row[2], row[3], row[4]), row[5:8], row[8], row[9],
                          bool(row[10]))  # fmt: skip
            return index
        now = {r[0]: (r[1], r[2], r[3], bool(r[4])) for r in db.execute(
            "SELECT id, doc_id, expires_at_ms, updated_at_ms, pinned FROM memory_documents"
        )}  # fmt: skip
        for rowid, doc in list(index.docs.items()):
            found = now.get(rowid)
            if found is None or found[0] != doc.doc_id:
                index.remove(rowid)
            elif found[1:] != (doc.expires_at_ms, doc.updated_at_ms, doc.pinned):
                index.refresh(rowid, *found[1:])
        new = [rowid for rowid in now if rowid not in index.docs]
        for i in range(0, len(new), 500):
            part = new[i : i + 500]
            marks = ",".join("?" * len(part))
            for row in db.execute(f"{select} WHERE id IN ({marks})", part):
                index.add(row[0], row[1], (row[2], row[3], row[4]), row[5:8], row[8], row[9],
                          bool(row[10]))  # fmt: skip
        return index

    async def search_all(self, query: str, *, limit: int = 10) -> RecallResult:
        vector = await self._query_vector(query)
        return await self._run(
            lambda: self._search(query, "1 = 1", [], limit, touch=False, vector=vector)
        )

    def _search(
        self,
        query: str,
        where: str,
        params: list[Any],
        limit: int,
        *,
        touch: bool,
        buckets: tuple[Bucket, ...] | None = None,
        vector: bytes | None = None,
    ) -> RecallResult:
        words = tokens(query)
        if not words:
            return RecallResult(empty_query=True)
        limit = max(1, min(limit, MAX_RECALL))
        now = self._clock()
        wanted = max(_CANDIDATES, limit * 4)
        terms = [index_tokens(w) for w in words] if buckets is not None else None
        scored: list[_Scored]
        if terms is not None and all(len(t) <= 1 for t in terms):
            # The recall index's bm25 top-k over the context's buckets, ranked by the index's
            # copy of each candidate's scope, update time and pin (as this connection last
            # saw them committed); the rows are then read with the scope rule in the WHERE
            # clause (a row gone or expired since: the next one).
            self._sync_index()
            assert self._index is not None
            best = self._index.top(buckets or (), [t[0] for t in terms if t], wanted, now)
            meta = self._index.docs
            scored = []
            for rowid, lexical in best:
                entry = meta[rowid]
                weight = SCOPE_WEIGHTS[entry.bucket[1]]
                fade = decay(now - entry.updated_at_ms)
                score = lexical * weight * fade * (_PIN_BOOST if entry.pinned else 1.0)
                scored.append((score, rowid, lexical, weight, fade))
        else:
            # a word FTS5 splits into a phrase (or the operator's search of every scope)
            scored = self._ranked(
                f"SELECT d.id, d.scope, d.updated_at_ms, d.pinned, {_BM25} FROM memory_fts "
                "JOIN memory_documents AS d ON d.id = memory_fts.rowid WHERE memory_fts MATCH ? "
                f"AND {where} AND (d.expires_at_ms IS NULL OR d.expires_at_ms > ?) "
                f"ORDER BY {_BM25} LIMIT ?",
                (fts5_query(query), *params, now, wanted),
                now,
            )
        scored.sort(key=_first, reverse=True)
        lanes: list[list[int]] = [[t[1] for t in scored]]
        facts = {t[1]: t for t in scored}
        idents = identifiers(query)
        if idents:
            found = self._ranked(
                "SELECT d.id, d.scope, d.updated_at_ms, d.pinned, bm25(memory_trigram) "
                "FROM memory_trigram JOIN memory_documents AS d ON d.id = memory_trigram.rowid "
                f"WHERE memory_trigram MATCH ? AND {where} AND (d.expires_at_ms IS NULL OR "
                "d.expires_at_ms > ?) ORDER BY bm25(memory_trigram) LIMIT ?",
                (trigram_query(idents), *params, now, wanted),
                now,
            )
            found.sort(key=_first, reverse=True)
            lanes.append([t[1] for t in found])
            for t in found:
                facts.setdefault(t[1], (0.0, t[1], 0.0, t[3], t[4]))
        if vector is not None and self._embedder is not None:
            dense = self._dense(vector, where, params, now, wanted)
            lanes.append([t[1] for t in dense])
            for t in dense:
                facts.setdefault(t[1], (0.0, t[1], 0.0, t[3], t[4]))
        ranking: list[tuple[float, int, float, float, float, list[int | None]]]
        if len(lanes) == 1 or not any(lanes[1:]):
            ranking = [(*t, [i, None, None]) for i, t in enumerate(scored, 1)]
        else:
            fused = fuse(lanes)
            ranking = []
            for rowid, score, ranks in fused:
                _s, _r, lexical, weight, fade = facts[rowid]
                ranking.append((score, rowid, lexical, weight, fade, _named(lanes, idents, ranks)))
        hits: list[RecallHit] = []
        start = 0
        while len(hits) < limit and start < len(ranking):
            part = ranking[start : start + limit - len(hits)]
            start += len(part)
            marks = ",".join("?" * len(part))
            read = {row[-1]: row for row in self._db.execute(
                f"SELECT {_D_COLUMNS}, d.id FROM memory_documents AS d NOT INDEXED "
                f"WHERE d.id IN ({marks}) AND {where} "
                "AND (d.expires_at_ms IS NULL OR d.expires_at_ms > ?)",
                (*(t[1] for t in part), *params, now),
            )}  # fmt: skip
            hits.extend(
                RecallHit(document=_document(read[rowid][:-1]), score=score, lexical=lexical,
                          scope_weight=weight, decay=fade, lexical_rank=ranks[0],
                          trigram_rank=ranks[1], embedding_rank=ranks[2])
                for score, rowid, lexical, weight, fade, ranks in part if rowid in read
            )  # fmt: skip
        chosen = tuple(hits)
        if touch:
            # The stamps wait for the next write (or read of stamps), so a recall commits
            # nothing; every eviction decision sees them (flushed first in its transaction).
            for h in chosen:
                self._touched[h.document.doc_id] = now
        return RecallResult(hits=chosen)

    def _dense(
        self, vector: bytes, where: str, params: list[Any], now: int, k: int
    ) -> list[_Scored]:
        """The embeddings lane: brute-force cosine over the visible, unexpired rows' vectors,
        times the scope weight, decay and pin boost; the best ``k``."""
        rows = self._db.execute(
            "SELECT d.id, d.scope, d.updated_at_ms, d.pinned, v.vec FROM memory_vectors AS v "
            f"JOIN memory_documents AS d ON d.id = v.id WHERE {where} "
            "AND (d.expires_at_ms IS NULL OR d.expires_at_ms > ?)",
            (*params, now),
        ).fetchall()
        assert self._embedder is not None
        sims = self._embedder.similarities(vector, [r[4] for r in rows])
        out: list[_Scored] = []
        for (rowid, scope, updated, pinned, _vec), sim in zip(rows, sims, strict=True):
            if sim <= 0.0:  # no direction in common: not a match
                continue
            weight = SCOPE_WEIGHTS[scope]
            fade = decay(now - updated)
            out.append((sim * weight * fade * (_PIN_BOOST if pinned else 1.0), rowid, 0.0,
                        weight, fade))  # fmt: skip
        out.sort(key=_first, reverse=True)
        return out[:k]

    def _ranked(self, sql: str, args: Sequence[Any], now: int) -> list[_Scored]:
        """Rows ``(id, scope, updated_at_ms, pinned, bm25)`` as scored candidates."""
        out: list[_Scored] = []
        for rowid, scope, updated, pinned, rank in self._db.execute(sql, args):
            lexical = -float(rank)
            weight = SCOPE_WEIGHTS[scope]
            fade = decay(now - updated)
            score = lexical * weight * fade * (_PIN_BOOST if pinned else 1.0)
            out.append((score, rowid, lexical, weight, fade))
        return out

    async def get(self, doc_id: str) -> MemoryDocument | None:
        def go() -> MemoryDocument | None:
            self._flush_touches()
            row = self._db.execute(
                f"SELECT {_COLUMNS} FROM memory_documents WHERE doc_id = ?", (doc_id,)
            ).fetchone()
            return None if row is None else _document(row)

        return await self._run(go)

    async def list_documents(
        self, *, agent_id: str | None = None, scope: str | None = None, limit: int = 100
    ) -> list[MemoryDocument]:
        def go() -> list[MemoryDocument]:
            self._flush_touches()
            conds, params = ["1 = 1"], []
            if agent_id is not None:
                conds.append("agent_id = ?")
                params.append(agent_id)
            if scope is not None:
                conds.append("scope = ?")
                params.append(scope)
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM memory_documents WHERE {' AND '.join(conds)} "
                "ORDER BY updated_at_ms DESC LIMIT ?",
                (*params, limit),
            ).fetchall()
            return [_document(r) for r in rows]

        return await self._run(go)

    async def page(self, *, after: str | None = None, limit: int = 200) -> list[MemoryDocument]:
        def go() -> list[MemoryDocument]:
            self._flush_touches()
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM memory_documents WHERE doc_id > ? ORDER BY doc_id LIMIT ?",
                (after or "", limit),
            ).fetchall()
            return [_document(r) for r in rows]

        return await self._run(go)

    async def statistics(self) -> MemoryStatistics:
        def go() -> MemoryStatistics:
            db = self._db
            docs, size = db.execute("SELECT docs, bytes FROM memory_totals").fetchone()
            per_scope = dict(
                db.execute("SELECT scope, sum(docs) FROM memory_scopes GROUP BY scope").fetchall()
            )
            counters = dict(db.execute("SELECT name, value FROM memory_counters").fetchall())
            return _statistics(self.backend, docs, size, per_scope, counters, self._limits)

        return await self._run(go)

    def raw_fts_count(self) -> int:
        """The FTS index's row count as FTS5 itself sees it (tests: no orphan rows)."""
        with self._lock:
            row = self._db.execute("SELECT count(*) FROM memory_fts_docsize").fetchone()
            return int(row[0])

    async def close(self) -> None:
        with self._lock:
            with contextlib.suppress(sqlite3.Error):
                self._flush_touches()
            self._db.close()


#: A candidate: (score, rowid, lexical, scope weight, decay).
_Scored = tuple[float, int, float, float, float]


def _first(item: _Scored) -> float:
    return item[0]


def _named(
    lanes: Sequence[Sequence[int]], idents: Sequence[str], ranks: list[int | None]
) -> list[int | None]:
    """A fused hit's ranks as [lexical, trigram, embedding] whichever lanes ran."""
    named: list[int | None] = [ranks[0], None, None]
    i = 1
    if idents:
        named[1] = ranks[i]
        i += 1
    if i < len(lanes):
        named[2] = ranks[i]
    return named


def _statistics(
    backend: str,
    docs: int,
    size: int,
    per_scope: dict[str, int],
    counters: dict[str, int],
    limits: tuple[int, int, int, int],
) -> MemoryStatistics:
    return MemoryStatistics(
        backend=backend,
        documents=docs,
        bytes=size,
        per_scope={k: int(v) for k, v in per_scope.items() if v},
        evictions={
            k: counters.get(f"evicted_{k}", 0) for k in ("expired", "run_summary", "explicit")
        },
        refused={"full": counters.get("refused_full", 0)},
        redactions=counters.get("redactions", 0),
        swept=counters.get("swept", 0),
        deduplicated=counters.get("deduplicated", 0),
        consolidated=counters.get("consolidated", 0),
        max_docs=limits[2],
        max_bytes=limits[3],
    )


def known_from(values: Iterable[str]) -> tuple[str, ...]:
    """The known secret values worth matching (8 characters or more), deduplicated."""
    return tuple(dict.fromkeys(v for v in values if len(v) >= 8))
