"""The operator's operations (``lemon memory`` and the daemon's ``memory.*``), on both backends:
add with a TTL, search of a context or of every scope with its explanation, forget a whole
scope, export then import (screened, a bad line reported by number and nothing stored, or the
good ones with ``skipBad``), all-or-nothing ``put_many``, and deterministic consolidation."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from lemon_memory import MemoryContext, MemoryInputError, Operator, ScopeFullError, prepare
from lemon_memory.admin import jaccard, parse_ttl

NOW = 5_000_000
SECRET = "Zq8Lp2Vx9Tr4Wm7Ks1Nd6Hy3Bc5Fg0Ja"
Backend = Any  # conftest.Backend


def line(body: str, **kw: Any) -> str:
    return json.dumps({"agent_id": "a", "scope": "agent", "scope_key": "a", "body": body, **kw})


async def operator(backend: Backend, **bounds: int) -> tuple[Operator, Any]:
    clock = {"now": NOW}
    store = await backend.open(clock=lambda: clock["now"], **bounds)
    return Operator(store, known_secrets=lambda: (SECRET,), clock=lambda: clock["now"]), store


async def test_add_search_and_explain_in_a_context_and_across_every_scope(
    backend: Backend,
) -> None:
    op, _ = await operator(backend)
    a = await op.call("memory.add", {"text": "the release checklist is in docs/RELEASE.md",
                                     "agentId": "a", "tags": ["release"], "ttl": "7d"})  # fmt: skip
    doc = a["document"]
    assert (doc["scope"], doc["scope_key"], doc["source"]) == ("agent", "a", "cli")
    assert doc["expires_at_ms"] == NOW + 7 * 86_400_000
    await op.call("memory.add", {"text": "the release train leaves on Fridays", "agentId": "b"})
    mine = await op.call("memory.search", {"query": "release checklist", "agentId": "a"})
    assert [h["document"]["doc_id"] for h in mine["hits"]] == [doc["doc_id"]]
    hit = mine["hits"][0]
    assert hit["lexical"] > 0
    assert hit["scopeWeight"] == 0.7
    assert hit["decay"] == 1.0
    assert hit["embeddingRank"] is None
    assert hit["score"] == pytest.approx(hit["lexical"] * 0.7)
    every = await op.call("memory.search", {"query": "release", "all": True})
    assert {h["document"]["agent_id"] for h in every["hits"]} == {"a", "b"}
    shown = await op.call("memory.get", {"docId": doc["doc_id"]})
    assert shown["document"]["tags"] == ["release"]
    assert (await op.call("memory.get", {"docId": "mem_nope"}))["document"] is None


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"text": "x", "ttl": "0d"}, "TTL must be positive"),
        ({"text": "x", "ttl": "soon"}, "a TTL is a number and a unit"),
        ({"text": "", "agentId": "a"}, "the text is empty"),
        ({"text": "x", "scope": "everyone"}, "unknown scope"),
        ({"text": f"token {SECRET}"}, "contains a secret"),
        ({"text": "x", "scope": "session"}, "no session scope"),
    ],
)
async def test_bad_adds_are_refused_and_store_nothing(
    backend: Backend, params: dict[str, Any], message: str
) -> None:
    op, store = await operator(backend)
    with pytest.raises(MemoryInputError, match=message):
        await op.call("memory.add", params)
    assert (await store.statistics()).documents == 0


async def test_forget_scope_removes_that_scope_only(backend: Backend) -> None:
    op, store = await operator(backend)
    for agent in ("a", "b"):
        for n in range(3):
            await op.call("memory.add", {"text": f"note {n} of {agent}", "agentId": agent})
        await op.call("memory.add", {"text": f"user note {agent}", "agentId": agent,
                                     "scope": "user"})  # fmt: skip
    gone = await op.call("memory.forgetScope", {"scope": "agent", "agentId": "a"})
    assert gone == {"forgotten": 3}
    stats = await store.statistics()
    assert (stats.documents, stats.per_scope) == (5, {"agent": 3, "user": 2})
    assert await backend.index_count(store) == 5
    assert (await op.call("memory.forgetScope", {"scope": "user"}))["forgotten"] == 2
    with pytest.raises(MemoryInputError, match="unknown scope"):
        await op.call("memory.forgetScope", {"scope": "all"})


async def test_export_pages_then_import_round_trips_into_an_empty_store(
    backend: Backend, tmp_path: Any
) -> None:
    op, store = await operator(backend)
    for n in range(7):
        await op.call("memory.add", {"text": f"fact number {n}", "agentId": "a", "pin": n == 0})
    lines, after = [], None
    while True:
        page = await op.call("memory.export", {"limit": 3, **({"after": after} if after else {})})
        lines += [json.dumps(d) for d in page["documents"]]
        after = page["next"]
        if after is None:
            break
    assert len(lines) == 7
    await op.call("memory.forgetScope", {"scope": "agent"})
    done = await op.call("memory.import", {"lines": lines})
    assert (done["imported"], done["errors"]) == (7, [])
    docs = await store.list_documents(limit=10)
    assert sorted(d.body for d in docs) == [f"fact number {n}" for n in range(7)]
    assert {d.source for d in docs} == {"import"}
    assert [d.pinned for d in docs if d.body == "fact number 0"] == [True]


async def test_a_bad_import_line_is_reported_by_number_and_nothing_is_stored(
    backend: Backend,
) -> None:
    op, store = await operator(backend)
    lines = [
        line("deploys go through staging first"),
        "{not json",
        line(f"the key is {SECRET}"),
        line("fine", color="red"),
        json.dumps(["a list"]),
        line("agent scope of another key", scope_key="b"),
        "",
        line("last good line"),
    ]
    found = await op.call("memory.import", {"lines": lines, "firstLine": 11})
    assert found["imported"] == 0
    assert [(e["line"], e["message"].split(" (")[0].split(":")[0]) for e in found["errors"]] == [
        (12, "not JSON"),
        (13, "refused"),
        (14, "unknown field 'color'"),
        (15, "not a document"),
        (16, "an agent-scoped document's scope_key is its agent_id"),
    ]
    assert SECRET not in json.dumps(found)
    assert (await store.statistics()).documents == 0
    kept = await op.call("memory.import", {"lines": lines, "skipBad": True})
    assert (kept["imported"], len(kept["errors"])) == (2, 5)
    assert SECRET.encode() not in await backend.raw_bytes()


async def test_put_many_is_all_or_nothing_when_a_scope_is_pinned_full(backend: Backend) -> None:
    _, store = await operator(backend, max_docs_per_scope=2)
    ctx = MemoryContext(agent_id="a")
    pinned = [prepare(ctx, text=f"pinned {n}", now_ms=NOW, pin=True) for n in range(2)]
    await store.put_many(pinned)
    with pytest.raises(ScopeFullError):
        await store.put_many([
            prepare(ctx, text="goes to the user scope", now_ms=NOW, scope="user"),
            prepare(ctx, text="no room left", now_ms=NOW),
        ])  # fmt: skip
    stats = await store.statistics()
    assert (stats.documents, stats.per_scope) == (2, {"agent": 2})
    assert await backend.index_count(store) == 2


async def test_consolidate_merges_near_duplicates_into_the_newest_once(backend: Backend) -> None:
    clock = {"now": NOW}
    store = await backend.open(clock=lambda: clock["now"])
    op = Operator(store, clock=lambda: clock["now"])
    texts = [
        "deploys go through the staging cluster first",
        "deploys go through the staging cluster first always",  # Jaccard 6/7
        "the staging cluster is called db-stage-3",
    ]
    ids = []
    for n, text in enumerate(texts):
        clock["now"] = NOW + n
        ids.append((await op.call("memory.add", {"text": text, "agentId": "a"}))["document"])
    await op.call("memory.add", {"text": texts[0], "agentId": "b"})  # another agent: kept
    await op.call("memory.add", {"text": texts[0], "agentId": "a", "scope": "user"})  # scope
    dry = await op.call("memory.consolidate", {"dryRun": True})
    assert dry["merges"] == [{"keep": ids[1]["doc_id"], "drop": [ids[0]["doc_id"]]}]
    assert (await store.statistics()).documents == 5
    done = await op.call("memory.consolidate", {})
    assert done["merged"] == 1
    kept = await store.get(ids[1]["doc_id"])
    assert kept is not None
    assert kept.supersedes == (ids[0]["doc_id"],)
    assert await store.get(ids[0]["doc_id"]) is None
    stats = await store.statistics()
    assert (stats.documents, stats.consolidated) == (4, 1)
    assert await backend.index_count(store) == 4
    again = await op.call("memory.consolidate", {})
    assert (again["merges"], again["merged"]) == ([], 0)


async def test_a_merge_that_shrinks_the_text_by_half_needs_yes_and_undo_puts_it_back(
    backend: Backend,
) -> None:
    clock = {"now": NOW}
    store = await backend.open(clock=lambda: clock["now"])
    op = Operator(store, clock=lambda: clock["now"])
    long = "alpha beta gamma delta epsilon " * 8  # the same token set, five times the text
    old = (await op.call("memory.add", {"text": long, "agentId": "a"}))["document"]
    clock["now"] += 1
    short = (await op.call("memory.add", {"text": "alpha beta gamma delta epsilon",
                                          "agentId": "a"}))["document"]  # fmt: skip
    held = await op.call("memory.consolidate", {})
    assert (held["merges"], held["merged"], held["passes"]) == ([], 0, 1)
    assert [(s["keep"], s["drop"]) for s in held["skipped"]] == [(short["doc_id"], [old["doc_id"]])]
    assert held["skipped"][0]["keptChars"] < held["skipped"][0]["droppedChars"] / 2
    assert (await store.statistics()).documents == 2
    done = await op.call("memory.consolidate", {"yes": True})
    assert (done["merged"], done["skipped"], done["passes"]) == (1, [], 2)  # 2nd: a no-op
    assert await store.get(old["doc_id"]) is None
    undone = await op.call("memory.undo", {})
    assert undone["undone"]["change"] == "merge"
    assert {d["doc_id"] for d in undone["undone"]["restored"]} == {old["doc_id"], short["doc_id"]}
    back = await store.get(old["doc_id"])
    assert back is not None
    assert back.body == long.strip()
    kept = await store.get(short["doc_id"])
    assert kept is not None
    assert kept.supersedes == ()
    assert (await op.call("memory.undo", {}))["undone"] is None
    forgot = await op.call("memory.forget", {"docId": old["doc_id"]})
    assert forgot["forgotten"] is True
    one = await op.call("memory.undo", {"docId": old["doc_id"]})
    assert [d["doc_id"] for d in one["undone"]["restored"]] == [old["doc_id"]]
    with pytest.raises(MemoryInputError):
        await op.call("memory.undo", {"docId": 7})


def test_ttl_and_jaccard_helpers() -> None:
    assert parse_ttl("90s") == 90_000
    assert parse_ttl(" 2w ") == 14 * 86_400_000
    assert jaccard(frozenset("ab"), frozenset("abc")) == pytest.approx(2 / 3)
    assert jaccard(frozenset(), frozenset()) == 1.0


async def test_a_booted_daemon_consolidates_on_its_schedule(boot: Any) -> None:
    from lemon_memory import MemoryApp

    async with boot("[memory]\nconsolidate_interval_s = 0.01\n") as rt:
        app = rt.handle("lemon_memory")
        assert isinstance(app, MemoryApp)
        assert app.store is not None
        ctx = MemoryContext(agent_id="a")
        for text in ("deploys go through the staging cluster first",
                     "deploys go through the staging cluster first always"):  # fmt: skip
            await app.store.put(prepare(ctx, text=text, now_ms=NOW))
        # Passes run one after another: the second pass to finish after this point started
        # after the two writes.
        for _ in range(2):
            app.consolidated.clear()
            await asyncio.wait_for(app.consolidated.wait(), 30)
        stats = await app.store.statistics()
        assert (stats.documents, stats.consolidated) == (1, 1)
