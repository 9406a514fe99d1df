"""The webhook ingress's idempotency store: which one, opened how, swept how often.

With a shared (PostgreSQL) runtime store, the PostgreSQL idempotency store in its schema, on
its pool (every daemon of the schema shares the reservations: a key sent to any of them
executes once); otherwise ``$LEMON_HOME/store/idempotency.sqlite3``. Opening migrates legacy
raw-key rows. Only with the SQLite file (one daemon per home) are the fences a previous process
left pending turned into ``outcome_unknown`` at once; on a shared schema another daemon may
still be submitting its pending fences, so they are left alone, and each reads as
``outcome_unknown`` once its lease has run out.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from lemon_core.home import Home
from lemon_core.idempotency import IdempotencyStore, IdempotencyStoreError
from lemon_core.store import Store, system_clock_ms
from lemon_infra import SQLiteIdempotencyStore, open_shared_idempotency_store

__all__ = ["idempotency_store_path", "open_idempotency_store", "sweep_forever"]

log = logging.getLogger("lemon_webhooks.store")


def idempotency_store_path(home: Path) -> Path:
    """The idempotency store's SQLite file under ``home``."""
    return Home(root=home).idempotency_store


async def open_idempotency_store(
    runtime_store: Store, *, home: Path, ttl_s: float
) -> IdempotencyStore:
    """The store the ingress uses on ``runtime_store`` (see the module docstring), migrated
    and, when it is this home's own file, recovered. The caller closes it."""
    shared = await open_shared_idempotency_store(runtime_store)
    store: IdempotencyStore = (
        shared
        if shared is not None
        else await SQLiteIdempotencyStore.open(idempotency_store_path(home))
    )
    try:
        now = system_clock_ms()
        migrated = await store.migrate_legacy(now_ms=now, ttl_ms=int(ttl_s * 1000))
        if migrated.seen:
            log.warning("idempotency: migrated legacy raw-key rows: %s", migrated)
        if shared is None:  # the only writer of this file: nothing can be in flight
            await store.recover(now_ms=now)
    except BaseException:
        await store.close()
        raise
    return store


async def sweep_forever(store: IdempotencyStore, interval_s: float) -> None:
    """Remove expired fences and responses every ``interval_s`` until cancelled; a failed
    sweep removes nothing, keeps its watermark and is retried at the next interval."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            report = await store.sweep(now_ms=system_clock_ms())
        except IdempotencyStoreError as exc:
            log.warning("idempotency sweep failed (retried in %ss): %s", interval_s, exc)
            continue
        if report.fences_removed:
            log.info("idempotency sweep removed %d fences", report.fences_removed)
