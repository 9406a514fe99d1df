"""Lemon's backends: the SQLite, PostgreSQL and in-memory stores, the loopback and Redis
bus backends, the lease and fire-ledger implementations and the idempotency stores.

One private module per backend behind this one ``__all__``. The PostgreSQL and Redis
names are imported on first use, so a runtime on the defaults (SQLite, in-process bus)
never loads psycopg or redis-py. The Protocols they implement live in lemon_core.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from lemon_infra._bus_backends import BACKENDS, create_backend
from lemon_infra._default_store import default_store_path, open_default_store
from lemon_infra._loopback_bus import LoopbackBackend, decode_frame, encode_frame
from lemon_infra._memory_fire_ledger import MemoryFireLedger
from lemon_infra._memory_leases import FencedStore, MemoryLeases
from lemon_infra._memory_store import MemoryStore
from lemon_infra._shared_idempotency import open_shared_idempotency_store
from lemon_infra._sqlite_backup import (
    BackupReport,
    RestoreReport,
    backup_store,
    backup_target,
    restore_store,
)
from lemon_infra._sqlite_fire_ledger import SQLiteFireLedger
from lemon_infra._sqlite_idempotency import (
    LEGACY_TABLE,
    SCHEMA_VERSION,
    SQLiteIdempotencyStore,
    create_legacy_table,
)
from lemon_infra._sqlite_integrity import check_store_file, corrupt_store_error, quick_check
from lemon_infra._sqlite_store import SQLiteStore

if TYPE_CHECKING:
    from lemon_infra._postgres_fire_ledger import PostgresFireLedger
    from lemon_infra._postgres_idempotency import (
        PostgresIdempotencyStore,
        create_postgres_legacy_table,
    )
    from lemon_infra._postgres_store import MIGRATIONS, PostgresLeases, PostgresStore, drop_schema
    from lemon_infra._redis_bus import RedisBackend, StatusCallback

#: Names whose module imports a database or Redis driver: loaded on first use.
_LAZY: Final[dict[str, str]] = {
    "PostgresIdempotencyStore": "lemon_infra._postgres_idempotency",
    "create_postgres_legacy_table": "lemon_infra._postgres_idempotency",
    "MIGRATIONS": "lemon_infra._postgres_store",
    "PostgresFireLedger": "lemon_infra._postgres_fire_ledger",
    "PostgresLeases": "lemon_infra._postgres_store",
    "PostgresStore": "lemon_infra._postgres_store",
    "drop_schema": "lemon_infra._postgres_store",
    "RedisBackend": "lemon_infra._redis_bus",
    "StatusCallback": "lemon_infra._redis_bus",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lemon_infra' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "BACKENDS",
    "LEGACY_TABLE",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "BackupReport",
    "FencedStore",
    "LoopbackBackend",
    "MemoryFireLedger",
    "MemoryLeases",
    "MemoryStore",
    "PostgresFireLedger",
    "PostgresIdempotencyStore",
    "PostgresLeases",
    "PostgresStore",
    "RedisBackend",
    "RestoreReport",
    "SQLiteFireLedger",
    "SQLiteIdempotencyStore",
    "SQLiteStore",
    "StatusCallback",
    "backup_store",
    "backup_target",
    "check_store_file",
    "corrupt_store_error",
    "create_backend",
    "create_legacy_table",
    "create_postgres_legacy_table",
    "decode_frame",
    "default_store_path",
    "drop_schema",
    "encode_frame",
    "open_default_store",
    "open_shared_idempotency_store",
    "quick_check",
    "restore_store",
]
