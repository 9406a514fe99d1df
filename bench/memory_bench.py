"""lemon_memory: recall quality on the labelled set and the store's speed, each next to its
baseline measured in the same run.

* Quality (apps/lemon_memory/tests/data/memory_recall_v1.json): recall@5, MRR@10, forbidden
  documents returned and query errors for the store's recall, next to a ``LIKE`` substring
  search and Lemon's FTS5 query rule replayed (strip ``"*():.,!?;``, AND the words, raw
  ``MATCH``), both confined to the same scopes.
* ``remember`` put p50 (screen + upsert + bounds + FTS), next to a raw ``sqlite3`` insert into
  the same tables (the same triggers keep the FTS index).
* ``recall`` top-10 over N documents in one scope, p50/p99, next to a raw FTS5 ``MATCH ...
  ORDER BY bm25 LIMIT 10`` with the same quoted-OR expression on the same file.
* Size: the file after M remembers over many scopes with the default bounds, next to the cap.

Run: ``.venv/bin/python bench/memory_bench.py [--docs 20000] [--size-writes 100000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from lemon_memory import MemoryContext, SqliteMemoryStore, prepare
from lemon_memory.query import fts5_query
from lemon_memory.recall_eval import EvalReport, evaluate, load_set, seed

DATA = Path(__file__).parent.parent / "apps/lemon_memory/tests/data/memory_recall_v1.json"
_WORD_TEXT = (
    "parser queue session token deploy staging window lemon gateway router bench cache index "
    "schema migration socket retry backoff budget scope agent project note fact preference "
    "build release branch commit review test fixture server client protocol frame event"
)
WORDS = _WORD_TEXT.split()
#: A larger vocabulary drawn Zipf-like (rank r with weight 1/r), as words in notes are: the
#: default corpus; ``--small-vocab`` draws from WORDS only (every query then matches a third
#: of the corpus: the worst case for a top-10).
VOCAB = WORDS + [f"term{n}" for n in range(5000)]
WEIGHTS = [1.0 / (r + 1) for r in range(len(VOCAB))]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def _scope_sql(ctx: MemoryContext) -> tuple[str, list[str]]:
    keys = ctx.scope_keys()
    ors = " OR ".join("(scope = ? AND scope_key = ?)" for _ in keys)
    params = [ctx.agent_id]
    for k, v in keys.items():
        params += [k, v]
    return f"agent_id = ? AND ({ors})", params


async def quality(tmp: Path) -> dict[str, EvalReport]:
    data = load_set(DATA)
    store = SqliteMemoryStore(tmp / "quality.sqlite3", clock=lambda: 1_000)
    names = await seed(store, data, now_ms=1_000)
    raw = sqlite3.connect(tmp / "quality.sqlite3")

    async def ours(ctx: MemoryContext, q: str) -> list[str]:
        return [names[h.document.doc_id] for h in (await store.recall(ctx, q, limit=10)).hits]

    async def like(ctx: MemoryContext, q: str) -> list[str]:
        where, params = _scope_sql(ctx)
        words = [w for w in q.lower().split() if w]
        scores: dict[str, int] = {}
        for w in words:
            for (doc_id,) in raw.execute(
                f"SELECT doc_id FROM memory_documents WHERE {where} AND lower(body) LIKE ?",
                (*params, f"%{w}%"),
            ):
                scores[doc_id] = scores.get(doc_id, 0) + 1
        ranked = sorted(scores, key=lambda d: -scores[d])
        return [names[d] for d in ranked[:10]]

    async def lemon_rule(ctx: MemoryContext, q: str) -> list[str]:
        cleaned = q.translate({ord(c): " " for c in '"*():.,!?;'})
        match = " AND ".join(cleaned.split())
        where, params = _scope_sql(ctx)
        scoped = where.replace("agent_id", "d.agent_id")
        rows = raw.execute(
            "SELECT d.doc_id FROM memory_fts JOIN memory_documents AS d ON d.id = "
            f"memory_fts.rowid WHERE memory_fts MATCH ? AND {scoped} "
            "ORDER BY rank LIMIT 10",
            (match, *params),
        ).fetchall()
        return [names[r[0]] for r in rows]

    reports = {
        "LIKE substring (OR of words, scoped)": await evaluate(data, like),
        "Lemon's FTS5 rule, replayed": await evaluate(data, lemon_rule),
        "lemon_memory recall (quoted-token OR, porter, bm25, scope weights)": await evaluate(
            data, ours
        ),
    }
    raw.close()
    await store.close()
    return reports


SMALL = False


def _words(rng: random.Random, n: int) -> list[str]:
    if SMALL:
        return [rng.choice(WORDS) for _ in range(n)]
    return rng.choices(VOCAB, weights=WEIGHTS, k=n)


def _text(rng: random.Random, i: int) -> str:
    return f"note {i}: " + " ".join(_words(rng, 12))


async def speed(tmp: Path, docs: int) -> dict[str, float]:
    rng = random.Random(7)
    ctx = MemoryContext(agent_id="bench", session_key="agent:bench:main", project="/p")
    store = SqliteMemoryStore(tmp / "speed.sqlite3", max_docs_per_scope=docs + 10,
                              max_bytes_per_scope=1 << 34)  # fmt: skip
    put_ms: list[float] = []
    for i in range(docs):
        t0 = time.perf_counter()
        store.put_sync(prepare(ctx, text=_text(rng, i), now_ms=1_000, scope="project"))
        put_ms.append((time.perf_counter() - t0) * 1000)
    # raw baseline: the same INSERT into the same tables (the triggers keep FTS) of a copy
    raw_store = SqliteMemoryStore(tmp / "raw.sqlite3")
    await raw_store.close()
    raw = sqlite3.connect(tmp / "raw.sqlite3", isolation_level=None)
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("PRAGMA synchronous=NORMAL")
    raw_ms: list[float] = []
    n_raw = min(docs, 5000)
    for i in range(n_raw):
        text = _text(rng, i)
        t0 = time.perf_counter()
        raw.execute("BEGIN IMMEDIATE")
        raw.execute(
            "INSERT INTO memory_documents (doc_id, kind, scope, scope_key, agent_id, title, body, "
            "tags, source, created_at_ms, updated_at_ms, pinned, content_hash, size) VALUES "
            "(?, 'note', 'project', '/p', 'bench', '', ?, '', 'remember', 1, 1, 0, ?, ?)",
            (f"raw{i}", text, f"h{i}", len(text)),
        )
        raw.execute("COMMIT")
        raw_ms.append((time.perf_counter() - t0) * 1000)
    raw.close()
    queries = [" ".join(_words(rng, 3)) for _ in range(300)]
    rec_ms: list[float] = []
    for q in queries:
        t0 = time.perf_counter()
        store.recall_sync(ctx, q, scope="project", limit=10)
        rec_ms.append((time.perf_counter() - t0) * 1000)
    db = sqlite3.connect(tmp / "speed.sqlite3")
    raw_rec: list[float] = []
    for q in queries:
        match = fts5_query(q)
        t0 = time.perf_counter()
        db.execute(
            "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY bm25(memory_fts) "
            "LIMIT 10",
            (match,),
        ).fetchall()
        raw_rec.append((time.perf_counter() - t0) * 1000)
    db.close()
    await store.close()
    return {
        "put_p50": statistics.median(put_ms),
        "raw_put_p50": statistics.median(raw_ms),
        "recall_p50": statistics.median(rec_ms),
        "recall_p99": pct(rec_ms, 99),
        "raw_recall_p50": statistics.median(raw_rec),
        "raw_recall_p99": pct(raw_rec, 99),
    }


async def size(tmp: Path, writes: int) -> tuple[int, int, int]:
    rng = random.Random(11)
    store = SqliteMemoryStore(tmp / "size.sqlite3")  # default bounds
    for i in range(writes):
        ctx = MemoryContext(agent_id=f"a{i % 7}", session_key=f"s{i % 300}")
        store.put_sync(prepare(ctx, text=_text(rng, i), now_ms=1_000, scope="session"))
    stats = await store.statistics()
    await store.close()
    files = await asyncio.to_thread(
        lambda: sum(p.stat().st_size for p in tmp.glob("size.sqlite3*"))
    )
    return stats.documents, files, stats.max_bytes


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--size-writes", type=int, default=100_000)
    parser.add_argument("--small-vocab", action="store_true")
    args = parser.parse_args()
    global SMALL
    SMALL = args.small_vocab
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        vocab = len(WORDS) if SMALL else len(VOCAB)
        print(f"recall quality on {DATA.name}; speed corpus vocabulary: {vocab} words")
        print(f"{'method':<70} recall@5  MRR@10  forbidden  errors")
        for method, r in (await quality(tmp)).items():
            print(f"{method:<70} {r.recall_at_5:8.2f} {r.mrr_at_10:7.2f} "
                  f"{r.forbidden_returned:10d} {r.errors:7d}")  # fmt: skip
        s = await speed(tmp, args.docs)
        print(
            f"\nremember put p50: {s['put_p50']:.3f} ms; raw sqlite3 insert p50: "
            f"{s['raw_put_p50']:.3f} ms; ratio {s['put_p50'] / s['raw_put_p50']:.2f}x"
        )
        print(f"recall top-10 over {args.docs} docs in a scope: p50 {s['recall_p50']:.3f} ms, "
              f"p99 {s['recall_p99']:.3f} ms; raw FTS5 MATCH+bm25: p50 "
              f"{s['raw_recall_p50']:.3f} ms, p99 {s['raw_recall_p99']:.3f} ms; p50 ratio "
              f"{s['recall_p50'] / s['raw_recall_p50']:.2f}x")  # fmt: skip
        if args.size_writes:
            docs, nbytes, cap = await size(tmp, args.size_writes)
            print(f"\nsize after {args.size_writes} remembers (default bounds): {docs} documents, "
                  f"{nbytes / 1e6:.1f} MB on disk; byte cap {cap / 1e6:.1f} MB")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
