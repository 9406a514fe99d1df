"""What the memory store contract kit does not cover. The contract itself (put, upsert,
scopes, the secret screen down to the persisted bytes, bounds and eviction order, retention,
restart durability, two daemons on PostgreSQL) is ``lemon_platform_test.memory_store_kit``,
run over the three backends in ``apps/lemon_platform_test/tests/test_kit_memory_backends.py``.
Here: the hypothesis property that every recalled document is visible to its context, on all
three backends (``backend``), and the SQLite file's own cases (a corrupt file, WAL)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lemon_memory import (
    MemoryContext,
    MemoryStore,
    ScopeError,
    SqliteMemoryStore,
    prepare,
)
from lemon_memory.documents import SCOPES
from lemon_memory.errors import MemoryUnavailableError

A1 = MemoryContext(agent_id="a", session_key="agent:a:main:s1", project="/p/one")
A2 = MemoryContext(agent_id="a", session_key="agent:a:main:s2", project="/p/one")
B1 = MemoryContext(agent_id="b", session_key="agent:b:main:s1", project="/p/one")
NOW = 1_000_000
Backend = Any  # conftest.Backend (a fixture's type; tests cannot import conftest)


def store_at(path: Path, **kw: int) -> SqliteMemoryStore:
    return SqliteMemoryStore(path / "memory.sqlite3", clock=lambda: NOW, **kw)


async def remember(store: MemoryStore, ctx: MemoryContext, text: str, **kw: object):
    return await store.put(prepare(ctx, text=text, now_ms=NOW, **kw))  # type: ignore[arg-type]


async def test_a_corrupt_file_is_unavailable_not_a_crash(tmp_path: Path) -> None:  # SQLite
    (tmp_path / "memory.sqlite3").write_bytes(b"not a database" * 100)
    with pytest.raises(MemoryUnavailableError, match="move it aside"):
        store_at(tmp_path)


_contexts = st.builds(
    MemoryContext,
    agent_id=st.sampled_from(["a", "b"]),
    session_key=st.sampled_from(["s1", "s2", None]),
    project=st.sampled_from(["/p/one", "/p/two", None]),
    user=st.sampled_from(["local", "other"]),
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    writes=st.lists(st.tuples(_contexts, st.sampled_from(SCOPES)), min_size=1, max_size=12),
    reader=_contexts,
    scope=st.sampled_from([None, *SCOPES]),
)
async def test_every_recalled_document_is_visible_to_its_context(
    backend: Backend,
    writes: list[tuple[MemoryContext, str]],
    reader: MemoryContext,
    scope: str | None,
) -> None:
    store = await backend.shared(clock=lambda: NOW)  # one store per test, not per example
    for doc in await store.list_documents(limit=1000):  # each example starts empty
        await store.forget_any(doc.doc_id)
    for i, (ctx, s) in enumerate(writes):
        if s in ctx.scope_keys():
            await remember(store, ctx, f"shared word zebra item {i}", scope=s)
    try:
        result = await store.recall(reader, "zebra", scope=scope, limit=10)
    except ScopeError:
        assert scope is not None
        assert scope not in reader.scope_keys()
        return
    visible = reader.narrow(scope)
    for hit in result.hits:
        doc = hit.document
        assert doc.agent_id == reader.agent_id
        assert visible.get(doc.scope) == doc.scope_key


async def test_the_file_is_wal(tmp_path: Path) -> None:  # SQLite
    store = store_at(tmp_path)
    db = sqlite3.connect(tmp_path / "memory.sqlite3")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()
    await store.close()


async def test_two_connections_on_one_file_keep_the_bounds(tmp_path: Path) -> None:  # SQLite
    # Each connection keeps the counts its own puts leave; another's commit voids them.
    a = store_at(tmp_path, max_docs_per_scope=3)
    b = store_at(tmp_path, max_docs_per_scope=3)
    for i in range(4):
        await remember(a, A1, f"from a {i}")
        await remember(b, A1, f"from b {i}")
    assert (await a.statistics()).documents == 3
    assert len(await b.list_documents()) == 3
    assert a.raw_fts_count() == 3
    await a.close()
    await b.close()
