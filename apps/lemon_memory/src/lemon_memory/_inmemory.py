"""The in-memory backend: the :class:`~lemon_memory.MemoryStore` Protocol with nothing on disk.

For tests and throwaway runs (nothing survives :meth:`InMemoryMemoryStore.close`). It keeps
every rule of the SQLite backend: the same screened :class:`~lemon_memory.Write` records, the
same scope rule (a read only ever looks at the context's own ``(agent, scope, scope_key)``
buckets, so another agent's or session's documents are never read), upsert by content hash,
the bounds and their eviction order, the retention sweep, the counters of ``statistics()``,
and the same ranking: the query built by :func:`~lemon_memory.query.tokens` (quoted tokens,
ORed), each document tokenized like FTS5's ``porter unicode61 remove_diacritics 2``, scored by
FTS5's bm25 (k1 1.2, b 0.75, column weights title 3, tags 2, body 1) over the best 40 matches,
then the scope weight, the recency decay and the pinned boost. Given an
:class:`~lemon_memory.embeddings.Embedder`, each document's vector is kept beside it (and
dropped with it), and recall fuses a brute-force cosine ranking over the visible buckets in
by reciprocal rank, as the SQLite backend does.

Every method runs synchronously on the event loop with no ``await`` in between (an
embedder's encoding is awaited before the method reads or changes anything), so each one is
atomic; ``put_many`` restores its snapshot when any write fails (all or nothing).
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

import msgspec

from lemon_memory._fusion import dense_top, fuse_lanes, identifiers
from lemon_memory._rows import CANDIDATES as _CANDIDATES
from lemon_memory._rows import PIN_BOOST as _PIN_BOOST
from lemon_memory._rows import now_ms as _now_ms
from lemon_memory._sqlite import _statistics
from lemon_memory._tokens import index_tokens
from lemon_memory._versions import (
    MAX_VERSIONS_PER_SCOPE,
    VERSION_TTL_MS,
    Change,
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
from lemon_memory.errors import ScopeError, ScopeFullError
from lemon_memory.query import tokens as _query_tokens
from lemon_memory.store import MAX_RECALL, Write, decay, new_doc_id

__all__ = ["InMemoryMemoryStore", "index_tokens"]

_WEIGHTS: Final = (3.0, 2.0, 1.0)  # title, tags, body (the SQLite backend's bm25 weights)
_K1: Final = 1.2
_B: Final = 0.75

ScopeId = tuple[str, str, str]  # agent_id, scope, scope_key


@dataclass(slots=True)
class _Entry:
    doc: MemoryDocument
    size: int
    columns: tuple[list[str], list[str], list[str]]  # title, tags, body tokens
    counts: tuple[Counter[str], Counter[str], Counter[str]]

    @property
    def length(self) -> int:
        return sum(len(c) for c in self.columns)


@dataclass(frozen=True, slots=True)
class _Version:
    seq: int
    change_id: str
    change: Change
    doc: MemoryDocument  # as it was before the change
    at_ms: int


@dataclass(slots=True)
class _State:
    docs: dict[str, _Entry] = field(default_factory=dict)
    by_scope: dict[ScopeId, dict[str, None]] = field(default_factory=dict)
    by_hash: dict[tuple[str, str, str, str], str] = field(default_factory=dict)
    postings: dict[str, set[str]] = field(default_factory=dict)
    scope_bytes: dict[ScopeId, int] = field(default_factory=dict)
    total_bytes: int = 0
    total_tokens: int = 0
    counters: Counter[str] = field(default_factory=Counter)
    vectors: dict[str, bytes] = field(default_factory=dict)  # the embeddings lane's
    versions: list[_Version] = field(default_factory=list)  # oldest first
    seq: int = 0

    def copy(self) -> _State:
        return _State(
            docs=dict(self.docs),
            by_scope={k: dict(v) for k, v in self.by_scope.items()},
            by_hash=dict(self.by_hash),
            postings={k: set(v) for k, v in self.postings.items()},
            scope_bytes=dict(self.scope_bytes),
            total_bytes=self.total_bytes,
            total_tokens=self.total_tokens,
            counters=Counter(self.counters),
            vectors=dict(self.vectors),
            versions=list(self.versions),
            seq=self.seq,
        )


def _scope_of(doc: MemoryDocument) -> ScopeId:
    return (doc.agent_id, doc.scope, doc.scope_key)


class InMemoryMemoryStore:
    """A :class:`~lemon_memory.MemoryStore` held in this process (see the module docstring)."""

    backend = "memory"

    def __init__(
        self,
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
        self._limits = (max_docs_per_scope, max_bytes_per_scope, max_docs, max_bytes)
        self._sweep_batch = sweep_batch
        self._clock = clock
        self._s = _State()
        self._batch = False

    # -- index plumbing ----------------------------------------------------------------------

    def _add(self, doc: MemoryDocument, size: int) -> None:
        s = self._s
        columns = (
            index_tokens(doc.title),
            index_tokens(" ".join(doc.tags)),
            index_tokens(doc.body),
        )
        entry = _Entry(
            doc=doc, size=size, columns=columns, counts=(Counter(columns[0]),
            Counter(columns[1]), Counter(columns[2]))
        )  # fmt: skip
        s.docs[doc.doc_id] = entry
        sid = _scope_of(doc)
        s.by_scope.setdefault(sid, {})[doc.doc_id] = None
        s.by_hash[(*sid, doc.content_hash)] = doc.doc_id
        s.scope_bytes[sid] = s.scope_bytes.get(sid, 0) + size
        s.total_bytes += size
        s.total_tokens += entry.length
        for term in {t for col in columns for t in col}:
            s.postings.setdefault(term, set()).add(doc.doc_id)

    def _remove(self, doc_id: str) -> _Entry | None:
        """Drop a document and its index entries together."""
        s = self._s
        entry = s.docs.pop(doc_id, None)
        if entry is None:
            return None
        doc = entry.doc
        sid = _scope_of(doc)
        members = s.by_scope[sid]
        del members[doc_id]
        if not members:
            del s.by_scope[sid]
        s.by_hash.pop((*sid, doc.content_hash), None)
        s.vectors.pop(doc_id, None)
        s.scope_bytes[sid] -= entry.size
        if not members:
            del s.scope_bytes[sid]
        s.total_bytes -= entry.size
        s.total_tokens -= entry.length
        for term in {t for col in entry.columns for t in col}:
            holders = s.postings[term]
            holders.discard(doc_id)
            if not holders:
                del s.postings[term]
        return entry

    def _replace(self, doc: MemoryDocument) -> None:
        """Change a document's fields that the index does not cover."""
        self._s.docs[doc.doc_id].doc = doc

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
        """Give every document without a vector its vector, ``batch`` at a time; how many
        were encoded (a document forgotten while encoding gets none)."""
        added = 0
        while (embedder := self._embedder) is not None:
            s = self._s
            missing = [e.doc for d, e in s.docs.items() if d not in s.vectors][:batch]
            if not missing:
                break
            texts = [vector_text(d.title, " ".join(d.tags), d.body) for d in missing]
            vectors = await asyncio.to_thread(embedder.encode, texts)
            s = self._s
            for doc, vector in zip(missing, vectors, strict=True):
                if doc.doc_id in s.docs:
                    s.vectors.setdefault(doc.doc_id, vector)
            added += len(missing)
        return added

    def vector_count(self) -> int:
        """Documents with a vector (tests: none left behind)."""
        return len(self._s.vectors)

    async def _encode(self, texts: list[str]) -> list[bytes] | None:
        embedder = self._embedder
        if embedder is None:
            return None
        return await asyncio.to_thread(embedder.encode, texts)

    async def put(self, write: Write) -> MemoryDocument:
        vectors = await self._encode([document_text(write)])
        return self._put(write, self._clock(), vectors[0] if vectors else None)

    async def put_many(self, writes: Sequence[Write]) -> list[MemoryDocument]:
        vectors = await self._encode([document_text(w) for w in writes]) if writes else None
        snapshot = self._s.copy()
        self._batch = True
        try:
            return [
                self._put(w, self._clock(), vectors[i] if vectors else None)
                for i, w in enumerate(writes)
            ]
        except BaseException:
            self._s = snapshot
            raise
        finally:
            self._batch = False

    def _put(self, w: Write, now: int, vector: bytes | None = None) -> MemoryDocument:
        s = self._s
        found = s.by_hash.get((w.agent_id, w.scope, w.scope_key, w.content_hash))
        if found is not None:
            old = s.docs[found].doc
            doc = msgspec.structs.replace(
                old, updated_at_ms=now, pinned=old.pinned or w.pinned,
                expires_at_ms=w.expires_at_ms,
            )  # fmt: skip
            self._replace(doc)
            if vector is not None:
                s.vectors.setdefault(found, vector)
            s.counters["deduplicated"] += 1
            return doc
        self._make_room(w, now)
        doc = MemoryDocument(
            doc_id=new_doc_id(), kind=w.kind, scope=w.scope, scope_key=w.scope_key,
            agent_id=w.agent_id, title=w.title, body=w.body, tags=w.tags, source=w.source,
            created_at_ms=now, updated_at_ms=now, expires_at_ms=w.expires_at_ms,
            pinned=w.pinned, content_hash=w.content_hash,
        )  # fmt: skip
        self._add(doc, w.size)
        if vector is not None:
            s.vectors[doc.doc_id] = vector
        if w.redactions:
            s.counters["redactions"] += w.redactions
        return doc

    def _make_room(self, w: Write, now: int) -> None:
        """Evict until ``w`` fits (the SQLite backend's order: expired, then unpinned run
        summaries oldest first, then unpinned explicit memories least recently recalled)."""
        max_scope_docs, max_scope_bytes, max_docs, max_bytes = self._limits
        s = self._s
        sid: ScopeId = (w.agent_id, w.scope, w.scope_key)
        for scoped, limits, what in (
            (True, (max_scope_docs, max_scope_bytes), "this scope"),
            (False, (max_docs, max_bytes), "the memory store"),
        ):
            while True:
                if scoped:
                    docs, size = len(s.by_scope.get(sid, ())), s.scope_bytes.get(sid, 0)
                else:
                    docs, size = len(s.docs), s.total_bytes
                if docs + 1 <= limits[0] and size + w.size <= limits[1]:
                    break
                pool = s.by_scope.get(sid, {}) if scoped else s.docs
                if not self._evict_one(pool, now):
                    if not self._batch:
                        s.counters["refused_full"] += 1
                    raise ScopeFullError(
                        f"{what} is full ({docs} documents, {size} bytes) and every document "
                        "in it is pinned: forget or unpin one (lemon memory list / forget) "
                        "before remembering more"
                    )

    def _evict_one(self, pool: Iterable[str], now: int) -> bool:
        docs = [self._s.docs[d].doc for d in pool]
        expired = [d for d in docs if d.expires_at_ms is not None and d.expires_at_ms <= now]
        summaries = [d for d in docs if not d.pinned and d.kind == "run_summary"]
        explicit = [d for d in docs if not d.pinned]
        for reason, victims, key in (
            ("expired", expired, None),
            ("run_summary", summaries, lambda d: d.updated_at_ms),
            ("explicit", explicit, lambda d: d.last_recalled_at_ms or d.updated_at_ms),
        ):
            if victims:
                victim = victims[0] if key is None else min(victims, key=key)
                self._remove(victim.doc_id)
                self._s.counters[f"evicted_{reason}"] += 1
                return True
        return False

    def _visible_doc(self, ctx: MemoryContext, doc_id: str) -> bool:
        entry = self._s.docs.get(doc_id)
        if entry is None or entry.doc.agent_id != ctx.agent_id:
            return False
        return ctx.scope_keys().get(entry.doc.scope) == entry.doc.scope_key

    async def forget(self, ctx: MemoryContext, doc_id: str) -> None:
        if not self._visible_doc(ctx, doc_id):
            raise ScopeError(
                f"no document {doc_id!r} in the scopes this run can see (session, "
                "project, agent, user of this run): recall first to find its id"
            )
        self._keep_versions("forget", [self._s.docs[doc_id].doc])
        self._remove(doc_id)

    async def forget_any(self, doc_id: str) -> bool:
        entry = self._s.docs.get(doc_id)
        if entry is None:
            return False
        self._keep_versions("forget", [entry.doc])
        self._remove(doc_id)
        return True

    async def forget_scope(
        self, scope: str, *, agent_id: str | None = None, scope_key: str | None = None
    ) -> int:
        gone = [
            doc_id
            for (agent, sc, key), members in self._s.by_scope.items()
            if sc == scope
            and (agent_id is None or agent == agent_id)
            and (scope_key is None or key == scope_key)
            for doc_id in members
        ]
        self._keep_versions("forget_scope", [self._s.docs[d].doc for d in gone])
        for doc_id in gone:
            self._remove(doc_id)
        return len(gone)

    async def merge(self, keep_id: str, drop_ids: Sequence[str]) -> bool:
        s = self._s
        drops = [d for d in dict.fromkeys(drop_ids) if d != keep_id]
        if (
            keep_id not in s.docs
            or len(drops) != len(drop_ids)
            or any(d not in s.docs for d in drops)
        ):
            return False
        self._keep_versions("merge", [s.docs[d].doc for d in (keep_id, *drops)])
        for doc_id in drops:
            self._remove(doc_id)
        keep = s.docs[keep_id].doc
        merged = tuple(dict.fromkeys([*keep.supersedes, *drops]))
        self._replace(msgspec.structs.replace(keep, supersedes=merged))
        s.counters["consolidated"] += len(drops)
        return True

    def _keep_versions(self, change: Change, docs: Sequence[MemoryDocument]) -> None:
        """Record ``docs`` as they are now, as one change, and apply the bounds."""
        if not docs:
            return
        s, now, change_id = self._s, self._clock(), new_change_id()
        for doc in docs:
            s.seq += 1
            s.versions.append(_Version(seq=s.seq, change_id=change_id, change=change, doc=doc,
                                       at_ms=now))  # fmt: skip
        per_scope: Counter[ScopeId] = Counter()
        kept: list[_Version] = []
        for v in reversed(s.versions):  # newest first
            sid = _scope_of(v.doc)
            if v.at_ms < now - VERSION_TTL_MS or per_scope[sid] >= MAX_VERSIONS_PER_SCOPE:
                continue
            per_scope[sid] += 1
            kept.append(v)
        kept.reverse()
        s.versions = kept

    async def undo(self, doc_id: str | None = None) -> Undone | None:
        s, now = self._s, self._clock()
        live = [v for v in s.versions if v.at_ms >= now - VERSION_TTL_MS]
        if doc_id is not None:
            live = [v for v in live if v.doc.doc_id == doc_id]
        if not live:
            return None
        last = live[-1]
        used = [last] if doc_id is not None else [v for v in live if v.change_id == last.change_id]
        restored: list[MemoryDocument] = []
        skipped: list[str] = []
        for v in used:
            old = v.doc
            current = s.docs.get(old.doc_id)
            if current is not None and current.doc.content_hash == old.content_hash:
                doc = msgspec.structs.replace(current.doc, supersedes=old.supersedes)
                self._replace(doc)
                restored.append(doc)
                continue
            if current is not None:
                self._remove(old.doc_id)
            if (*_scope_of(old), old.content_hash) in s.by_hash:
                skipped.append(old.doc_id)  # the same text is stored again under another id
                continue
            self._add(old, size_of(old))
            restored.append(old)
        gone = {v.seq for v in used}
        s.versions = [v for v in s.versions if v.seq not in gone]
        if restored and self._embedder is not None:
            await self.backfill()  # a restored document's vector went with its removal
        return Undone(change_id=last.change_id, change=last.change, restored=tuple(restored),
                      skipped=tuple(skipped))  # fmt: skip

    async def history(self, doc_id: str, *, limit: int = 20) -> list[Version]:
        floor = self._clock() - VERSION_TTL_MS
        found = [v for v in reversed(self._s.versions)
                 if v.doc.doc_id == doc_id and v.at_ms >= floor][:limit]  # fmt: skip
        return [Version(change_id=v.change_id, change=v.change, at_ms=v.at_ms, document=v.doc)
                for v in found]  # fmt: skip

    async def version_count(self) -> int:
        return len(self._s.versions)

    async def sweep(self, now_ms: int | None = None) -> int:
        now = self._clock() if now_ms is None else now_ms
        expired = [
            doc_id
            for doc_id, e in self._s.docs.items()
            if e.doc.expires_at_ms is not None and e.doc.expires_at_ms <= now
        ][: self._sweep_batch]
        for doc_id in expired:
            self._remove(doc_id)
        if expired:
            self._s.counters["swept"] += len(expired)
        return len(expired)

    # -- reads -------------------------------------------------------------------------------

    async def recall(
        self, ctx: MemoryContext, query: str, *, scope: str | None = None, limit: int = 5
    ) -> RecallResult:
        keys = ctx.narrow(scope)  # ScopeError here, before any read
        allowed = {(ctx.agent_id, name, key) for name, key in keys.items()}
        vector = await self._query_vector(query)
        return self._search(query, allowed, limit, touch=True, vector=vector)

    async def search_all(self, query: str, *, limit: int = 10) -> RecallResult:
        vector = await self._query_vector(query)
        return self._search(query, None, limit, touch=False, vector=vector)

    async def _query_vector(self, query: str) -> bytes | None:
        if self._embedder is None or not _query_tokens(query):
            return None
        found = await self._encode([query])
        return found[0] if found else None

    def _search(
        self,
        query: str,
        allowed: set[ScopeId] | None,
        limit: int,
        *,
        touch: bool,
        vector: bytes | None = None,
    ) -> RecallResult:
        phrases = [p for p in (index_tokens(t) for t in _query_tokens(query)) if p]
        if not phrases:
            return RecallResult(empty_query=True)
        limit = max(1, min(limit, MAX_RECALL))
        now = self._clock()
        s = self._s
        n_docs = len(s.docs)
        avgdl = s.total_tokens / n_docs if n_docs else 0.0
        # Each phrase's matching documents over the whole index (bm25's IDF is index-wide,
        # as FTS5's), then only the visible, unexpired ones are ranked.
        matches: list[tuple[list[str], dict[str, tuple[int, int, int]]]] = []
        for phrase in phrases:
            holders = set.intersection(*(s.postings.get(t, set()) for t in phrase))
            hits = {d: _phrase_hits(s.docs[d], phrase) for d in holders}
            matches.append((phrase, {d: h for d, h in hits.items() if any(h)}))
        scores: dict[str, float] = {}
        for _phrase, found in matches:
            n = len(found)
            idf = math.log((n_docs - n + 0.5) / (n + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            for doc_id, per_column in found.items():
                entry = s.docs[doc_id]
                doc = entry.doc
                if allowed is not None and _scope_of(doc) not in allowed:
                    continue
                if doc.expires_at_ms is not None and doc.expires_at_ms <= now:
                    continue
                freq = sum(w * h for w, h in zip(_WEIGHTS, per_column, strict=True))
                norm = _K1 * (1 - _B + _B * entry.length / avgdl) if avgdl else _K1
                scores[doc_id] = scores.get(doc_id, 0.0) + idf * freq * (_K1 + 1) / (freq + norm)
        best = heapq.nlargest(max(_CANDIDATES, limit * 4), scores.items(), key=lambda kv: kv[1])
        ranked: list[RecallHit] = []
        for doc_id, lexical in best:
            doc = s.docs[doc_id].doc
            weight = SCOPE_WEIGHTS[doc.scope]
            fade = decay(now - doc.updated_at_ms)
            score = lexical * weight * fade * (_PIN_BOOST if doc.pinned else 1.0)
            ranked.append(
                RecallHit(document=doc, score=score, lexical=lexical, scope_weight=weight,
                          decay=fade)
            )  # fmt: skip
        ranked.sort(key=lambda h: -h.score)
        ranked = self._fused(query, ranked, allowed, now, max(_CANDIDATES, limit * 4), vector)
        chosen = ranked[:limit]
        if touch:
            for i, hit in enumerate(chosen):
                old = hit.document
                doc = msgspec.structs.replace(
                    old, last_recalled_at_ms=max(old.last_recalled_at_ms or 0, now)
                )
                self._replace(doc)
                chosen[i] = msgspec.structs.replace(hit, document=doc)
        return RecallResult(hits=tuple(chosen))

    def _fused(
        self,
        query: str,
        ranked: list[RecallHit],
        allowed: set[ScopeId] | None,
        now: int,
        k: int,
        vector: bytes | None = None,
    ) -> list[RecallHit]:
        """The identifier lane (each identifier a substring of the lower-cased text) and the
        embeddings lane (cosine of the query's vector with each document's), both over the
        visible buckets only, fused with ``ranked`` by rank; ``ranked`` as it is when neither
        lane ran or found anything."""
        idents = identifiers(query)
        embedder = self._embedder if vector is not None else None
        if not idents and embedder is None:
            return [msgspec.structs.replace(h, lexical_rank=i) for i, h in enumerate(ranked, 1)]
        s = self._s
        scopes = s.by_scope if allowed is None else {a: s.by_scope.get(a, {}) for a in allowed}
        visible = [
            doc
            for members in scopes.values()
            for doc in (s.docs[d].doc for d in members)
            if doc.expires_at_ms is None or doc.expires_at_ms > now
        ]
        matched: list[tuple[int, float, MemoryDocument]] = []
        for doc in visible if idents else ():
            text = f"{doc.title} {' '.join(doc.tags)} {doc.body}".lower()
            n = sum(i in text for i in idents)
            if n:
                rank = SCOPE_WEIGHTS[doc.scope] * decay(now - doc.updated_at_ms)
                matched.append((n, rank * (_PIN_BOOST if doc.pinned else 1.0), doc))
        matched.sort(key=lambda m: (-m[0], -m[1]))
        near: list[MemoryDocument] = []
        if embedder is not None and vector is not None:
            with_vec = [d for d in visible if d.doc_id in s.vectors]
            sims = embedder.similarities(vector, [s.vectors[d.doc_id] for d in with_vec])
            by_id = {d.doc_id: d for d in with_vec}
            rows = [(d.doc_id, d.scope, d.updated_at_ms, d.pinned) for d in with_vec]
            near = [by_id[key] for _score, key, _w, _f in dense_top(sims, rows, now, k)]
        fused = fuse_lanes(
            [h.document.doc_id for h in ranked],
            [m[2].doc_id for m in matched[:k]],
            [d.doc_id for d in near],
        )
        if fused is None:
            return [msgspec.structs.replace(h, lexical_rank=i) for i, h in enumerate(ranked, 1)]
        found = {h.document.doc_id: h for h in ranked}
        for doc in [*(m[2] for m in matched[:k]), *near]:
            found.setdefault(doc.doc_id, RecallHit(
                document=doc, score=0.0, lexical=0.0, scope_weight=SCOPE_WEIGHTS[doc.scope],
                decay=decay(now - doc.updated_at_ms)))  # fmt: skip
        return [
            msgspec.structs.replace(found[key], score=score, lexical_rank=ranks[0],
                                    trigram_rank=ranks[1], embedding_rank=ranks[2])
            for key, score, ranks in fused
        ]  # fmt: skip

    async def get(self, doc_id: str) -> MemoryDocument | None:
        entry = self._s.docs.get(doc_id)
        return None if entry is None else entry.doc

    async def list_documents(
        self, *, agent_id: str | None = None, scope: str | None = None, limit: int = 100
    ) -> list[MemoryDocument]:
        docs = [
            e.doc
            for e in self._s.docs.values()
            if (agent_id is None or e.doc.agent_id == agent_id)
            and (scope is None or e.doc.scope == scope)
        ]
        return heapq.nlargest(limit, docs, key=lambda d: d.updated_at_ms)

    async def page(self, *, after: str | None = None, limit: int = 200) -> list[MemoryDocument]:
        ids = sorted(d for d in self._s.docs if d > (after or ""))[:limit]
        return [self._s.docs[d].doc for d in ids]

    async def statistics(self) -> MemoryStatistics:
        s = self._s
        per_scope: Counter[str] = Counter()
        for (_agent, scope, _key), members in s.by_scope.items():
            per_scope[scope] += len(members)
        return _statistics(
            self.backend, len(s.docs), s.total_bytes, dict(per_scope), dict(s.counters),
            self._limits,
        )  # fmt: skip

    def index_count(self) -> int:
        """Documents the text index holds (tests: no orphan entries)."""
        indexed = {d for holders in self._s.postings.values() for d in holders}
        return len(indexed) + sum(1 for e in self._s.docs.values() if e.length == 0)

    async def close(self) -> None:
        self._s = _State()


def _phrase_hits(entry: _Entry, phrase: list[str]) -> tuple[int, int, int]:
    """How often ``phrase`` occurs in each column (title, tags, body)."""
    if len(phrase) == 1:
        term = phrase[0]
        a, b, c = entry.counts
        return (a[term], b[term], c[term])
    width = len(phrase)
    out = []
    for col in entry.columns:
        out.append(sum(1 for i in range(len(col) - width + 1) if col[i : i + width] == phrase))
    return (out[0], out[1], out[2])
