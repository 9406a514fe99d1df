"""The SQLite backend's in-process recall index: FTS5's bm25 top-k without scoring every match.

FTS5 ranks a ``MATCH ... ORDER BY bm25 LIMIT k`` by computing bm25 for *every* matching row:
a query with a common word matches most of a scope, so a top-10 over 20,000 documents costs
10 to 40 ms however small k is. This index gives the same top-k (the same formula: k1 1.2,
b 0.75, column weights title 3, tags 2, body 1 summed into one frequency, the row's length in
tokens over all columns, the IDF ``log((N - n + 0.5) / (n + 0.5))`` over the whole index,
1e-6 when not positive) by visiting score classes best first:

* a row's bm25 depends only on its bucket, its length and its weighted frequency of each
  query term; so each ``(bucket, term)`` (a bucket is ``(agent_id, scope, scope_key)``: a read
  only ever looks at the context's own buckets) keeps a set of rowids per ``(frequency,
  length)``;
* for each bucket and length the query's terms' options (a frequency, or absent) are
  combined lazily in descending order of their summed contribution (the k-best combinations
  of sorted lists), all lengths in one heap; a popped combination's rows are the
  intersection of its sets (C set operations), and every row not seen before has exactly
  that score (a row that also holds another query term belongs to a better combination,
  popped earlier); the walk stops at k rows.

A query with more than 16 terms is scored row by row over the union of its postings.

Documents are tokenized like ``porter unicode61 remove_diacritics 2`` (the in-memory
backend's :func:`~lemon_memory._inmemory.index_tokens`). The store keeps the index in step
with its own commits and re-reads the table when ``PRAGMA data_version`` shows another
connection committed.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from lemon_memory._tokens import index_tokens

__all__ = ["Bucket", "RecallIndex"]

Bucket = tuple[str, str, str]  # agent_id, scope, scope_key

_K1: Final = 1.2
_B: Final = 0.75
_WEIGHTS: Final = (3, 2, 1)  # title, tags, body (the SQLite backend's bm25 weights)
#: Terms beyond this many: the query is scored row by row (the union of its postings).
_MAX_LATTICE_TERMS: Final = 16


@dataclass(slots=True)
class _Doc:
    doc_id: str
    bucket: Bucket
    length: int
    expires_at_ms: int | None
    freqs: dict[str, int]  # term -> weighted frequency (3 title + 2 tags + 1 body)
    updated_at_ms: int = 0  # the ranking's other inputs (recency, pin), as last committed
    pinned: bool = False


class RecallIndex:
    """Rowid sets per bucket, term, frequency and length; term counts per row; document
    frequencies."""

    def __init__(self) -> None:
        self.docs: dict[int, _Doc] = {}
        self._df: dict[str, int] = {}
        self._total = 0  # tokens over all rows
        self._groups: dict[tuple[Bucket, str], dict[tuple[int, int], set[int]]] = {}
        self._terms: dict[str, str] = {}  # one string object per term

    def __len__(self) -> int:
        return len(self.docs)

    def add(
        self,
        rowid: int,
        doc_id: str,
        bucket: Bucket,
        columns: Sequence[str],
        expires_at_ms: int | None,
        updated_at_ms: int = 0,
        pinned: bool = False,
    ) -> None:
        """Index one row (title, tags, body); a row already there is replaced."""
        if rowid in self.docs:
            self.remove(rowid)
        freqs: dict[str, int] = {}
        length = 0
        terms = self._terms
        for weight, text in zip(_WEIGHTS, columns, strict=True):
            if not text:
                continue
            toks = index_tokens(text)
            length += len(toks)
            for tok in toks:
                term = terms.setdefault(tok, tok)
                freqs[term] = freqs.get(term, 0) + weight
        self.docs[rowid] = _Doc(
            doc_id, bucket, length, expires_at_ms, freqs, updated_at_ms, bool(pinned)
        )
        self._total += length
        df, all_groups = self._df, self._groups
        for term, freq in freqs.items():
            df[term] = df.get(term, 0) + 1
            groups = all_groups.get((bucket, term))
            if groups is None:
                groups = all_groups[(bucket, term)] = {}
            rows = groups.get((freq, length))
            if rows is None:
                groups[(freq, length)] = {rowid}
            else:
                rows.add(rowid)

    def remove(self, rowid: int) -> None:
        doc = self.docs.pop(rowid, None)
        if doc is None:
            return
        self._total -= doc.length
        for term, freq in doc.freqs.items():
            n = self._df[term] - 1
            if n:
                self._df[term] = n
            else:
                del self._df[term]
                self._terms.pop(term, None)
            groups = self._groups[(doc.bucket, term)]
            rows = groups[(freq, doc.length)]
            rows.discard(rowid)
            if not rows:
                del groups[(freq, doc.length)]
                if not groups:
                    del self._groups[(doc.bucket, term)]

    def set_expiry(self, rowid: int, expires_at_ms: int | None) -> None:
        doc = self.docs.get(rowid)
        if doc is not None:
            doc.expires_at_ms = expires_at_ms

    def refresh(
        self, rowid: int, expires_at_ms: int | None, updated_at_ms: int, pinned: bool
    ) -> None:
        """A row's expiry, update time and pin changed (an upsert)."""
        doc = self.docs.get(rowid)
        if doc is not None:
            doc.expires_at_ms = expires_at_ms
            doc.updated_at_ms = updated_at_ms
            doc.pinned = bool(pinned)

    def top(
        self, buckets: Iterable[Bucket], terms: Sequence[str], k: int, now_ms: int
    ) -> list[tuple[int, float]]:
        """The ``k`` best unexpired rows of ``buckets`` by bm25 for the ORed ``terms``
        (index tokens), best first, as ``(rowid, bm25)``."""
        n_docs = len(self.docs)
        if not n_docs or k <= 0:
            return []
        avgdl = self._total / n_docs if self._total else 1.0
        k1a, k1b, k1p = _K1 * (1 - _B), _K1 * _B / avgdl, _K1 + 1
        idfs: list[tuple[str, float]] = []
        for term in dict.fromkeys(terms):
            n = self._df.get(term, 0)
            if n:
                idf = math.log((n_docs - n + 0.5) / (n + 0.5))
                idfs.append((term, idf if idf > 0.0 else 1e-6))
        if not idfs:
            return []
        if len(idfs) > _MAX_LATTICE_TERMS:
            return self._scan(tuple(buckets), idfs, k, now_ms, (k1a, k1b, k1p))
        # One lattice per (bucket, length): per term its options (contribution, rows),
        # best first, then "absent" (0.0, None).
        n_terms = len(idfs)
        lattices: dict[tuple[Bucket, int], list[list[tuple[float, set[int] | None]]]] = {}
        for bucket in buckets:
            for i, (term, idf) in enumerate(idfs):
                groups = self._groups.get((bucket, term))
                if groups is None:
                    continue
                for (freq, length), rows in groups.items():
                    options = lattices.get((bucket, length))
                    if options is None:
                        options = lattices[(bucket, length)] = [[] for _ in range(n_terms)]
                    options[i].append((idf * freq * k1p / (freq + k1a + k1b * length), rows))
        absent = (0.0, None)
        heap: list[tuple[float, int, tuple[int, ...]]] = []
        tables: list[list[list[tuple[float, set[int] | None]]]] = []
        for options in lattices.values():
            for column in options:
                column.sort(key=_contribution, reverse=True)
                column.append(absent)
            start = (0,) * n_terms
            heap.append((-sum(column[0][0] for column in options), len(tables), start))
            tables.append(options)
        heapq.heapify(heap)
        visited: set[tuple[int, tuple[int, ...]]] = set()
        seen: set[int] = set()
        docs = self.docs
        found: list[tuple[int, float]] = []
        while heap and len(found) < k:
            neg, lattice, vector = heapq.heappop(heap)
            if neg >= 0.0:
                break
            options = tables[lattice]
            sets = [s for s in (options[i][v][1] for i, v in enumerate(vector)) if s is not None]
            if not sets:  # every term absent (a rounding residue above 0)
                continue
            sets.sort(key=len)
            rows = sets[0] if len(sets) == 1 else sets[0].intersection(*sets[1:])
            score = -neg
            for rowid in rows:
                if rowid in seen:
                    continue
                seen.add(rowid)
                expires = docs[rowid].expires_at_ms
                if expires is None or expires > now_ms:
                    found.append((rowid, score))
                    if len(found) >= k:
                        break
            for i, v in enumerate(vector):
                column = options[i]
                if v + 1 < len(column):
                    after = (*vector[:i], v + 1, *vector[i + 1 :])
                    if (lattice, after) not in visited:
                        visited.add((lattice, after))
                        value = neg + column[v][0] - column[v + 1][0]
                        heapq.heappush(heap, (value, lattice, after))
        return found

    def _scan(
        self,
        buckets: tuple[Bucket, ...],
        idfs: list[tuple[str, float]],
        k: int,
        now_ms: int,
        constants: tuple[float, float, float],
    ) -> list[tuple[int, float]]:
        """Every matching row scored (queries with many terms)."""
        k1a, k1b, k1p = constants
        rows: set[int] = set()
        for bucket, (term, _idf) in itertools.product(buckets, idfs):
            for group in self._groups.get((bucket, term), {}).values():
                rows |= group
        scored: list[tuple[float, int]] = []
        for rowid in rows:
            doc = self.docs[rowid]
            if doc.expires_at_ms is not None and doc.expires_at_ms <= now_ms:
                continue
            norm = k1a + k1b * doc.length
            score = 0.0
            for term, idf in idfs:
                f = doc.freqs.get(term)
                if f:
                    score += idf * f * k1p / (f + norm)
            scored.append((score, rowid))
        return [(rowid, score) for score, rowid in heapq.nlargest(k, scored)]


def _contribution(option: tuple[float, set[int] | None]) -> float:
    return option[0]
