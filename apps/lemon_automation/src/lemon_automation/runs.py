"""Cron run records (a typed wrapper over the configured Store, table ``automation_runs``) and
the history a ``lemon cron history`` / ``cron.runs`` shows: the fire ledger is the authority
for which due times were claimed, by whom and how they ended; the run record adds what the
ledger does not hold (who triggered it, the answer's preview, whether a heartbeat answer was
suppressed, when it started and finished)."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from lemon_core.fire_ledger import Fire, FireLedger
from lemon_core.store import Store

__all__ = [
    "ABORTS_TABLE",
    "AUDIT_TABLE",
    "RETRIES_TABLE",
    "RUNS_TABLE",
    "CronRun",
    "CronRunStore",
    "PendingRetry",
    "history",
]

RUNS_TABLE: Final = "automation_runs"
RETRIES_TABLE: Final = "automation_retries"
AUDIT_TABLE: Final = "automation_audit"
#: Abort requests: ``cron_run_id`` -> who asked (the daemon following the fire serves them).
ABORTS_TABLE: Final = "automation_aborts"
_ABORT_TTL_MS: Final = 86_400_000
_PREVIEW: Final = 1000


class CronRun(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One fire's run, as ``cron.runs`` shows it (the issue's history shape)."""

    cron_run_id: str
    job_id: str
    due_at_ms: int
    status: str
    triggered_by: str = "schedule"
    router_run_id: str | None = None
    owner: str | None = None
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    suppressed: bool = False
    reason: str | None = None
    error: str | None = None
    output: str | None = None
    """The first 1,000 characters of the answer."""
    attempt: int = 0
    """0 for the first fire of a due time; n for its n-th retry."""
    retry_of: str | None = None
    """A retry: the ``cron_run_id`` of the fire it retries."""
    delivery: str | None = None
    """A job with a channel target: ``admitted`` (in the channel's outbox), ``duplicate`` (it
    was already), or ``failed: <reason>``; ``cron.runs`` shows ``delivered`` once the channel
    recorded a message id, ``unverified`` before (``delivery_message_ids``)."""
    delivery_message_ids: tuple[str, ...] = ()


class PendingRetry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A retry planned by the daemon that recorded the failed fire's end (the fenced terminal
    write: one daemon), run by whichever daemon claims its ledger fire first."""

    cron_run_id: str
    job_id: str
    due_at_ms: int
    """The retry's own fire key: the original due time plus ``attempt`` milliseconds."""
    attempt: int
    retry_of: str
    not_before_ms: int


def preview(text: str | None) -> str | None:
    return None if text is None else text[:_PREVIEW]


