"""Recall quality on the labelled set (tests/data/memory_recall_v1.json, unchanged), on both
backends: the lexical goals of the issue, no forbidden document, no query error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lemon_memory import MemoryContext
from lemon_memory.recall_eval import evaluate, load_set, seed

DATA = Path(__file__).parent / "data" / "memory_recall_v1.json"


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
