"""The identifier lane's token picking, LIKE escaping and reciprocal-rank fusion; the SQLite
trigram table kept with the documents (forget, and a file made before the lane)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from lemon_memory import MemoryContext, SqliteMemoryStore, prepare
from lemon_memory._fusion import fuse, identifiers, like_pattern, trigram_query

CTX = MemoryContext(agent_id="a", session_key="agent:a:main", project="/p")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("where is the lemon-cli entry point", ["lemon-cli"]),
        ("HEARTBEAT_OK", ["heartbeat_ok"]),
        ("config.toml location?", ["config.toml"]),
        ("rm -rf $LEMON_HOME", ["$lemon_home"]),
        ("rename ConversationQueue", ["conversationqueue"]),
        ("GPU box gpu01", []),  # one word to the word tokenizer: found whole
        ("user@host 50% NOT a/b it's", ["user@host", "a/b"]),
        ("how do I run the tests", []),
        ("!!! ... ---", []),
    ],
)
def test_identifiers_are_the_joined_camel_or_digit_tokens(query: str, expected: list[str]) -> None:
    assert identifiers(query) == expected


def test_lane_queries_quote_and_escape() -> None:
    assert trigram_query(['a"b', "c.d"]) == '"a""b" OR "c.d"'
    assert like_pattern("50%_x\\y") == "%50\\%\\_x\\\\y%"


def test_fusion_is_reciprocal_rank_with_lexical_ties_first() -> None:
    fused = fuse([["a", "b", "c"], ["c", "d"]])
    assert [key for key, _, _ in fused] == ["c", "a", "b", "d"]
    assert fused[0][1] == pytest.approx(1 / 63 + 1 / 61)
    assert fused[0][2] == [3, 1]
    assert fused[3][2] == [None, 2]
    assert fuse([["x", "y"], ["y", "x"]])[0][0] == "x"  # a tie keeps the first lane's order


def _trigram_rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT count(*) FROM memory_trigram_docsize").fetchone()[0])


async def test_the_trigram_rows_go_with_the_document(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "m.sqlite3")
    kept = await store.put(prepare(CTX, text="the knob is retry_backoff_ms", now_ms=1))
    gone = await store.put(prepare(CTX, text="see deploy-staging.sh first", now_ms=1))
    assert _trigram_rows(tmp_path / "m.sqlite3") == 2
    await store.forget(CTX, gone.doc_id)
    assert _trigram_rows(tmp_path / "m.sqlite3") == 1
    assert (await store.recall(CTX, "deploy-staging.sh")).hits == ()
    found = await store.recall(CTX, "backoff_ms")
    assert [h.document.doc_id for h in found.hits] == [kept.doc_id]
    assert found.hits[0].trigram_rank == 1
    await store.close()


async def test_a_file_from_before_the_lane_is_indexed_at_open(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite3"
    store = SqliteMemoryStore(path)
    doc = await store.put(prepare(CTX, text="BoundedEventQueue drops the oldest", now_ms=1))
    await store.close()
    with sqlite3.connect(path) as db:  # as a file made before the identifier lane
        db.executescript(
            "DROP TRIGGER memory_documents_ai_trigram; DROP TRIGGER memory_documents_ad_trigram;"
            "DROP TABLE memory_trigram;"
        )
    store = SqliteMemoryStore(path)
    found = await store.recall(CTX, "EventQueue")  # a substring: no word matches it
    assert [h.document.doc_id for h in found.hits] == [doc.doc_id]
    assert found.hits[0].lexical_rank is None
    assert found.hits[0].trigram_rank == 1
    await store.close()


async def test_the_recall_stamp_marks_the_fused_rows_returned(backend: Any) -> None:
    # Lexically ``words`` > ``twice`` > ``ident``; the identifier lane has ``ident`` and
    # ``other`` (no word of the query). Fused, the top two are ``ident`` and ``words``: they
    # and only they are stamped (not the lexical top two, ``words`` and ``twice``).
    store = await backend.open(clock=lambda: 5_000)
    ctx = MemoryContext(agent_id="a", session_key="agent:a:main", project="/p")
    words = await store.put(prepare(
        ctx, title="load settings", text="load settings, then load the settings again",
        now_ms=1,
    ))  # fmt: skip
    twice = await store.put(prepare(ctx, text="load settings twice: load settings", now_ms=1))
    ident = await store.put(prepare(ctx, text="call load_settings() at start", now_ms=1))
    other = await store.put(prepare(ctx, text="the reload_settingsfile helper", now_ms=1))
    found = await store.recall(ctx, "load_settings", limit=2)
    returned = [h.document.doc_id for h in found.hits]
    stamps = {}
    for doc in (words, twice, ident, other):
        got = await store.get(doc.doc_id)
        assert got is not None
        stamps[doc.doc_id] = got.last_recalled_at_ms
    assert {k for k, v in stamps.items() if v == 5_000} == set(returned)
    assert {k for k, v in stamps.items() if v is None} == {twice.doc_id, other.doc_id}
    assert returned == [ident.doc_id, words.doc_id]
    assert (found.hits[0].lexical_rank, found.hits[0].trigram_rank) == (3, 1)
