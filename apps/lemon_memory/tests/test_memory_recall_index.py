"""The SQLite backend's recall index: the same hits and bm25 as FTS5's ``MATCH ... ORDER BY
bm25``, kept in step with this connection's commits and with another connection's
(``PRAGMA data_version``); and ``[memory] backend`` chooses the store."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from lemon_core.config import ConfigError, load_config
from lemon_memory import (
    InMemoryMemoryStore,
    MemoryApp,
    MemoryContext,
    SqliteMemoryStore,
    prepare,
)
from lemon_memory.errors import ScopeFullError
from lemon_runtime import Runtime

NOW = 10_000_000
# Words of letters only: a word with digits is an identifier, and the identifier lane's
# fusion would stand between the two rankings these tests compare.
VOCAB = [f"w{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(200)] + [
    "parser", "queue", "café", "running", "runs", "lemon"]  # fmt: skip
WEIGHTS = [1.0 / (r + 1) for r in range(len(VOCAB))]


def _lexical(hits: tuple) -> list[float]:  # type: ignore[type-arg]
    return [round(h.lexical, 9) for h in hits]


def _store(path: Path, **bounds: int) -> SqliteMemoryStore:
    return SqliteMemoryStore(path, clock=lambda: NOW, **bounds)


async def test_the_index_ranks_as_fts5_does(tmp_path: Path) -> None:
    rng = random.Random(5)
    store = _store(tmp_path / "m.sqlite3", max_docs_per_scope=10_000, max_bytes_per_scope=1 << 30)
    contexts = [
        MemoryContext(agent_id=a, session_key=f"agent:{a}:{s}", project=p)
        for a in ("a", "b")
        for s in ("x", "y")
        for p in ("/p", "/q")
    ]
    for _ in range(1500):
        ctx = rng.choice(contexts)
        text = " ".join(rng.choices(VOCAB, WEIGHTS, k=rng.randint(2, 40)))
        title = " ".join(rng.choices(VOCAB, WEIGHTS, k=rng.randint(0, 3)))
        tags = rng.choices(VOCAB[:30], k=rng.randint(0, 2))
        scope = rng.choice(["session", "project", "agent", "user"])
        await store.put(prepare(ctx, text=text, title=title, tags=tags, now_ms=NOW, scope=scope))
    compared = 0
    for _ in range(200):
        ctx = rng.choice(contexts)
        scope = rng.choice(["session", "project", "agent", "user"])
        query = " ".join(rng.choices(VOCAB, WEIGHTS, k=rng.randint(1, 5)))
        ours = store.recall_sync(ctx, query, scope=scope, limit=10)
        fts = store.recall_fts_sync(ctx, query, scope=scope, limit=10)
        assert _lexical(ours.hits) == _lexical(fts.hits), query
        assert all(h.document.agent_id == ctx.agent_id for h in ours.hits)
        compared += bool(ours.hits)
    assert compared > 150
    await store.close()


async def test_the_index_follows_this_connections_changes(tmp_path: Path) -> None:
    ctx = MemoryContext(agent_id="a", session_key="agent:a:main", project="/p")
    store = _store(tmp_path / "m.sqlite3", max_docs_per_scope=3)
    first = await store.put(prepare(ctx, text="the parser queue", now_ms=NOW))
    assert [h.document.doc_id for h in (await store.recall(ctx, "parser")).hits] == [
        first.doc_id
    ]  # built at this first recall
    await store.forget(ctx, first.doc_id)
    assert (await store.recall(ctx, "parser")).hits == ()
    pinned = [
        await store.put(prepare(ctx, text=f"pinned lemon {i}", pin=True, now_ms=NOW))
        for i in range(3)
    ]
    with pytest.raises(ScopeFullError):  # all or nothing: the rollback leaves no ghost
        await store.put_many([prepare(ctx, text="ghost lemon parser", now_ms=NOW)])
    assert (await store.recall(ctx, "ghost")).hits == ()
    await store.forget_scope("agent", agent_id="a")
    assert (await store.recall(ctx, "lemon")).hits == ()
    assert {p.doc_id for p in pinned}.isdisjoint(
        h.document.doc_id for h in (await store.recall(ctx, "pinned")).hits
    )
    short = await store.put(prepare(ctx, text="a short lived parser", ttl_ms=5, now_ms=NOW))
    assert (await store.recall(ctx, "parser")).hits[0].document.doc_id == short.doc_id
    assert await store.sweep(now_ms=NOW + 10) == 1
    assert (await store.recall(ctx, "parser")).hits == ()
    await store.close()


async def test_the_index_follows_another_connection(tmp_path: Path) -> None:
    ctx = MemoryContext(agent_id="a", session_key="agent:a:main", project="/p")
    one = _store(tmp_path / "m.sqlite3")
    two = _store(tmp_path / "m.sqlite3")
    await one.put(prepare(ctx, text="the staging window is Tuesday", now_ms=NOW))
    assert len((await one.recall(ctx, "staging")).hits) == 1  # one's index is built
    other = await two.put(prepare(ctx, text="staging deploys need a review", now_ms=NOW))
    found = await one.recall(ctx, "staging review")
    assert found.hits[0].document.doc_id == other.doc_id
    await two.forget(ctx, other.doc_id)
    assert [h.document.doc_id for h in (await one.recall(ctx, "review")).hits] == []
    assert len((await one.recall(ctx, "staging")).hits) == 1
    await one.close()
    await two.close()


def _ranking(result: object) -> list[tuple[str, float]]:
    return [(h.document.doc_id, round(h.score, 9)) for h in result.hits]  # type: ignore[attr-defined]


async def test_the_index_ranks_by_an_upserts_new_time_and_pin(tmp_path: Path) -> None:
    # The index path ranks by its own copy of each row's update time and pin: an upsert
    # (here and on another connection) must move them as the table's columns move.
    clock = [NOW]
    day = 86_400_000
    ctx = MemoryContext(agent_id="a", session_key="agent:a:main", project="/p")
    one = SqliteMemoryStore(tmp_path / "m.sqlite3", clock=lambda: clock[0])
    two = SqliteMemoryStore(tmp_path / "m.sqlite3", clock=lambda: clock[0])
    old = await one.put(prepare(ctx, text="deploy window alpha", now_ms=clock[0]))
    clock[0] += 60 * day
    new = await one.put(prepare(ctx, text="deploy window omega", now_ms=clock[0]))
    first = await one.recall(ctx, "deploy window", limit=2)
    assert [h.document.doc_id for h in first.hits] == [new.doc_id, old.doc_id]
    clock[0] += day
    await one.put(prepare(ctx, text="deploy window alpha", now_ms=clock[0]))  # refreshed
    again = await one.recall(ctx, "deploy window", limit=2)
    assert [h.document.doc_id for h in again.hits] == [old.doc_id, new.doc_id]
    assert _ranking(again) == _ranking(one.recall_fts_sync(ctx, "deploy window", limit=2))
    clock[0] += 1
    await two.put(prepare(ctx, text="deploy window omega", pin=True, now_ms=clock[0]))
    pinned = await one.recall(ctx, "deploy window", limit=2)
    assert [h.document.doc_id for h in pinned.hits] == [new.doc_id, old.doc_id]
    assert pinned.hits[0].document.pinned
    assert _ranking(pinned) == _ranking(one.recall_fts_sync(ctx, "deploy window", limit=2))
    await one.close()
    await two.close()


async def test_the_index_skips_a_row_expired_since_and_fills_the_limit(tmp_path: Path) -> None:
    clock = [NOW]
    ctx = MemoryContext(agent_id="a", session_key="agent:a:main", project="/p")
    store = SqliteMemoryStore(tmp_path / "m.sqlite3", clock=lambda: clock[0])
    short = await store.put(prepare(ctx, text="parser parser parser", ttl_ms=1_000,
                                    now_ms=clock[0]))  # fmt: skip
    rest = [await store.put(prepare(ctx, text=f"parser note {i}", now_ms=clock[0]))
            for i in range(3)]  # fmt: skip
    assert (await store.recall(ctx, "parser", limit=3)).hits[0].document.doc_id == short.doc_id
    clock[0] += 2_000
    found = await store.recall(ctx, "parser", limit=3)
    assert sorted(h.document.doc_id for h in found.hits) == sorted(d.doc_id for d in rest)
    await store.close()


async def test_backend_memory_is_a_config_choice(boot: Callable[..., Runtime]) -> None:
    async with boot('[memory]\nbackend = "memory"\n') as rt:
        app = rt.handle("lemon_memory")
        assert isinstance(app, MemoryApp)
        assert isinstance(app.store, InMemoryMemoryStore)
        assert app.store.backend == "memory"
    async with boot('[memory]\nbackend = "sqlite"\n') as rt:
        app = rt.handle("lemon_memory")
        assert isinstance(app, MemoryApp)
        assert isinstance(app.store, SqliteMemoryStore)


def test_an_unknown_backend_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[memory]\nbackend = "redis"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(home=tmp_path, cwd=tmp_path, environ={})
    text = str(caught.value)
    assert "memory.backend" in text
    assert "auto, sqlite, postgres, memory" in text


async def test_backend_postgres_without_a_postgres_store_is_unavailable(
    boot: Callable[..., Runtime],
) -> None:
    async with boot('[memory]\nbackend = "postgres"\n') as rt:
        app = rt.handle("lemon_memory")
        assert isinstance(app, MemoryApp)
        assert app.store is None
        assert app.unavailable is not None
        assert '[store] backend = "postgres"' in app.unavailable
