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
import os
import random
import sqlite3
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import msgspec

from lemon_memory import MemoryContext, SqliteMemoryStore, prepare
from lemon_memory._tokens import index_tokens
from lemon_memory.query import fts5_query, tokens
from lemon_memory.recall_eval import EvalReport, evaluate, load_set, run_eval, seed

#: PostgreSQL remembers timed one by one (the rest of the recall corpus is bulk-loaded).
PG_TIMED_PUTS = 3000
PG_DSN = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
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


async def quality(tmp: Path) -> dict[str, EvalReport]:
    """The set on SQLite, next to the LIKE and Lemon-rule baselines (``lemon memory eval``)."""
    return await run_eval(load_set(DATA))


SMALL = False


def _words(rng: random.Random, n: int) -> list[str]:
    if SMALL:
        return [rng.choice(WORDS) for _ in range(n)]
    return rng.choices(VOCAB, weights=WEIGHTS, k=n)


def _text(rng: random.Random, i: int) -> str:
    return f"note {i}: " + " ".join(_words(rng, 12))


async def speed(tmp: Path, docs: int, queries: list[str]) -> dict[str, float]:
    """SQLite: ``remember`` and the raw INSERT interleaved, one each per step, into two files
    that grow side by side to ``docs`` documents (the same index sizes, the same load); then
    the recall queries on the full corpus, ours and the raw MATCH alternating."""
    rng = random.Random(7)
    ctx = MemoryContext(agent_id="bench", session_key="agent:bench:main", project="/p")
    store = SqliteMemoryStore(tmp / "speed.sqlite3", max_docs_per_scope=docs + 10,
                              max_bytes_per_scope=1 << 34)  # fmt: skip
    raw_store = SqliteMemoryStore(tmp / "raw.sqlite3")  # the same schema, triggers and indexes
    await raw_store.close()
    raw = sqlite3.connect(tmp / "raw.sqlite3", isolation_level=None)
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("PRAGMA synchronous=NORMAL")
    put_ms: list[float] = []
    raw_ms: list[float] = []
    for i in range(docs):
        text = _text(rng, i)
        t0 = time.perf_counter()
        store.put_sync(prepare(ctx, text=text, now_ms=1_000, scope="project"))
        put_ms.append((time.perf_counter() - t0) * 1000)
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
    db = sqlite3.connect(tmp / "speed.sqlite3")
    rec_ms: list[float] = []
    raw_rec: list[float] = []
    fts_ms: list[float] = []
    t0 = time.perf_counter()
    store.recall_sync(ctx, "warm", scope="project", limit=10)  # builds the recall index
    warm_ms = (time.perf_counter() - t0) * 1000
    same = 0
    for q in queries:
        t0 = time.perf_counter()
        found = store.recall_sync(ctx, q, scope="project", limit=10)
        rec_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        before = store.recall_fts_sync(ctx, q, scope="project", limit=10)
        fts_ms.append((time.perf_counter() - t0) * 1000)
        del found, before
        # the candidates (bm25 top-40) of the index and of FTS5: the same scores
        ours = store._index.top([("bench", "project", "/p")], [t for w in tokens(q) for t in
                                index_tokens(w)], 40, 2**62) if store._index else []  # fmt: skip
        theirs = db.execute(
            "SELECT -bm25(memory_fts, 3.0, 2.0, 1.0) FROM memory_fts WHERE memory_fts MATCH ? "
            "ORDER BY bm25(memory_fts, 3.0, 2.0, 1.0) LIMIT 40",
            (fts5_query(q),),
        ).fetchall()
        same += [round(x[1], 9) for x in ours] == [round(x[0], 9) for x in theirs]
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
    figures = _figures(put_ms, raw_ms, rec_ms, raw_rec)
    figures |= {"fts_p50": statistics.median(fts_ms), "fts_p99": pct(fts_ms, 99),
                "warm_ms": warm_ms, "same": same, "queries": len(queries)}  # fmt: skip
    return figures


def _figures(
    put_ms: list[float], raw_ms: list[float], rec_ms: list[float], raw_rec: list[float]
) -> dict[str, float]:
    return {
        "put_p50": statistics.median(put_ms),
        "raw_put_p50": statistics.median(raw_ms),
        "recall_p50": statistics.median(rec_ms),
        "recall_p99": pct(rec_ms, 99),
        "raw_recall_p50": statistics.median(raw_rec),
        "raw_recall_p99": pct(raw_rec, 99),
    }


