"""The idempotency store contract kit run against the SQLite backend (a PostgreSQL backend
subclasses the same kit)."""

from __future__ import annotations

from pathlib import Path

from lemon_core.idempotency import IdempotencyStore, SQLiteIdempotencyStore
from lemon_platform_test.idempotency_kit import IdempotencyStoreContract


class TestSQLiteIdempotencyStoreContract(IdempotencyStoreContract):
    async def open_store(self, directory: Path) -> IdempotencyStore:
        return await SQLiteIdempotencyStore.open(directory / "store" / "idempotency.sqlite3")
