"""What every idempotency backend decides the same way, whatever its SQL: how a selected row
becomes a record, what a new fence and a message binding hold, how a legacy raw row becomes a
hashed fence (and when its copy is confirmed), and how a migration pass is counted.

The backends keep their own statements and transactions and call these.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, NamedTuple

from lemon_core.errors import UsageError
from lemon_core.idempotency.records import (
    FenceState,
    IdempotencyRecord,
    MessageBinding,
    MigrationReport,
    StoredResponse,
    hash_idempotency_key,
)

__all__ = [
    "FENCE_COLUMNS",
    "LEGACY_COLUMNS",
    "LegacyFence",
    "LegacyRow",
    "binding_conflict",
    "binding_values",
    "check_limit",
    "fence_values",
    "legacy_copy_confirmed",
    "legacy_fence",
    "legacy_key_hash",
    "migrate_rows",
    "record_from_row",
]

#: The columns a fence is selected with (``f`` the fence, ``r`` its snapshot, left-joined), in
#: the order :func:`record_from_row` reads them.
FENCE_COLUMNS: Final = (
    "f.key_hash, f.integration, f.state, f.run_id, f.body_hash, f.session_key, f.created_at_ms, "
    "f.updated_at_ms, f.expires_at_ms, f.lease_until_ms, f.legacy, r.status, r.content_type, "
    "r.body"
)
#: The columns of a legacy raw row, in the order of :data:`LegacyRow`.
LEGACY_COLUMNS: Final = (
    "integration_id, idempotency_key, state, run_id, session_key, response_json, created_at_ms"
)
#: A legacy raw row: integration, raw key, state, run id, session key, response JSON, created.
LegacyRow = tuple[str, str, str, str | None, str | None, str | None, int]


def record_from_row(row: Sequence[Any]) -> IdempotencyRecord:
    """The record of a row selected with :data:`FENCE_COLUMNS`."""
    response = (
        None
        if row[11] is None
        else StoredResponse(status=int(row[11]), content_type=str(row[12]), body=bytes(row[13]))
    )
    state: FenceState = row[2]
    return IdempotencyRecord(
        key_hash=row[0],
        integration=row[1],
        state=state,
        run_id=row[3],
        body_hash=row[4],
        session_key=row[5],
        created_at_ms=int(row[6]),
        updated_at_ms=int(row[7]),
        expires_at_ms=int(row[8]),
        lease_until_ms=int(row[9]),
        legacy=bool(row[10]),
        response=response,
    )


def check_limit(limit: int) -> None:
    """Refuse a listing limit that is not a positive integer."""
    if isinstance(limit, bool) or limit < 1:
        raise UsageError(f"limit must be a positive integer, got {limit!r}")


def fence_values(
    *,
    key_hash: str,
    integration: str,
    run_id: str,
    body_hash: str,
    session_key: str,
    now_ms: int,
    ttl_ms: int,
    lease_ms: int,
) -> tuple[Any, ...]:
    """The values of a new pending fence: key hash, integration, run id, body hash, session
    key, created, updated, expires, lease (the order of the backends' insert)."""
    return (
        key_hash,
        integration,
        run_id,
        body_hash,
        session_key,
        now_ms,
        now_ms,
        now_ms + ttl_ms,
        now_ms + lease_ms,
    )


def binding_values(
    bind: MessageBinding, *, key_hash: str, run_id: str, session_key: str, now_ms: int
) -> tuple[Any, ...]:
    """The values of a message binding: a pending fence whose body fingerprint is the bound
    key's hash, living ``bind.ttl_ms``, with no lease."""
    return fence_values(
        key_hash=bind.key_hash,
        integration=bind.integration,
        run_id=run_id,
        body_hash=key_hash,
        session_key=session_key,
        now_ms=now_ms,
        ttl_ms=bind.ttl_ms,
        lease_ms=0,
    )


def binding_conflict(binding: IdempotencyRecord, key_hash: str) -> IdempotencyRecord | None:
    """``binding`` when it binds its message to another key than ``key_hash``, else None."""
    return binding if binding.body_hash != key_hash else None


class LegacyFence(NamedTuple):
    """What a legacy raw row becomes: the hashed fence's values (the order of the backends'
    legacy upsert: key hash, integration, state, run id, session key, created, updated,
    expires, lease) and the exact response body to store with it, if any."""

    values: tuple[Any, ...]
    response_body: bytes | None


def legacy_key_hash(raw: LegacyRow) -> str | None:
    """The hashed key of a raw row; None for an unusable (blank) raw key, which is left in
    place (it can never match a request)."""
    try:
        return hash_idempotency_key(raw[0], raw[1])
    except ValueError:
        return None


def legacy_fence(raw: LegacyRow, key_hash: str, *, now_ms: int, ttl_ms: int) -> LegacyFence:
    """The hashed fence of one raw row. Without a run id it is an ambiguous fence (pending,
    leased until it expires: no invented execution identity); a raw ``pending`` with a run id
    may have been submitted (``outcome_unknown``); submitted/completed are ``accepted`` and the
    snapshot, if any, is exact."""
    integration, _key, state, run_id, session_key, response_json, created = raw
    fence_state: FenceState
    if run_id is None:
        fence_state = "pending"
    elif state == "pending":
        fence_state = "outcome_unknown"
    else:
        fence_state = "accepted"
    expires = int(created) + ttl_ms
    lease = expires if run_id is None else int(created)
    values = (
        key_hash,
        integration,
        fence_state,
        run_id,
        session_key,
        int(created),
        now_ms,
        expires,
        lease,
    )
    body = None
    if response_json is not None and run_id is not None:
        body = response_json.encode("utf-8")
    return LegacyFence(values, body)


def legacy_copy_confirmed(raw: LegacyRow, copy: Sequence[Any] | None) -> bool:
    """Whether ``copy`` (the hashed fence's run id and snapshot body, or None when there is no
    fence) is the confirmed copy of ``raw``: same run id, and the exact response if one was
    stored."""
    run_id, response_json = raw[3], raw[5]
    if copy is None or copy[0] != run_id:
        return False
    if response_json is not None and run_id is not None:
        stored = None if copy[1] is None else bytes(copy[1])
        if stored != response_json.encode("utf-8"):
            return False
    return True


async def migrate_rows(
    rows: Sequence[LegacyRow],
    *,
    write: Callable[[LegacyRow], Awaitable[bool]],
    remove: Callable[[LegacyRow], Awaitable[bool]],
) -> MigrationReport:
    """One migration pass over ``rows``: for each, ``write`` the hashed fence and the exact
    response durably (its own transaction; True when it was written), then ``remove`` the raw
    row (its own transaction; True when it was unchanged, its copy confirmed, and deleted)."""
    written = deleted = 0
    for raw in rows:
        if await write(raw):
            written += 1
        if await remove(raw):
            deleted += 1
    return MigrationReport(
        seen=len(rows), written=written, deleted=deleted, kept=len(rows) - deleted
    )