async def _pg_pair(schema: str) -> tuple[object, object]:
    from lemon_infra import PostgresStore
    from lemon_memory._postgres import PostgresMemoryStore

    shared = await PostgresStore.open(PG_DSN, schema=schema, max_connections=2)
    return shared, await PostgresMemoryStore.open(shared, clock=lambda: 1_000)


async def pg_quality() -> EvalReport:
    data = load_set(DATA)
    schema = f"membench_q_{uuid.uuid4().hex[:8]}"
    shared, store = await _pg_pair(schema)
    try:
        names = await seed(store, data, now_ms=1_000)  # type: ignore[arg-type]

        async def ours(ctx: MemoryContext, q: str) -> list[str]:
            hits = (await store.recall(ctx, q, limit=10)).hits  # type: ignore[attr-defined]
            return [names[h.document.doc_id] for h in hits]

        return await evaluate(data, ours)
    finally:
        await shared.close()  # type: ignore[attr-defined]
        await _drop(schema)


async def _drop(schema: str) -> None:
    from lemon_infra import drop_schema

    await drop_schema(PG_DSN, schema)


async def pg_speed(docs: int, queries: list[str]) -> dict[str, float]:
    """PostgreSQL: ``remember`` next to a raw INSERT into a copy of the same table (same
    generated tsvector, same indexes and triggers), interleaved, for the first
    ``PG_TIMED_PUTS`` documents (the rest bulk-loaded); recall next to raw SQL with
    ``ts_rank_cd`` (``tsv @@ q ORDER BY ts_rank_cd LIMIT 10``), alternating."""
    import psycopg

    from lemon_memory.query import tsquery

    rng = random.Random(7)
    ctx = MemoryContext(agent_id="bench", session_key="agent:bench:main", project="/p")
    schema, raw_schema = (
        f"membench_{uuid.uuid4().hex[:8]}",
        f"membench_raw_{uuid.uuid4().hex[:8]}",
    )
    from lemon_infra import PostgresStore
    from lemon_memory._postgres import PostgresMemoryStore

    shared = await PostgresStore.open(PG_DSN, schema=schema, max_connections=2)
    raw_shared = await PostgresStore.open(PG_DSN, schema=raw_schema, max_connections=1)
    try:
        store = await PostgresMemoryStore.open(shared, max_docs_per_scope=docs + 10,
                                               max_bytes_per_scope=1 << 34)  # fmt: skip
        await PostgresMemoryStore.open(raw_shared)  # the raw copy: same tables
        raw = await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True)
        insert = (
            f'INSERT INTO "{raw_schema}".memory_documents (doc_id, kind, scope, scope_key, '
            "agent_id, title, body, tags, source, created_at_ms, updated_at_ms, pinned, "
            "content_hash, size) VALUES (%s, 'note', 'project', '/p', 'bench', '', %s, '', "
            "'remember', 1, 1, false, %s, %s)"
        )
        put_ms: list[float] = []
        raw_ms: list[float] = []
        timed = min(docs, PG_TIMED_PUTS)
        for i in range(timed):
            text = _text(rng, i)
            t0 = time.perf_counter()
            await store.put(prepare(ctx, text=text, now_ms=1_000, scope="project"))
            put_ms.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            await raw.execute(insert, (f"raw{i}", text, f"h{i}", len(text)))
            raw_ms.append((time.perf_counter() - t0) * 1000)
        # the rest of the recall corpus in bulk (same rows, same triggers: counts stay right)
        bulk = insert.replace(f'"{raw_schema}"', f'"{schema}"')
        rest = [(f"bulk{i}", _text(rng, i), f"b{i}", 100) for i in range(timed, docs)]
        async with raw.cursor() as cur:
            await cur.executemany(bulk, rest)
            await cur.executemany(insert, rest)
        await raw.execute(f'ANALYZE "{schema}".memory_documents')
        await raw.execute(f'ANALYZE "{raw_schema}".memory_documents')
        select = (
            f'SELECT id FROM "{schema}".memory_documents, to_tsquery(\'"{schema}".memory_fts\', '
            "%s) AS q(q) WHERE tsv @@ q.q ORDER BY ts_rank_cd(tsv, q.q) DESC LIMIT 10"
        )
        rec_ms: list[float] = []
        raw_rec: list[float] = []
        for q in queries:
            t0 = time.perf_counter()
            await store.recall(ctx, q, scope="project", limit=10)
            rec_ms.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            cur = await raw.execute(select, (tsquery(q),))
            await cur.fetchall()
            raw_rec.append((time.perf_counter() - t0) * 1000)
        await raw.close()
    finally:
        await shared.close()
        await raw_shared.close()
        await _drop(schema)
        await _drop(raw_schema)
    return _figures(put_ms, raw_ms, rec_ms, raw_rec)


