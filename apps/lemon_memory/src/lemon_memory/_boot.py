"""lemon_memory's ``lemon.apps`` hook: the memory store on a booted runtime.

Profiles ``daemon``, ``execution-only`` and ``full`` (before ``coding_agent``, whose runs
find the store through :data:`~lemon_memory.MEMORY_STORE`). ``[memory] enabled`` off: nothing
is opened. On: ``$LEMON_HOME/store/memory.sqlite3`` is opened, or with ``[store] backend =
"postgres"`` the memory tables in the shared store's schema, on its pool (a store that cannot
be opened is logged, the capability is not registered, recall is unavailable and chat still
works), registered as ``MEMORY_STORE``, and swept of expired documents every
``sweep_interval_s`` (one bounded batch per pass, off the event loop), and consolidated
every ``consolidate_interval_s`` (near-duplicates merged, as ``lemon memory consolidate``).
The goal store (:mod:`lemon_memory.goals`, on the runtime's Store and bus) and the
``goal.*`` / ``memory.*`` wire methods are registered on ``WIRE_METHODS`` either way. Leaving
the lifespan unregisters them, stops the sweep, unregisters and closes the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

from lemon_core.config import read_secrets
from lemon_core.home import Home
from lemon_core.store import RunStore
from lemon_core.wire_methods import WIRE_METHODS, WireMethods
from lemon_memory import embeddings
from lemon_memory._inmemory import InMemoryMemoryStore
from lemon_memory._section import SECTIONS, MemoryConfig
from lemon_memory._sqlite import SqliteMemoryStore
from lemon_memory._wire import registered
from lemon_memory.admin import Operator
from lemon_memory.errors import MemoryStoreError, MemoryUnavailableError
from lemon_memory.goals import GOAL_STORE, GoalStore
from lemon_memory.ingest import RunIngester
from lemon_memory.store import MEMORY_STORE, MemoryStore
from lemon_runtime import AppSpec, Runtime

__all__ = ["MemoryApp", "lemon_memory_app", "memory_path", "open_store", "store_bounds"]

log = logging.getLogger("lemon_memory")


@dataclass(slots=True)
class MemoryApp:
    """The app's handle: the open store (``None`` when disabled or unavailable) and, when
    unavailable, why."""

    goals: GoalStore
    store: MemoryStore | None = None
    unavailable: str | None = None
    ingester: RunIngester | None = None
    consolidated: asyncio.Event = field(default_factory=asyncio.Event)
    """Set after each scheduled consolidation pass (tests wait on it)."""


def memory_path(home: Home) -> str:
    return str(home.store_dir / "memory.sqlite3")


def store_bounds(config: MemoryConfig) -> dict[str, Any]:
    """The store's bounds from ``[memory]`` (keyword arguments of either backend)."""
    return {
        "max_docs_per_scope": config.max_docs_per_scope,
        "max_bytes_per_scope": config.max_bytes_per_scope,
        "max_docs": config.max_docs,
        "max_bytes": config.max_bytes,
        "sweep_batch": config.sweep_batch,
    }


def open_store(config: MemoryConfig, home: Home) -> SqliteMemoryStore:
    """The configured SQLite memory store of ``home`` (raises ``MemoryUnavailableError``)."""
    return SqliteMemoryStore(home.store_dir / "memory.sqlite3", **store_bounds(config))


async def open_configured(runtime: Runtime, config: MemoryConfig) -> MemoryStore:
    """The memory store ``[memory] backend`` names; ``auto`` follows ``[store]``: PostgreSQL
    full-text search in the shared store's schema (on its pool) when ``backend =
    "postgres"``, else the SQLite file."""
    backend = config.backend
    if backend == "memory":
        return InMemoryMemoryStore(**store_bounds(config))
    if backend == "postgres" or (backend == "auto" and runtime.config.store.backend == "postgres"):
        from lemon_memory._postgres import PgRunner, PostgresMemoryStore

        shared = runtime.store
        if not isinstance(shared, PgRunner):
            raise MemoryUnavailableError(
                "[memory] backend is postgres but the runtime's store has no PostgreSQL pool: "
                'set [store] backend = "postgres" (with its dsn), or [memory] backend = "auto" '
                'or "sqlite"'
            )
        return await PostgresMemoryStore.open(shared, **store_bounds(config))
    return await asyncio.to_thread(open_store, config, Home(root=runtime.home))


async def _warm(store: SqliteMemoryStore) -> None:
    try:
        await store.warm()
    except MemoryStoreError as exc:  # the first recall tries again
        log.warning("memory recall index not built: %s", exc)


@runtime_checkable
class Embeddable(Protocol):
    """A store with an embeddings lane (the three backends)."""

    def attach(self, embedder: embeddings.Embedder | None) -> None: ...

    async def backfill(self, batch: int = 64) -> int: ...


