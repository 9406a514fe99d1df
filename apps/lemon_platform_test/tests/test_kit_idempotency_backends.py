"""The idempotency store contract kit run against every backend: SQLite (a file in the test's
directory) and PostgreSQL (a schema of its own per test, dropped after), with the legacy
table and the injected faults (real triggers) of each."""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import psycopg
import pytest

from lemon_core.idempotency import IdempotencyStore
from lemon_infra import (
    LEGACY_TABLE,
    PostgresIdempotencyStore,
    SQLiteIdempotencyStore,
    create_legacy_table,
    create_postgres_legacy_table,
    drop_schema,
)
from lemon_platform_test.idempotency_kit import Fault, IdempotencyStoreContract

DSN = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")

#: Each fault: (trigger name, its table, BEFORE/AFTER event, what it does). SQLite runs the
#: action as the trigger's body; PostgreSQL wraps it in a plpgsql function.
_FAULTS: Final[dict[Fault, tuple[str, str, str, str, str]]] = {
    "raw_delete": (
        "no_raw_delete",
        LEGACY_TABLE,
        "BEFORE DELETE",
        "SELECT RAISE(ABORT, 'injected delete failure');",
        "RAISE EXCEPTION 'injected delete failure';",
    ),
    "fence_delete": (
        "no_fence_delete",
        "idem_fences",
        "BEFORE DELETE",
        "SELECT RAISE(ABORT, 'injected fence delete failure');",
        "RAISE EXCEPTION 'injected fence delete failure';",
    ),
    "legacy_writer": (
        "legacy_writer",
        "idem_fences",
        "AFTER INSERT",
        f"UPDATE {LEGACY_TABLE} SET state = 'completed', run_id = 'run-late', "
        "response_json = '{\"late\":true}';",
        "UPDATE {schema}." + LEGACY_TABLE + " SET state = 'completed', run_id = 'run-late', "
        "response_json = '{\"late\":true}'; RETURN NULL;",
    ),
}


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
        return await SQLiteIdempotencyStore.open(self._db(directory))

    @staticmethod
    def _db(directory: Path) -> Path:
        return directory / "store" / "idempotency.sqlite3"

    async def _sql(
        self, statement: str, params: tuple[object, ...] = ()
    ) -> list[tuple[object, ...]]:
        async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
            cur = await conn.execute(statement, params)
            return list(await cur.fetchall()) if cur.description else []

    async def write_legacy_rows(self, directory: Path, rows: list[tuple[object, ...]]) -> None:
        if self.backend == "postgres":
            async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
                await create_postgres_legacy_table(conn, self.schema)
                async with conn.cursor() as cur:
                    await cur.executemany(
                        f'INSERT INTO "{self.schema}".{LEGACY_TABLE} '
                        "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                        rows,
                    )
            return
        self._db(directory).parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(self._db(directory)) as conn:
            create_legacy_table(conn)
            conn.executemany(f"INSERT INTO {LEGACY_TABLE} VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    async def legacy_rows(self, directory: Path) -> list[tuple[object, ...]]:
        return await self._select(
            directory, f"SELECT idempotency_key, state FROM {{}}{LEGACY_TABLE}"
        )

    async def fence_rows(self, directory: Path) -> list[tuple[object, ...]]:
        return await self._select(directory, "SELECT * FROM {}idem_fences")

    async def _select(self, directory: Path, template: str) -> list[tuple[object, ...]]:
        if self.backend == "postgres":
            return await self._sql(template.format(f'"{self.schema}".'))
        with sqlite3.connect(self._db(directory)) as conn:
            return [tuple(row) for row in conn.execute(template.format(""))]

    async def set_fault(self, directory: Path, fault: Fault, *, on: bool) -> None:
        name, table, event, sqlite_action, postgres_action = _FAULTS[fault]
        if self.backend == "postgres":
            schema = f'"{self.schema}"'
            if on:
                await self._sql(
                    f"CREATE FUNCTION {schema}.{name}() RETURNS trigger LANGUAGE plpgsql AS "
                    f"$$ BEGIN {postgres_action.replace('{schema}', schema)} END $$"
                )
                await self._sql(
                    f"CREATE TRIGGER {name} {event} ON {schema}.{table} "
                    f"FOR EACH ROW EXECUTE FUNCTION {schema}.{name}()"
                )
            else:
                await self._sql(f"DROP TRIGGER IF EXISTS {name} ON {schema}.{table}")
                await self._sql(f"DROP FUNCTION IF EXISTS {schema}.{name}()")
            return
        with sqlite3.connect(self._db(directory)) as conn:
            if on:
                conn.execute(f"CREATE TRIGGER {name} {event} ON {table} BEGIN {sqlite_action} END")
            else:
                conn.execute(f"DROP TRIGGER IF EXISTS {name}")
