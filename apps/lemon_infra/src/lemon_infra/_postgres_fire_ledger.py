"""PostgresFireLedger: the fire ledger in the ``lemon_fires`` table of a PostgresStore's schema
(migration 3), shared by every daemon on that schema.

Each call is one statement, so it is atomic against every other daemon: a claim is
``INSERT ... ON CONFLICT DO NOTHING RETURNING`` on the primary key ``(job_id, due_at_ms)``
(a batched claim the same over ``unnest`` of the keys, inserted in key order so that two
overlapping batches wait on each other in one order and cannot deadlock); a
renewal and a record are ``UPDATE ... WHERE fence = :mine AND NOT done``; a takeover updates the
expired rows a ``FOR UPDATE SKIP LOCKED`` scan picked (racing daemons never take the same one),
incrementing ``fence``. Expiry is judged by the server's clock, as :mod:`lemon_core.leases`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import psycopg

from lemon_core.fire_ledger import (
    TERMINAL_STATUSES,
    Fire,
    FireWrite,
    check_fire_key,
    check_fire_keys,
    check_lease_ms,
    check_prune,
    check_status,
    check_writes,
)
from lemon_infra._fire_rows import FIRE_COLUMNS, fire_of
from lemon_infra._postgres_store import _NOW_MS, PostgresStore, _check_pg_text, _q

__all__ = ["PostgresFireLedger"]

_DEADLOCK_RETRIES: Final = 3


class PostgresFireLedger:
    """Fires of a :class:`PostgresStore`'s schema (the store's pool; closing the store ends it)."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        schema = store.schema
        self._claim = _q(
            "INSERT INTO {schema}.lemon_fires (job_id, due_at_ms, owner, fence, lease_until_ms, "
            "status, claimed_at_ms, updated_at_ms) VALUES (%s, %s, %s, 1, "
            + _NOW_MS
            + " + %s, 'claimed', "
            + _NOW_MS
            + ", "
            + _NOW_MS
            + ") ON CONFLICT (job_id, due_at_ms) DO NOTHING RETURNING "
            + FIRE_COLUMNS,
            schema,
        )
        self._claim_many = _q(
            "INSERT INTO {schema}.lemon_fires (job_id, due_at_ms, owner, fence, lease_until_ms, "
            "status, claimed_at_ms, updated_at_ms) SELECT k.job_id, k.due_at_ms, %s, 1, "
            + _NOW_MS
            + " + %s, 'claimed', "
            + _NOW_MS
            + ", "
            + _NOW_MS
            + " FROM unnest(%s::text[], %s::bigint[]) AS k (job_id, due_at_ms) "
            "ORDER BY k.job_id, k.due_at_ms "
            "ON CONFLICT (job_id, due_at_ms) DO NOTHING RETURNING " + FIRE_COLUMNS,
            schema,
        )
        self._renew = _q(
            "UPDATE {schema}.lemon_fires SET lease_until_ms = "
            + _NOW_MS
            + " + %s, updated_at_ms = "
            + _NOW_MS
            + " WHERE job_id = %s AND due_at_ms = %s AND fence = %s AND NOT done RETURNING "
            + FIRE_COLUMNS,
            schema,
        )
        self._record = _q(
            "UPDATE {schema}.lemon_fires SET status = %s, done = %s, "
            "run_id = COALESCE(%s, run_id), outcome = COALESCE(%s, outcome), "
            "lease_until_ms = CASE WHEN %s THEN 0 ELSE lease_until_ms END, updated_at_ms = "
            + _NOW_MS
            + " WHERE job_id = %s AND due_at_ms = %s AND fence = %s AND NOT done RETURNING "
            + FIRE_COLUMNS,
            schema,
        )
        # The rows are locked in key order first (two overlapping batches wait in one order).
        self._record_many = _q(
            "WITH w AS (SELECT * FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::text[], "
            "%s::bool[], %s::text[], %s::text[]) AS w (job_id, due_at_ms, fence, status, done, "
            "run_id, outcome)), l AS (SELECT f.job_id, f.due_at_ms FROM {schema}.lemon_fires f "
            "JOIN w ON f.job_id = w.job_id AND f.due_at_ms = w.due_at_ms AND f.fence = w.fence "
            "WHERE NOT f.done ORDER BY f.job_id, f.due_at_ms FOR UPDATE OF f) "
            "UPDATE {schema}.lemon_fires AS f SET status = w.status, done = w.done, "
            "run_id = COALESCE(w.run_id, f.run_id), outcome = COALESCE(w.outcome, f.outcome), "
            "lease_until_ms = CASE WHEN w.done THEN 0 ELSE f.lease_until_ms END, "
            "updated_at_ms = "
            + _NOW_MS
            + " FROM w, l WHERE f.job_id = w.job_id AND f.due_at_ms = w.due_at_ms "
            "AND l.job_id = w.job_id AND l.due_at_ms = w.due_at_ms "
            "AND f.fence = w.fence AND NOT f.done RETURNING f.job_id, f.due_at_ms, f.owner, "
            "f.fence, f.lease_until_ms, f.status, f.run_id, f.outcome, f.claimed_at_ms, "
            "f.updated_at_ms",
            schema,
        )
        self._take_over = _q(
            "UPDATE {schema}.lemon_fires AS f SET owner = %s, fence = f.fence + 1, "
            "lease_until_ms = "
            + _NOW_MS
            + " + %s, updated_at_ms = "
            + _NOW_MS
            + " FROM (SELECT job_id, due_at_ms FROM {schema}.lemon_fires WHERE NOT done AND "
            "lease_until_ms <= "
            + _NOW_MS
            + " ORDER BY lease_until_ms, job_id, due_at_ms LIMIT %s FOR UPDATE SKIP LOCKED) AS e "
            "WHERE f.job_id = e.job_id AND f.due_at_ms = e.due_at_ms AND NOT f.done "
            "AND f.lease_until_ms <= "
            + _NOW_MS
            + " RETURNING f.job_id, f.due_at_ms, f.owner, f.fence, f.lease_until_ms, f.status, "
            "f.run_id, f.outcome, f.claimed_at_ms, f.updated_at_ms",
            schema,
        )
        self._get = _q(
            "SELECT "
            + FIRE_COLUMNS
            + " FROM {schema}.lemon_fires WHERE job_id = %s AND due_at_ms = %s",
            schema,
        )
        self._fires = _q(
            "SELECT "
            + FIRE_COLUMNS
            + " FROM {schema}.lemon_fires WHERE job_id = %s ORDER BY due_at_ms DESC LIMIT %s",
            schema,
        )

        self._prune = _q(
            "DELETE FROM {schema}.lemon_fires WHERE job_id = %s AND done AND due_at_ms IN "
            "(SELECT due_at_ms FROM {schema}.lemon_fires WHERE job_id = %s AND done AND "
            "due_at_ms < (SELECT due_at_ms FROM {schema}.lemon_fires WHERE job_id = %s "
            "ORDER BY due_at_ms DESC LIMIT 1 OFFSET %s) ORDER BY due_at_ms LIMIT %s) "
            "RETURNING due_at_ms",
            schema,
        )

    async def _rows(self, query: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        async def op(conn: psycopg.AsyncConnection[Any]) -> list[tuple[Any, ...]]:
            cur = await conn.execute(query, params)
            return list(await cur.fetchall())

        return await self._store.run(op)

    async def _one(self, query: str, params: tuple[Any, ...]) -> Fire | None:
        rows = await self._rows(query, params)
        return fire_of(rows[0]) if rows else None

    async def claim(self, job_id: str, due_at_ms: int, owner: str, *, lease_ms: int) -> Fire | None:
        check_fire_key(job_id, due_at_ms)
        _check_pg_text(owner, "fire owner")
        return await self._one(self._claim, (job_id, due_at_ms, owner, check_lease_ms(lease_ms)))

    async def claim_many(
        self, keys: Sequence[tuple[str, int]], owner: str, *, lease_ms: int
    ) -> list[Fire | None]:
        checked = check_fire_keys(keys)
        _check_pg_text(owner, "fire owner")
        params = (
            owner,
            check_lease_ms(lease_ms),
            [k[0] for k in checked],
            [k[1] for k in checked],
        )
        if not checked:
            return []

        won = {
            (f.job_id, f.due_at_ms): f
            for f in map(fire_of, await self._store.run(self._retrying(self._claim_many, params)))
        }
        return [won.get(key) for key in checked]

    async def renew(self, fire: Fire, *, lease_ms: int) -> Fire | None:
        params = (check_lease_ms(lease_ms), fire.job_id, fire.due_at_ms, fire.fence)
        return await self._one(self._renew, params)

    async def record(
        self,
        fire: Fire,
        *,
        status: str,
        run_id: str | None = None,
        outcome: str | None = None,
    ) -> Fire | None:
        done = check_status(status) in TERMINAL_STATUSES
        params = (status, done, run_id, outcome, done, fire.job_id, fire.due_at_ms, fire.fence)
        return await self._one(self._record, params)

    async def record_many(self, writes: Sequence[FireWrite]) -> list[Fire | None]:
        checked = check_writes(writes)
        for write in checked:
            for text in (write.run_id, write.outcome):
                if text is not None:
                    _check_pg_text(text, "fire record")
        if not checked:
            return []
        params = (
            [w.fire.job_id for w in checked],
            [w.fire.due_at_ms for w in checked],
            [w.fire.fence for w in checked],
            [w.status for w in checked],
            [w.status in TERMINAL_STATUSES for w in checked],
            [w.run_id for w in checked],
            [w.outcome for w in checked],
        )
        rows = await self._store.run(self._retrying(self._record_many, params))
        written = {(f.job_id, f.due_at_ms): f for f in map(fire_of, rows)}
        return [written.get((w.fire.job_id, w.fire.due_at_ms)) for w in checked]

    def _retrying(
        self, query: str, params: tuple[Any, ...]
    ) -> Callable[[psycopg.AsyncConnection[Any]], Awaitable[list[tuple[Any, ...]]]]:
        """A batch statement, run again when PostgreSQL ended it as a deadlock victim. Key
        order makes that unexpected; the statement (autocommit) was rolled back whole, so
        running it again writes nothing twice."""

        async def op(conn: psycopg.AsyncConnection[Any]) -> list[tuple[Any, ...]]:
            for attempt in range(_DEADLOCK_RETRIES):
                try:
                    cur = await conn.execute(query, params)
                    return list(await cur.fetchall())
                except psycopg.errors.DeadlockDetected:
                    if attempt == _DEADLOCK_RETRIES - 1:
                        raise
            raise AssertionError("unreachable")

        return op

    async def take_over_expired(self, owner: str, *, lease_ms: int, limit: int = 100) -> list[Fire]:
        _check_pg_text(owner, "fire owner")
        rows = await self._rows(self._take_over, (owner, check_lease_ms(lease_ms), max(0, limit)))
        return sorted(
            (fire_of(r) for r in rows), key=lambda f: (f.lease_until_ms, f.job_id, f.due_at_ms)
        )

    async def get(self, job_id: str, due_at_ms: int) -> Fire | None:
        return await self._one(self._get, check_fire_key(job_id, due_at_ms))

    async def prune(self, job_id: str, *, keep: int, limit: int = 100) -> list[int]:
        keep, limit = check_prune(keep, limit)
        rows = await self._rows(self._prune, (job_id, job_id, job_id, keep - 1, limit))
        return sorted(int(r[0]) for r in rows)

    async def fires(self, job_id: str, *, limit: int = 100) -> list[Fire]:
        return [fire_of(r) for r in await self._rows(self._fires, (job_id, max(0, limit)))]
