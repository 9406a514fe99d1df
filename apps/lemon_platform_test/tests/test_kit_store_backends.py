"""The Store contract kit run against every lemon_core backend: SQLite, memory, PostgreSQL."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from lemon_core.store import Store
from lemon_infra import MemoryStore, PostgresStore, SQLiteStore, drop_schema
from lemon_platform_test.store_kit import ManualClock, StoreContract


class TestSQLiteStoreContract(StoreContract):
    persistent = True

    async def open_store(self, directory: Path, clock: ManualClock) -> Store:
        return await SQLiteStore.open(directory / "store" / "lemon.sqlite3", clock=clock)

    async def fail_writes_of(self, store: Store, key: str) -> bool:
        # A second connection to the same file installs a trigger the store's writes hit.
        path = store.statistics()["path"]
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute(
                "CREATE TRIGGER kit_fail BEFORE INSERT ON lemon_kv WHEN NEW.key = ? "
                "BEGIN SELECT RAISE(ABORT, 'kit: injected write failure'); END".replace(
                    "?", "'" + key.replace("'", "''") + "'"
                )
            )
            conn.commit()
        return True


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

    async def fail_writes_of(self, store: Store, key: str) -> bool:
        # A trigger that raises: the server fails the batch half way through.
        schema = sql.Identifier(self.schema)
        async with await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as conn:
            await conn.execute(
                sql.SQL(
                    "CREATE FUNCTION {}.kit_fail() RETURNS trigger LANGUAGE plpgsql AS $$ "
                    "BEGIN IF NEW.key = {} THEN RAISE EXCEPTION 'kit: injected write failure'; "
                    "END IF; RETURN NEW; END $$"
                ).format(schema, sql.Literal(key))
            )
            await conn.execute(
                sql.SQL(
                    "CREATE TRIGGER kit_fail BEFORE INSERT OR UPDATE ON {}.lemon_kv "
                    "FOR EACH ROW EXECUTE FUNCTION {}.kit_fail()"
                ).format(schema, schema)
            )
        return True
