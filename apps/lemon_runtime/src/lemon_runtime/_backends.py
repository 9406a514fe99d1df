"""Opening the store and the bus a configuration names (``[store]``, ``[bus]``).

The PostgreSQL and Redis backends are imported here only when configured, so a runtime on the
defaults (SQLite, in-process bus) never loads psycopg or redis-py.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from lemon_core.bus import SYSTEM, Bus
from lemon_core.config import Config, resolve_bus_url, resolve_store_dsn
from lemon_core.events import StoreBackendChanged
from lemon_core.fire_ledger import FireLedger
from lemon_core.home import Home
from lemon_core.leases import Leases
from lemon_core.store import Store
from lemon_infra import MemoryStore, open_default_store

__all__ = [
    "open_configured_bus",
    "open_configured_store",
    "open_fire_ledger",
    "shared_leases",
    "store_path",
    "watch_store",
]


def store_path(home: Path) -> Path:
    """The default store's SQLite file under ``home``: ``<home>/store/lemon.sqlite3`` (the
    layout of :func:`lemon_infra.default_store_path`)."""
    return Home(root=home).store


async def open_configured_store(
    config: Config,
    home: Path,
    *,
    backend: Literal["sqlite", "postgres", "memory"] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Store:
    """Open the store of ``[store]`` (``backend`` overrides its ``backend``). Raises
    ``ConfigError`` (a DSN variable unset) or ``StoreUnavailableError`` (cannot connect)."""
    env = os.environ if environ is None else environ
    chosen = backend or config.store.backend
    if chosen == "memory":
        return MemoryStore()
    if chosen == "postgres":
        from lemon_infra import PostgresStore

        dsn = resolve_store_dsn(config.store, env)
        return await PostgresStore.open(
            dsn, schema=config.store.schema, timeout_s=config.store.timeout_s
        )
    await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True, mode=0o700)
    return await open_default_store(store_path(home))


async def open_configured_bus(config: Config, *, environ: Mapping[str, str] | None = None) -> Bus:
    """A bus on the backend of ``[bus]``: in process, or Redis (connected before this returns;
    its channel prefix is ``[store] schema``). Raises ``ConfigError`` (a URL variable unset) or
    ``BusBackendUnavailableError`` (cannot connect)."""
    if config.bus.backend == "local":
        return Bus()
    from lemon_infra import RedisBackend

    url = resolve_bus_url(config.bus, os.environ if environ is None else environ)
    backend = RedisBackend(url, prefix=config.store.schema)
    await asyncio.to_thread(backend.connect)
    return Bus(backend=backend)


def shared_leases(store: Store) -> Leases | None:
    """Leases several daemons share, when ``store`` is shared (PostgreSQL); None otherwise
    (one machine: the gateway's locks stay in process)."""
    postgres = sys.modules.get("lemon_infra._postgres_store")  # loaded only if it was opened
    if postgres is not None and isinstance(store, postgres.PostgresStore):
        leases: Leases = postgres.PostgresLeases(store)
        return leases
    return None


async def open_fire_ledger(store: Store, home: Path) -> tuple[FireLedger, bool]:
    """The fire ledger that goes with ``store``: on PostgreSQL the same schema (every daemon on
    it shares the claims), on SQLite the file ``<home>/store/fires.sqlite3`` (every process of
    this home shares it), else in memory. The flag says whether the caller must close it."""
    postgres = sys.modules.get("lemon_infra._postgres_store")  # loaded only if it was opened
    if postgres is not None and isinstance(store, postgres.PostgresStore):
        from lemon_infra import PostgresFireLedger

        return PostgresFireLedger(store), False
    if isinstance(store, MemoryStore):
        from lemon_infra import MemoryFireLedger

        return MemoryFireLedger(), False
    from lemon_infra import SQLiteFireLedger

    ledger = await SQLiteFireLedger.open(Home(root=home).store_dir / "fires.sqlite3")
    return ledger, True


def watch_store(store: Store, bus: Bus) -> bool:
    """Publish ``store_backend_changed`` on ``system`` (to this process's subscribers) each
    time a shared store's server stops answering or answers again; ``False`` for a store that
    has no server to lose (SQLite, memory)."""
    postgres = sys.modules.get("lemon_infra._postgres_store")  # loaded only if it was opened
    if postgres is None or not isinstance(store, postgres.PostgresStore):
        return False

    def report(running: bool, reason: str) -> None:
        payload = StoreBackendChanged(backend="postgres", running=running, reason=reason)
        bus.broadcast_local_event(SYSTEM, StoreBackendChanged.event_type, payload)

    store.watch(report)
    return True
