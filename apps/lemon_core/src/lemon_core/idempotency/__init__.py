"""Idempotency: the store port that makes an ingress submission exactly once, or honestly
"unknown", its records, key hashing, the SQLite backend, and (``lemon_core.idempotency.postgres``,
imported only when a PostgreSQL store is configured) the PostgreSQL backend.

See :mod:`lemon_core.idempotency._records` for the states of a fence and
:mod:`lemon_core.idempotency._sqlite` for the schema versions and the legacy migration.
"""

from __future__ import annotations

from lemon_core.idempotency._records import (
    MAX_IDEMPOTENCY_KEY_CHARS,
    FenceState,
    IdempotencyRecord,
    IdempotencyStore,
    MessageBinding,
    MigrationReport,
    Reservation,
    StoredResponse,
    SweepReport,
    body_fingerprint,
    check_idempotency_key,
    hash_idempotency_key,
)
from lemon_core.idempotency._shared import open_shared_idempotency_store
from lemon_core.idempotency._sqlite import (
    LEGACY_TABLE,
    SCHEMA_VERSION,
    SQLiteIdempotencyStore,
    create_legacy_table,
)
from lemon_core.idempotency.errors import (
    IdempotencyError,
    IdempotencyStoreError,
    InvalidIdempotencyKeyError,
)

__all__ = [
    "LEGACY_TABLE",
    "MAX_IDEMPOTENCY_KEY_CHARS",
    "SCHEMA_VERSION",
    "FenceState",
    "IdempotencyError",
    "IdempotencyRecord",
    "IdempotencyStore",
    "IdempotencyStoreError",
    "InvalidIdempotencyKeyError",
    "MessageBinding",
    "MigrationReport",
    "Reservation",
    "SQLiteIdempotencyStore",
    "StoredResponse",
    "SweepReport",
    "body_fingerprint",
    "check_idempotency_key",
    "create_legacy_table",
    "hash_idempotency_key",
    "open_shared_idempotency_store",
]