def _print_speed(label: str, raw_label: str, docs: int, s: dict[str, float]) -> None:
    print(
        f"{label} remember put p50: {s['put_p50']:.3f} ms; {raw_label} insert p50: "
        f"{s['raw_put_p50']:.3f} ms; ratio {s['put_p50'] / s['raw_put_p50']:.2f}x"
    )
    print(f"{label} recall top-10 over {docs} docs in a scope: p50 {s['recall_p50']:.3f} ms, "
          f"p99 {s['recall_p99']:.3f} ms; {raw_label} p50 {s['raw_recall_p50']:.3f} ms, "
          f"p99 {s['raw_recall_p99']:.3f} ms; p50 ratio "
          f"{s['recall_p50'] / s['raw_recall_p50']:.2f}x")  # fmt: skip
    if label == "SQLite":
        print(f"{label} recall top-10 by FTS5 alone (the path before the recall index): p50 "
              f"{s['fts_p50']:.3f} ms, p99 {s['fts_p99']:.3f} ms; index built at the first "
              f"recall in {s['warm_ms']:.0f} ms; same {s['same']:.0f} of "
              f"{s['queries']:.0f} queries (bm25 top-40 candidates, index vs FTS5)")  # fmt: skip
        put_ok = s["put_p50"] <= 2 * s["raw_put_p50"] and s["put_p50"] <= 0.5
        rec_ok = s["recall_p50"] <= 2 * s["raw_recall_p50"] and s["recall_p50"] <= 1.0
        print(f"goal SQLite put p50 <= 2x raw and <= 0.5 ms: {'met' if put_ok else 'MISSED'}")
        print(f"goal SQLite recall p50 <= 2x raw and <= 1 ms: {'met' if rec_ok else 'MISSED'}")
    else:
        rec_ok = s["recall_p50"] <= 2 * s["raw_recall_p50"]
        print(f"goal {label} recall p50 <= 2x raw: {'met' if rec_ok else 'MISSED'}")


