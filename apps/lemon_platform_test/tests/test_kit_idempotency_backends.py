"""The idempotency store contract kit run against every backend: SQLite (a file in the test's
directory) and PostgreSQL (a schema of its own per test, dropped after)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lemon_core.idempotency import IdempotencyStore, SQLiteIdempotencyStore
from lemon_core.idempotency.postgres import PostgresIdempotencyStore
from lemon_core.store.postgres import drop_schema
from lemon_platform_test.idempotency_kit import IdempotencyStoreContract

DSN = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


class TestIdempotencyStoreContract(IdempotencyStoreContract):
    backend: str
    schema: str

    @pytest.fixture(autouse=True, params=["sqlite", "postgres"])
    async def _backend(self, request: pytest.FixtureRequest) -> AsyncIterator[None]:
        self.backend = request.param
        self.schema = f"idem_{os.getpid()}_{uuid.uuid4().hex[:10]}"
        yield
        if self.backend == "postgres":
            await drop_schema(DSN, self.schema)

    async def open_store(self, directory: Path) -> IdempotencyStore:
        if self.backend == "postgres":
            return await PostgresIdempotencyStore.open(
                DSN, schema=self.schema, min_connections=1, max_connections=4
            )
        return await SQLiteIdempotencyStore.open(directory / "store" / "idempotency.sqlite3")
