"""Recall quality over a labelled set (``memory_recall_v1.json``'s format): recall@5,
MRR@10, forbidden documents returned and query errors, per query kind.

A set has ``docs`` (``id``, ``agent``, ``scope``: ``agent`` | ``project:<root>`` |
``session:<key>``, ``text``) and ``queries`` (``id``, ``kind``, ``ctx``: ``[agent, project,
session]``, ``q``, ``rel``: the ids that answer it, ``forbidden``: ids a scoped recall must
never return). Used by the tests, ``bench/memory_bench.py`` and ``lemon memory eval``.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lemon_memory.documents import MemoryContext
from lemon_memory.errors import MemoryInputError, MemoryStoreError
from lemon_memory.store import MemoryStore, prepare

__all__ = ["EvalReport", "Search", "evaluate", "load_set", "run_eval", "seed"]

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
    """Read and check a labelled set; :class:`MemoryInputError` says what is wrong (a missing
    file, bad JSON, an entry without its fields, by its place in the file)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MemoryInputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MemoryInputError(f"{path} is not a JSON labelled set: {exc}") from None
    if not isinstance(data, dict):
        raise MemoryInputError(f"{path}: expected an object with 'docs' and 'queries'")
    for section, fields in (("docs", ("id", "agent", "scope", "text")),
                            ("queries", ("id", "kind", "ctx", "q"))):  # fmt: skip
        entries = data.get(section)
        if not isinstance(entries, list) or not entries:
            raise MemoryInputError(f"{path}: '{section}' must be a non-empty list")
        for n, entry in enumerate(entries, 1):
            missing = [f for f in fields if not isinstance(entry, dict) or f not in entry]
            if missing:
                raise MemoryInputError(f"{path}: {section} entry {n} lacks {', '.join(missing)}")
            if section == "queries" and (
                not isinstance(entry["ctx"], list) or len(entry["ctx"]) != 3
            ):
                raise MemoryInputError(
                    f"{path}: queries entry {n}: ctx must be [agent, project, session]"
                )
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


def _scope_sql(ctx: MemoryContext) -> tuple[str, list[str]]:
    keys = ctx.scope_keys()
    ors = " OR ".join("(d.scope = ? AND d.scope_key = ?)" for _ in keys)
    params = [ctx.agent_id]
    for k, v in keys.items():
        params += [k, v]
    return f"d.agent_id = ? AND ({ors})", params


async def run_eval(data: Mapping[str, Any]) -> dict[str, EvalReport]:
    """The set on a throwaway SQLite store: lemon_memory's recall next to two baselines
    confined to the same scopes, in the same run: a ``LIKE`` substring search (OR of the
    words) and Lemon's FTS5 rule replayed (strip ``"*():.,!?;``, AND the words, raw
    ``MATCH``, ``ORDER BY rank``)."""
    from lemon_memory._sqlite import SqliteMemoryStore

    with tempfile.TemporaryDirectory(prefix="lemon-memory-eval-") as name:
        path = Path(name) / "memory.sqlite3"
        store = SqliteMemoryStore(path, clock=lambda: 1_000)
        raw = sqlite3.connect(path)
        try:
            names = await seed(store, data, now_ms=1_000)

            async def ours(ctx: MemoryContext, q: str) -> list[str]:
                hits = (await store.recall(ctx, q, limit=10)).hits
                return [names[h.document.doc_id] for h in hits]

            async def like(ctx: MemoryContext, q: str) -> list[str]:
                where, params = _scope_sql(ctx)
                scores: dict[str, int] = {}
                for word in (w for w in q.lower().split() if w):
                    for (doc_id,) in raw.execute(
                        f"SELECT d.doc_id FROM memory_documents AS d WHERE {where} "
                        "AND lower(d.body) LIKE ?",
                        (*params, f"%{word}%"),
                    ):
                        scores[doc_id] = scores.get(doc_id, 0) + 1
                return [names[d] for d in sorted(scores, key=lambda d: -scores[d])[:10]]

            async def lemon_rule(ctx: MemoryContext, q: str) -> list[str]:
                match = " AND ".join(q.translate({ord(c): " " for c in '"*():.,!?;'}).split())
                where, params = _scope_sql(ctx)
                rows = raw.execute(
                    "SELECT d.doc_id FROM memory_fts JOIN memory_documents AS d ON d.id = "
                    f"memory_fts.rowid WHERE memory_fts MATCH ? AND {where} ORDER BY rank "
                    "LIMIT 10",
                    (match, *params),
                ).fetchall()
                return [names[r[0]] for r in rows]

            return {
                "LIKE substring (OR of words, scoped)": await evaluate(data, like),
                "Lemon's FTS5 rule, replayed": await evaluate(data, lemon_rule),
                "lemon_memory recall (quoted-token OR, porter, bm25, scope weights)": (
                    await evaluate(data, ours)
                ),
            }
        finally:
            raw.close()
            await store.close()
