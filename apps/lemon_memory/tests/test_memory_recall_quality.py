"""Recall quality on the labelled set (tests/data/memory_recall_v1.json, unchanged), on the
three backends: the lexical goals of the issue, no forbidden document, no query error; and
the identifier lane on the added set (memory_recall_identifiers.json: identifier and path
queries with distractors that share their words), seeded with v1's documents as well."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lemon_memory import MemoryContext
from lemon_memory.recall_eval import evaluate, load_set, seed

DATA = Path(__file__).parent / "data" / "memory_recall_v1.json"
IDENTIFIERS = Path(__file__).parent / "data" / "memory_recall_identifiers.json"


async def test_lexical_recall_meets_the_goals_and_never_leaks(backend: Any) -> None:
    data = load_set(DATA)
    store = await backend.open(clock=lambda: 1_000)
    names = await seed(store, data, now_ms=1_000)

    async def search(ctx: MemoryContext, q: str) -> list[str]:
        result = await store.recall(ctx, q, limit=10)
        return [names[h.document.doc_id] for h in result.hits]

    report = await evaluate(data, search)
    assert report.errors == 0
    assert report.forbidden_returned == 0
    assert report.recall_at_5 >= 0.85, report
    assert report.mrr_at_10 >= 0.85, report


async def test_identifier_queries_find_their_document_first(backend: Any) -> None:
    v1, added = load_set(DATA), load_set(IDENTIFIERS)
    store = await backend.open(clock=lambda: 1_000)
    names = await seed(store, {"docs": v1["docs"] + added["docs"]}, now_ms=1_000)
    lanes: list[int | None] = []

    async def search(ctx: MemoryContext, q: str) -> list[str]:
        result = await store.recall(ctx, q, limit=10)
        lanes.extend(h.trigram_rank for h in result.hits[:1])
        return [names[h.document.doc_id] for h in result.hits]

    report = await evaluate(added, search)
    assert (report.errors, report.forbidden_returned) == (0, 0)
    assert report.recall_at_5 == 1.0, report
    assert report.mrr_at_10 == 1.0, report  # lexical alone: 0.92 (PIN_BOOST ranks second)
    assert all(rank == 1 for rank in lanes), lanes  # each first hit found by the lane too
    # and the whole of v1 keeps its goals next to the added documents
    report = await evaluate(v1, search)
    assert (report.errors, report.forbidden_returned) == (0, 0)
    assert report.recall_at_5 >= 0.85, report
    assert report.mrr_at_10 >= 0.85, report