async def embeddings_lane(tmp: Path, docs: int, queries: list[str]) -> None:
    """The embeddings lane (``lemon_memory[embeddings]``; ``scripts/test-embeddings --bench``
    runs this in its venv): the labelled set's recall with the hybrid ranking next to the
    lexical one, ingest throughput (documents per second, ``put_many`` batches of 64 and
    one-by-one ``put``), and recall p50 over ``docs`` documents, lexical and hybrid in turn."""
    from lemon_memory import embeddings

    t0 = time.perf_counter()
    model = embeddings.load()
    if model is None:
        print(f"embeddings: {embeddings.status()}")
        return
    loaded = time.perf_counter() - t0
    print(f"embeddings: model loaded in {loaded:.1f} s ({embeddings.status(model)})")
    data = load_set(DATA)
    for label, embedder in (("lexical", None), ("hybrid", model)):
        store = SqliteMemoryStore(tmp / f"q-{label}.sqlite3", embedder=embedder,
                                  clock=lambda: 1_000)  # fmt: skip
        names = await seed(store, data, now_ms=1_000)

        async def ours(
            ctx: MemoryContext,
            q: str,
            store: SqliteMemoryStore = store,
            names: dict[str, str] = names,
        ) -> list[str]:
            return [names[h.document.doc_id] for h in (await store.recall(ctx, q, limit=10)).hits]

        r = await evaluate(data, ours)
        print(f"{label:<8} recall@5 {r.recall_at_5:.2f} MRR@10 {r.mrr_at_10:.2f} forbidden "
              f"{r.forbidden_returned} errors {r.errors}; paraphrase recall@5 "
              f"{r.by_kind.get('paraphrase', 0):.2f}; by kind: "
              + ", ".join(f"{k} {v:.2f}" for k, v in r.by_kind.items()))  # fmt: skip
        await store.close()
    rng = random.Random(7)
    ctx = MemoryContext(agent_id="bench", session_key="agent:bench:main", project="/p")
    store = SqliteMemoryStore(
        tmp / "emb.sqlite3", embedder=model, max_docs_per_scope=docs + 10,
        max_bytes_per_scope=1 << 34,
    )  # fmt: skip
    writes = [prepare(ctx, text=_text(rng, i), now_ms=1_000, scope="project") for i in range(docs)]
    t0 = time.perf_counter()
    for i in range(0, len(writes), 64):
        await store.put_many(writes[i : i + 64])
    batched = docs / (time.perf_counter() - t0)
    single = writes[:200]
    t0 = time.perf_counter()
    for w in single:
        await store.put(msgspec.structs.replace(w, content_hash=w.content_hash + "x"))
    one_by_one = len(single) / (time.perf_counter() - t0)
    print(f"embeddings ingest: {batched:.0f} docs/s in put_many batches of 64, {one_by_one:.0f} "
          f"docs/s one put at a time ({docs} + {len(single)} documents)")  # fmt: skip
    lex: list[float] = []
    hyb: list[float] = []
    await store.recall(ctx, "warm", scope="project", limit=10)
    for q in queries[:100]:
        store.attach(None)
        t0 = time.perf_counter()
        await store.recall(ctx, q, scope="project", limit=10)
        lex.append((time.perf_counter() - t0) * 1000)
        store.attach(model)
        t0 = time.perf_counter()
        await store.recall(ctx, q, scope="project", limit=10)
        hyb.append((time.perf_counter() - t0) * 1000)
    print(f"embeddings recall top-10 over {docs + len(single)} docs: hybrid p50 "
          f"{statistics.median(hyb):.2f} ms, p99 {pct(hyb, 99):.2f} ms; lexical p50 "
          f"{statistics.median(lex):.2f} ms (same store, alternating, 100 queries)")  # fmt: skip
    await store.close()


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
    parser.add_argument("--pg-docs", type=int, default=None, help="default: --docs")
    parser.add_argument("--size-writes", type=int, default=100_000)
    parser.add_argument("--small-vocab", action="store_true")
    parser.add_argument(
        "--queries",
        choices=("zipf", "uniform"),
        default="zipf",
        help="query words drawn like the corpus (zipf: mostly common words) or uniformly "
        "from the vocabulary (mostly rare ones)",
    )
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument(
        "--embeddings",
        action="store_true",
        help="also the embeddings lane (needs lemon_memory[embeddings])",
    )
    parser.add_argument("--emb-docs", type=int, default=2000)
    args = parser.parse_args()
    global SMALL
    SMALL = args.small_vocab
    qrng = random.Random(3)
    vocab_words = WORDS if SMALL else VOCAB
    queries = [
        " ".join(_words(qrng, 3) if args.queries == "zipf" else qrng.choices(vocab_words, k=3))
        for _ in range(300)
    ]
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        pg = "off" if args.no_postgres else "on"
        print(f"recall quality on {DATA.name}; speed corpus vocabulary: {len(vocab_words)} "
              f"words, {args.queries} queries; PostgreSQL {pg}")  # fmt: skip
        print(f"{'method':<70} recall@5  MRR@10  forbidden  errors")
        reports = await quality(tmp)
        if not args.no_postgres:
            reports["lemon_memory recall, PostgreSQL (quoted-token OR, english+unaccent, "
                    "ts_rank_cd)"] = await pg_quality()  # fmt: skip
        for method, r in reports.items():
            print(f"{method:<70} {r.recall_at_5:8.2f} {r.mrr_at_10:7.2f} "
                  f"{r.forbidden_returned:10d} {r.errors:7d}")  # fmt: skip
            print(f"{'':<4}by kind: " + ", ".join(f"{k} {v:.2f}" for k, v in r.by_kind.items()))
        print()
        _print_speed("SQLite", "raw sqlite3", args.docs, await speed(tmp, args.docs, queries))
        if not args.no_postgres:
            n = args.pg_docs or args.docs
            _print_speed("PostgreSQL", "raw SQL", n, await pg_speed(n, queries))
        if args.embeddings:
            print()
            await embeddings_lane(tmp, args.emb_docs, queries)
        if args.size_writes:
            docs, nbytes, cap = await size(tmp, args.size_writes)
            print(f"\nsize after {args.size_writes} remembers (default bounds): {docs} documents, "
                  f"{nbytes / 1e6:.1f} MB on disk; byte cap {cap / 1e6:.1f} MB")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
