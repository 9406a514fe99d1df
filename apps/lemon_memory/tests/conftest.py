"""Fixtures: the booted ``daemon`` profile (real SQLite stores in a temporary home, the
control plane on 127.0.0.1:<ephemeral>), a WebSocket client that speaks the wire, and the
``backend`` the store tests run on (in memory, a SQLite file, a PostgreSQL schema)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from lemon_control_plane import ControlPlane, ControlPlaneOptions
from lemon_control_plane.testing import ClientFactory, plane_client
from lemon_core.config import load_config
from lemon_memory import InMemoryMemoryStore, MemoryStore, SqliteMemoryStore
from lemon_memory.embeddings import Embedder
from lemon_runtime import Runtime


@pytest.fixture
def boot(tmp_path: Path) -> Callable[..., Runtime]:
    def make(config: str = "", **control_plane: Any) -> Runtime:
        home = tmp_path / "home"
        work = tmp_path / "work"
        home.mkdir(exist_ok=True)
        work.mkdir(exist_ok=True)
        (home / "config.toml").write_text(config, encoding="utf-8")
        loaded = load_config(home=home, cwd=work, environ={})
        settings = {"port": 0, "cwd": str(work), **control_plane}
        return Runtime(
            profile="daemon", config=loaded, options=[ControlPlaneOptions(settings=settings)]
        )

    return make


@pytest.fixture
async def runtime(boot: Callable[..., Runtime]) -> AsyncIterator[Runtime]:
    async with boot() as rt:
        yield rt


@pytest.fixture
def client(runtime: Runtime) -> ClientFactory:
    plane = runtime.handle("lemon_control_plane")
    assert isinstance(plane, ControlPlane)
    return plane_client(plane)


# -- the memory store tests: one suite, three backends -----------------------------------------

PG_DSN = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


class Backend:
    """Opens memory stores of one backend for one test: SQLite files under ``tmp_path``, or
    PostgreSQL stores in one schema of its own (on lemon_infra's PostgresStore pool, the one
    the runtime uses), dropped afterwards."""

    def __init__(self, name: str, tmp_path: Path) -> None:
        self.name = name
        self.tmp_path = tmp_path
        self.schema = f"mem_{os.getpid()}_{uuid.uuid4().hex[:10]}"
        self._pg: list[Any] = []
        self._stores: list[MemoryStore] = []
        self._shared: MemoryStore | None = None

    async def open(
        self, *, clock: Callable[[], int], embedder: Embedder | None = None, **bounds: int
    ) -> MemoryStore:
        store: MemoryStore
        if self.name == "sqlite":
            path = self.tmp_path / "memory.sqlite3"
            store = SqliteMemoryStore(path, clock=clock, embedder=embedder, **bounds)
        elif self.name == "memory":
            store = InMemoryMemoryStore(clock=clock, embedder=embedder, **bounds)
        else:
            from lemon_infra import PostgresStore
            from lemon_memory._postgres import PostgresMemoryStore

            shared = await PostgresStore.open(PG_DSN, schema=self.schema, max_connections=4)
            self._pg.append(shared)
            store = await PostgresMemoryStore.open(shared, clock=clock, embedder=embedder, **bounds)
        self._stores.append(store)
        return store

    async def shared(self, *, clock: Callable[[], int]) -> MemoryStore:
        """One store for the whole test (hypothesis: the examples of one test share it)."""
        if self._shared is None:
            self._shared = await self.open(clock=clock)
        return self._shared

    async def index_count(self, store: MemoryStore) -> int:
        """Index entries as the index itself counts them (no orphan ever)."""
        if isinstance(store, SqliteMemoryStore):
            return store.raw_fts_count()
        if isinstance(store, InMemoryMemoryStore):
            return store.index_count()
        from lemon_memory._postgres import PostgresMemoryStore

        assert isinstance(store, PostgresMemoryStore)
        return await store.index_count()

    async def vector_count(self, store: MemoryStore) -> int:
        """The embeddings lane's vectors the store holds (none left behind)."""
        if isinstance(store, SqliteMemoryStore | InMemoryMemoryStore):
            return store.vector_count()
        from lemon_memory._postgres import PostgresMemoryStore

        assert isinstance(store, PostgresMemoryStore)
        return await store.vector_count()

    async def raw_bytes(self) -> bytes:
        """Everything the backend persisted: the SQLite file and its WAL, or ``pg_dump`` of
        the schema."""
        if self.name == "sqlite":
            return b"".join(p.read_bytes() for p in sorted(self.tmp_path.glob("memory.sqlite3*")))
        if self.name == "memory":  # nothing persisted: what the open stores hold
            held = [await s.page(limit=100_000) for s in self._stores]
            return msgspec.json.encode(held)
        proc = await asyncio.create_subprocess_exec(
            "pg_dump", "--schema", self.schema, PG_DSN,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        assert b"memory_documents" in out
        return out

    async def close(self) -> None:
        for store in self._stores:
            await store.close()
        for shared in self._pg:
            await shared.close()
        if self._pg:
            from lemon_infra import drop_schema

            await drop_schema(PG_DSN, self.schema)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    made = Backend(request.param, tmp_path)
    try:
        yield made
    finally:
        await made.close()
