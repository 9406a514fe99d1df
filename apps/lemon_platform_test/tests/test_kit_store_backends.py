"""The Store contract kit run against every lemon_core backend: SQLite, memory, PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lemon_core.store import MemoryStore, SQLiteStore, Store
from lemon_core.store.postgres import PostgresStore, drop_schema
from lemon_platform_test.store_kit import ManualClock, StoreContract


class TestSQLiteStoreContract(StoreContract):
    persistent = True

    async def open_store(self, directory: Path, clock: ManualClock) -> Store:
        return await SQLiteStore.open(directory / "store" / "lemon.sqlite3", clock=clock)


class TestMemoryStoreContract(StoreContract):
    persistent = False

    async def open_store(self, directory: Path, clock: ManualClock) -> Store:
        return MemoryStore(clock=clock)


#: The PostgreSQL server every test run uses (each test in a schema of its own, dropped after).
POSTGRES_DSN = os.environ.get(
    "LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)


class TestPostgresStoreContract(StoreContract):
    persistent = True

    @pytest.fixture(autouse=True)
    async def _schema(self) -> AsyncIterator[None]:
        self.schema = f"kit_{os.getpid()}_{uuid.uuid4().hex[:10]}"
        yield
        await drop_schema(POSTGRES_DSN, self.schema)

    async def open_store(self, directory: Path, clock: ManualClock) -> Store:
        return await PostgresStore.open(POSTGRES_DSN, schema=self.schema, clock=clock)