class CronRunStore:
    """Run records by ``cron_run_id`` in ``store``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def put(self, run: CronRun) -> None:
        await self._store.put(RUNS_TABLE, run.cron_run_id, msgspec.to_builtins(run))

    async def get(self, cron_run_id: str) -> CronRun | None:
        value = await self._store.get(RUNS_TABLE, cron_run_id)
        if value is None:
            return None
        try:
            return msgspec.convert(value, CronRun)
        except (msgspec.ValidationError, TypeError):
            return None

    async def delete(self, cron_run_id: str) -> bool:
        return await self._store.delete(RUNS_TABLE, cron_run_id)

    async def put_retry(self, retry: PendingRetry) -> None:
        await self._store.put(RETRIES_TABLE, retry.cron_run_id, msgspec.to_builtins(retry))

    async def get_retry(self, cron_run_id: str) -> PendingRetry | None:
        value = await self._store.get(RETRIES_TABLE, cron_run_id)
        try:
            return None if value is None else msgspec.convert(value, PendingRetry)
        except (msgspec.ValidationError, TypeError):
            return None

    async def retries(self, *, limit: int = 1000) -> list[PendingRetry]:
        out: list[PendingRetry] = []
        for _key, value in await self._store.scan(RETRIES_TABLE, limit=limit):
            try:
                out.append(msgspec.convert(value, PendingRetry))
            except (msgspec.ValidationError, TypeError):
                continue
        return out

    async def put_audit(self, audit: dict[str, Any]) -> None:
        """One ``cron_lifecycle_action`` entry, keyed by time (a scan reads them in order)."""
        await self._store.put(AUDIT_TABLE, f"{int(audit['ts_ms']):015d}:{audit['id']}", audit)

    async def audits(self, *, limit: int) -> list[dict[str, Any]]:
        """The newest ``limit`` audit entries, newest first."""
        rows = await self._store.scan(AUDIT_TABLE, limit=limit, reverse=True)
        return [value for _key, value in rows if isinstance(value, dict)]

    async def prune_audits(self, *, before_ms: int, limit: int) -> int:
        """Delete up to ``limit`` of the oldest audit entries stamped before ``before_ms``
        (one bounded scan from the oldest); how many were deleted."""
        rows = await self._store.scan(AUDIT_TABLE, limit=limit)
        deleted = 0
        for key, value in rows:
            ts = value.get("ts_ms") if isinstance(value, dict) else None
            if isinstance(ts, int) and ts >= before_ms:
                break  # keys sort by time: everything after is newer
            if await self._store.delete(AUDIT_TABLE, key):
                deleted += 1
        return deleted

    async def drop_retry(self, cron_run_id: str) -> None:
        await self._store.delete(RETRIES_TABLE, cron_run_id)

    async def request_abort(self, cron_run_id: str, *, job_id: str, by: str, at_ms: int) -> None:
        """Ask whichever daemon follows ``cron_run_id`` to abort it (kept a day)."""
        request = {"job_id": job_id, "by": by, "at_ms": at_ms}
        await self._store.put(ABORTS_TABLE, cron_run_id, request, ttl_ms=_ABORT_TTL_MS)

    async def abort_request(self, cron_run_id: str) -> dict[str, Any] | None:
        value = await self._store.get(ABORTS_TABLE, cron_run_id)
        return value if isinstance(value, dict) else None

    async def drop_abort(self, cron_run_id: str) -> None:
        await self._store.delete(ABORTS_TABLE, cron_run_id)


def _from_fire(fire: Fire, record: CronRun | None, cron_run_id: str) -> CronRun:
    status = fire.status
    reason = fire.outcome if status in ("skipped", "interrupted") else None
    error = fire.outcome if status in ("failed", "timeout", "unknown") else None
    if record is None:
        return CronRun(
            cron_run_id=cron_run_id,
            job_id=fire.job_id,
            due_at_ms=fire.due_at_ms,
            status=status,
            router_run_id=fire.run_id,
            owner=fire.owner,
            started_at_ms=fire.claimed_at_ms or None,
            finished_at_ms=fire.updated_at_ms if fire.done else None,
            reason=reason,
            error=error,
        )
    return msgspec.structs.replace(
        record,
        status=status,
        owner=fire.owner,
        router_run_id=fire.run_id or record.router_run_id,
        reason=record.reason or reason,
        error=record.error or error,
        finished_at_ms=record.finished_at_ms or (fire.updated_at_ms if fire.done else None),
    )


async def history(
    ledger: FireLedger,
    runs: CronRunStore,
    job_ids: list[str],
    *,
    limit: int,
    cron_run_id_of: Any,
) -> list[CronRun]:
    """The newest ``limit`` fires of ``job_ids``, newest due time first."""
    fires: list[Fire] = []
    for job_id in job_ids:
        fires.extend(await ledger.fires(job_id, limit=limit))
    fires.sort(key=lambda f: (f.due_at_ms, f.job_id), reverse=True)
    out: list[CronRun] = []
    for fire in fires[:limit]:
        cid = cron_run_id_of(fire.job_id, fire.due_at_ms)
        out.append(_from_fire(fire, await runs.get(cid), cid))
    return out
