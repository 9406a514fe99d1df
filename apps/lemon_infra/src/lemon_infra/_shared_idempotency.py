"""The idempotency store several daemons share, when their store is shared."""

from __future__ import annotations

import sys

from lemon_core.idempotency.records import IdempotencyStore

__all__ = ["open_shared_idempotency_store"]


async def open_shared_idempotency_store(store: object) -> IdempotencyStore | None:
    """An idempotency store in ``store``'s PostgreSQL schema, on its pool, when ``store`` is a
    :class:`~lemon_infra.PostgresStore` (every daemon of the schema shares its
    reservations); None otherwise (the caller opens its own SQLite file). Closing the returned
    store leaves ``store`` open. Raises ``IdempotencyStoreError`` when the tables cannot be
    created or read."""
    postgres = sys.modules.get("lemon_infra._postgres_store")  # loaded only if it was opened
    if postgres is None or not isinstance(store, postgres.PostgresStore):
        return None
    from lemon_infra._postgres_idempotency import PostgresIdempotencyStore

    return await PostgresIdempotencyStore.attach(store)
