"""Idempotency: the store port that makes an ingress submission exactly once, or honestly
"unknown", its records and key hashing (:mod:`lemon_core.idempotency.records`) and the
fence logic every backend shares (:mod:`lemon_core.idempotency.logic`).

The SQLite and PostgreSQL stores live in lemon_infra (``SQLiteIdempotencyStore``,
``PostgresIdempotencyStore``, ``open_shared_idempotency_store``).
"""

from __future__ import annotations

from lemon_core.idempotency.errors import (
    IdempotencyError,
    IdempotencyStoreError,
    InvalidIdempotencyKeyError,
)
from lemon_core.idempotency.records import (
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

__all__ = [
    "MAX_IDEMPOTENCY_KEY_CHARS",
    "FenceState",
    "IdempotencyError",
    "IdempotencyRecord",
    "IdempotencyStore",
    "IdempotencyStoreError",
    "InvalidIdempotencyKeyError",
    "MessageBinding",
    "MigrationReport",
    "Reservation",
    "StoredResponse",
    "SweepReport",
    "body_fingerprint",
    "check_idempotency_key",
    "hash_idempotency_key",
]
