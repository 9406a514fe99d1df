"""The Store contract kit run against every lemon_core backend."""

from __future__ import annotations

from pathlib import Path

from lemon_core.store import MemoryStore, SQLiteStore, Store
from lemon_platform_test.store_kit import ManualClock, StoreContract


class TestSQLiteStoreContract(StoreContract):
    persistent = True

    async def open_store(self, directory: Path, clock: ManualClock) -> Store:
        return await SQLiteStore.open(directory / "store" / "lemon.sqlite3", clock=clock)


class TestMemoryStoreContract(StoreContract):
    persistent = False

    async def open_store(self, directory: Path, clock: ManualClock) -> Store:
        return MemoryStore(clock=clock)
