"""The fire ledger contract kit run against every backend: memory (a manual clock), SQLite
(one file in the test's directory, several connections to it) and PostgreSQL (a schema of its
own per test, several stores on it, dropped after)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from lemon_core.clock import ManualClock
from lemon_core.fire_ledger import Fire, FireLedger
from lemon_infra import (
    MemoryFireLedger,
    PostgresFireLedger,
    PostgresStore,
    SQLiteFireLedger,
    drop_schema,
)
from lemon_platform_test.fire_ledger_kit import FireLedgerContract

DSN = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


class TestFireLedgerContract(FireLedgerContract):
    backend: str
    schema: str
    path: Path
    clock: ManualClock
    memory: MemoryFireLedger
    closers: list[PostgresStore | SQLiteFireLedger]

    @pytest.fixture(autouse=True, params=["memory", "sqlite", "postgres"])
    async def _backend(self, request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[None]:
        self.backend = request.param
        self.schema = f"fires_{os.getpid()}_{uuid.uuid4().hex[:10]}"
        self.path = tmp_path / "store" / "lemon.sqlite3"
        self.clock = ManualClock(1_767_225_600_000)
        self.memory = MemoryFireLedger(clock=self.clock)
        self.closers = []
        try:
            yield
        finally:
            for closer in self.closers:
                await closer.close()
            if self.backend == "postgres":
                await drop_schema(DSN, self.schema)

    async def open_ledger(self) -> FireLedger:
        if self.backend == "memory":
            return self.memory
        if self.backend == "sqlite":
            ledger = await SQLiteFireLedger.open(self.path, clock=self.clock)
            self.closers.append(ledger)
            return ledger
        store = await PostgresStore.open(DSN, schema=self.schema, max_connections=4)
        self.closers.append(store)
        return PostgresFireLedger(store)

    async def expire(self, fire: Fire) -> None:
        if self.backend in ("memory", "sqlite"):
            self.clock.now = max(self.clock.now, fire.lease_until_ms)
            return
        async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
            await conn.execute(
                f'UPDATE "{self.schema}".lemon_fires SET lease_until_ms = 0 '
                "WHERE job_id = %s AND due_at_ms = %s AND NOT done",
                (fire.job_id, fire.due_at_ms),
            )