async def _embed(store: Embeddable) -> None:
    """The startup task of the embeddings lane: load the model off the event loop, attach
    it, give older documents their vectors (a broken install or a failing store: logged,
    recall stays lexical or partly so)."""
    try:
        embedder = await asyncio.to_thread(embeddings.load)
    except (ImportError, OSError, RuntimeError) as exc:  # a broken install: lexical recall
        log.warning("memory embeddings not loaded (lexical recall): %s", exc)
        return
    if embedder is None:
        return
    store.attach(embedder)
    try:
        added = await store.backfill()
    except MemoryStoreError as exc:
        log.warning("memory vectors not backfilled: %s", exc)
    else:
        if added:
            log.info("memory embeddings: %d documents given a vector", added)


async def _sweep_forever(store: MemoryStore, interval_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            await store.sweep()
        except MemoryStoreError as exc:
            log.warning("memory sweep failed: %s", exc)


async def _consolidate_forever(store: MemoryStore, interval_s: float, done: asyncio.Event) -> None:
    operator = Operator(store)
    while True:
        await asyncio.sleep(interval_s)
        try:
            found = await operator.consolidate({})
        except MemoryStoreError as exc:
            log.warning("memory consolidation failed: %s", exc)
        else:
            if found["merged"]:
                log.info("memory consolidation merged %d documents", found["merged"])
            if found["skipped"]:  # never applied unattended: lemon memory consolidate --yes
                log.info("memory consolidation skipped %d merges that shrink the text by "
                         "more than half", len(found["skipped"]))  # fmt: skip
        done.set()


async def _ingest_forever(ingester: RunIngester, interval_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            await ingester.poll_once()
        except Exception as exc:  # a store failure is logged; the next poll tries again
            log.warning("run-summary ingest failed: %s", exc)


@contextlib.asynccontextmanager
async def _lifespan(runtime: Runtime) -> AsyncIterator[MemoryApp]:
    config = runtime.section(MemoryConfig)
    goals = GoalStore(runtime.store, runtime.bus)
    capabilities = runtime.context.capabilities
    methods = capabilities.require(WIRE_METHODS)
    capabilities.register(GOAL_STORE, goals)
    try:
        async with _with_memory(runtime, config, goals, methods) as app:
            yield app
    finally:
        capabilities.unregister(GOAL_STORE, goals)


@contextlib.asynccontextmanager
async def _with_memory(
    runtime: Runtime, config: MemoryConfig, goals: GoalStore, methods: WireMethods
) -> AsyncIterator[MemoryApp]:
    capabilities = runtime.context.capabilities
    if not config.enabled:
        with registered(methods, goals, None):
            yield MemoryApp(goals=goals)
        return
    try:
        store = await open_configured(runtime, config)
    except MemoryStoreError as exc:
        log.error("memory unavailable: %s", exc)
        with registered(methods, goals, None, unavailable=str(exc)):
            yield MemoryApp(goals=goals, unavailable=str(exc))
        return
    capabilities.register(MEMORY_STORE, store)
    home = runtime.home
    secrets = await asyncio.to_thread(lambda: tuple(read_secrets(home).values()))
    ingester = (
        RunIngester(
            store,
            RunStore(runtime.store),
            days=config.run_summary_days,
            known_secrets=lambda: secrets,
        )
        if config.ingest_runs
        else None
    )
    app = MemoryApp(goals=goals, store=store, ingester=ingester)
    tasks = [asyncio.create_task(_sweep_forever(store, config.sweep_interval_s))]
    if isinstance(store, SqliteMemoryStore):  # the recall index, before the first recall
        tasks.append(asyncio.create_task(_warm(store)))
    if config.embeddings == "auto" and isinstance(store, Embeddable) and embeddings.installed():
        tasks.append(asyncio.create_task(_embed(store)))
    if ingester is not None:
        tasks.append(asyncio.create_task(_ingest_forever(ingester, config.ingest_interval_s)))
    if config.consolidate_interval_s > 0:
        tasks.append(asyncio.create_task(
            _consolidate_forever(store, config.consolidate_interval_s, app.consolidated)
        ))  # fmt: skip
    try:
        with registered(methods, goals, store, known_secrets=lambda: secrets):
            yield app
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        capabilities.unregister(MEMORY_STORE, store)
        await store.close()


lemon_memory_app: Final = AppSpec(
    name="lemon_memory",
    lifespan=_lifespan,
    before=("coding_agent",),
    profiles=frozenset({"daemon", "execution-only", "full"}),
    description="durable scoped memory (MEMORY_STORE) and its retention sweep",
    sections=SECTIONS,
)
