"""Recall quality over a labelled set (``memory_recall_v1.json``'s format): recall@5,
MRR@10, forbidden documents returned and query errors, per query kind.

A set has ``docs`` (``id``, ``agent``, ``scope``: ``agent`` | ``project:<root>`` |
``session:<key>``, ``text``) and ``queries`` (``id``, ``kind``, ``ctx``: ``[agent, project,
session]``, ``q``, ``rel``: the ids that answer it, ``forbidden``: ids a scoped recall must
never return). Used by the tests, ``bench/memory_bench.py`` and ``lemon memory eval``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lemon_memory.documents import MemoryContext
from lemon_memory.errors import MemoryStoreError
from lemon_memory.store import MemoryStore, prepare

__all__ = ["EvalReport", "Search", "evaluate", "load_set", "seed"]

#: A ranked search: (context, query) -> doc ids, best first.
Search = Callable[[MemoryContext, str], Awaitable[list[str]]]


@dataclass(kw_only=True)
class EvalReport:
    queries: int = 0
    recall_at_5: float = 0.0
    mrr_at_10: float = 0.0
    forbidden_returned: int = 0
    errors: int = 0
    by_kind: dict[str, float] = field(default_factory=dict)
    """recall@5 per query kind."""


def load_set(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def doc_context(doc: Mapping[str, Any]) -> tuple[MemoryContext, str]:
    """The writer's context and scope of one labelled document."""
    scope: str = doc["scope"]
    if scope.startswith("project:"):
        return MemoryContext(agent_id=doc["agent"], project=scope[len("project:") :]), "project"
    if scope.startswith("session:"):
        return MemoryContext(agent_id=doc["agent"], session_key=scope[len("session:") :]), "session"
    return MemoryContext(agent_id=doc["agent"]), "agent"


def query_context(query: Mapping[str, Any]) -> MemoryContext:
    agent, project, session = query["ctx"]
    return MemoryContext(agent_id=agent, project=project, session_key=session)


async def seed(store: MemoryStore, data: Mapping[str, Any], now_ms: int) -> dict[str, str]:
    """Write the set's documents; the store's doc id -> the set's id."""
    ids: dict[str, str] = {}
    for doc in data["docs"]:
        ctx, scope = doc_context(doc)
        stored = await store.put(
            prepare(ctx, text=doc["text"], now_ms=now_ms, scope=scope, source="import")
        )
        ids[stored.doc_id] = doc["id"]
    return ids


async def evaluate(data: Mapping[str, Any], search: Search) -> EvalReport:
    """Run every query through ``search`` (ids in the set's naming) and score it."""
    report = EvalReport()
    hits_5 = 0.0
    rr = 0.0
    kinds: dict[str, list[float]] = {}
    for query in data["queries"]:
        report.queries += 1
        try:
            ranked = await search(query_context(query), query["q"])
        except (MemoryStoreError, Exception):  # a baseline's syntax error counts, never stops
            report.errors += 1
            ranked = []
        relevant = set(query.get("rel", ()))
        forbidden = set(query.get("forbidden", ()))
        report.forbidden_returned += len(forbidden & set(ranked[:10]))
        if relevant:
            got = len(relevant & set(ranked[:5])) / len(relevant)
            first = next((i for i, d in enumerate(ranked[:10]) if d in relevant), None)
            reciprocal = 0.0 if first is None else 1.0 / (first + 1)
        else:  # nothing should match: full marks when nothing of the forbidden came back
            got = reciprocal = 1.0 if not forbidden & set(ranked[:10]) else 0.0
        hits_5 += got
        rr += reciprocal
        kinds.setdefault(query["kind"], []).append(got)
    n = max(1, report.queries)
    report.recall_at_5 = hits_5 / n
    report.mrr_at_10 = rr / n
    report.by_kind = {k: sum(v) / len(v) for k, v in sorted(kinds.items())}
    return report
