"""What an idempotency store holds and answers, and the port every backend implements.

A *fence* is the durable record that an idempotency key was reserved: the hashed key, the
integration, the body fingerprint, the run id fixed at reservation, a state and an expiry. The
*response snapshot* is the exact bytes answered when the submission was accepted. Fence and
snapshot are written together (:meth:`IdempotencyStore.complete`); expiry removes the snapshot
before the fence.

States of a fence:

* ``pending``: reserved, the submission may be in flight (until ``lease_until_ms``). A pending
  fence whose lease ran out, or that a restart found (:meth:`IdempotencyStore.recover`), is no
  longer in flight: its outcome is unknown.
* ``accepted``: the router accepted the submission; the snapshot holds the exact answer.
* ``outcome_unknown``: the submission may have executed (an exception, a timeout, a crash),
  or it was accepted and its run vanished (the process died with the run in flight:
  :meth:`IdempotencyStore.mark_vanished`).

A legacy fence (migrated from raw-key rows) may have no run id and no body fingerprint: it is an
ambiguous fence, never an invented execution identity.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final, Literal, Protocol, runtime_checkable

import msgspec

from lemon_core.idempotency.errors import InvalidIdempotencyKeyError

__all__ = [
    "MAX_IDEMPOTENCY_KEY_CHARS",
    "FenceState",
    "IdempotencyRecord",
    "IdempotencyStore",
    "MessageBinding",
    "MigrationReport",
    "Reservation",
    "StoredResponse",
    "SweepReport",
    "body_fingerprint",
    "check_idempotency_key",
    "hash_idempotency_key",
]

FenceState = Literal["pending", "accepted", "outcome_unknown"]

#: The longest idempotency key accepted (the IETF draft suggests short opaque tokens).
MAX_IDEMPOTENCY_KEY_CHARS: Final = 255
_DOMAIN: Final = b"lemon.idempotency.v1"


def check_idempotency_key(key: object) -> str:
    """``key`` if it is usable text; raise :class:`InvalidIdempotencyKeyError` for a missing,
    blank, non-text, overlong or control-character key (before anything hashes it)."""
    if not isinstance(key, str):
        raise InvalidIdempotencyKeyError(
            f"the idempotency key must be text, got {type(key).__name__}"
        )
    if not key.strip():
        raise InvalidIdempotencyKeyError("the idempotency key is missing or blank")
    if len(key) > MAX_IDEMPOTENCY_KEY_CHARS:
        raise InvalidIdempotencyKeyError(
            f"the idempotency key is longer than {MAX_IDEMPOTENCY_KEY_CHARS} characters"
        )
    if not key.isprintable():
        raise InvalidIdempotencyKeyError("the idempotency key holds control characters")
    return key


def hash_idempotency_key(integration: str, key: object) -> str:
    """The durable form of a caller's key: SHA-256 over a domain tag, the integration identity
    and the key (length-prefixed, so no two pairs collide by concatenation), hex.

    The raw key never reaches a durable record, a receipt or the router.
    """
    raw = check_idempotency_key(key).encode("utf-8")
    ident = integration.encode("utf-8")
    digest = hashlib.sha256()
    for part in (_DOMAIN, ident, raw):
        digest.update(len(part).to_bytes(4, "big"))
        digest.update(part)
    return digest.hexdigest()


def body_fingerprint(body: bytes) -> str:
    """The fingerprint of a request body (SHA-256, hex): same key + other body is a 422."""
    return hashlib.sha256(body).hexdigest()


class StoredResponse(msgspec.Struct, frozen=True, kw_only=True):
    """An exact HTTP answer: status, the headers that belong to it, and the body bytes."""

    status: int
    body: bytes
    content_type: str = "application/json"


class IdempotencyRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A fence with its snapshot (``response`` is ``None`` when no exact answer is stored)."""

    key_hash: str
    integration: str
    state: FenceState
    run_id: str | None
    body_hash: str | None
    session_key: str | None
    created_at_ms: int
    updated_at_ms: int
    expires_at_ms: int
    lease_until_ms: int
    legacy: bool = False
    response: StoredResponse | None = None

    def in_flight(self, now_ms: int) -> bool:
        """A pending fence whose lease is live (the first submission may still be running)."""
        return self.state == "pending" and now_ms < self.lease_until_ms

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible view (the response body as text when it is UTF-8)."""
        out: dict[str, Any] = {f: getattr(self, f) for f in self.__struct_fields__}
        if self.response is not None:
            out["response"] = {
                "status": self.response.status,
                "content_type": self.response.content_type,
                "body": self.response.body.decode("utf-8", "replace"),
            }
        return out


class MessageBinding(msgspec.Struct, frozen=True, kw_only=True):
    """Binds a signed message id to the key it first came with (see :meth:`IdempotencyStore.
    reserve`). Stored as a fence of ``integration`` keyed ``key_hash`` whose body fingerprint
    is the bound key's hash, living ``ttl_ms`` (as long as the message can verify)."""

    key_hash: str
    integration: str
    ttl_ms: int


class Reservation(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`IdempotencyStore.reserve` did: ``created`` a new fence (``record`` is it),
    or found an existing live one (``record`` is that one, with its snapshot).

    With a :class:`MessageBinding`: ``message_reused`` when the message is bound to another
    key (nothing was written; ``record`` is the binding), ``bound`` when this call made the
    binding (to release with the fence when nothing ran)."""

    created: bool
    record: IdempotencyRecord
    message_reused: bool = False
    bound: bool = False


class SweepReport(msgspec.Struct, frozen=True, kw_only=True):
    """One sweep: how many snapshots and fences it removed, and the watermark it recorded
    (every fence that expired at or before it is gone)."""

    responses_removed: int
    fences_removed: int
    watermark_ms: int


class MigrationReport(msgspec.Struct, frozen=True, kw_only=True):
    """One legacy migration pass: raw rows seen, hashed fences written, raw rows deleted, and
    raw rows left in place (changed meanwhile, or their copy could not be confirmed)."""

    seen: int
    written: int
    deleted: int
    kept: int


@runtime_checkable
class IdempotencyStore(Protocol):
    """The idempotency store port. SQLite implements it here; a PostgreSQL backend implements
    the same contract (``lemon_platform_test.IdempotencyStoreContract``).

    Every method either does all it says or nothing (one transaction), and raises
    :class:`~lemon_core.idempotency.IdempotencyStoreError` when the backend fails: callers fail
    closed on it.
    """

    async def reserve(
        self,
        *,
        key_hash: str,
        integration: str,
        body_hash: str,
        run_id: str,
        session_key: str,
        now_ms: int,
        ttl_ms: int,
        lease_ms: int,
        legacy_key: str | None = None,
        bind: MessageBinding | None = None,
    ) -> Reservation:
        """Atomically create a ``pending`` fence for ``key_hash`` unless a live one exists.

        An expired fence (and its snapshot) is replaced in the same transaction.
        ``legacy_key`` is the caller's raw key, only to find an unmigrated legacy raw row of
        ``integration`` (migrated in the same transaction; the raw key is never written).
        ``bind``, in the same transaction first: a live binding of the message to another key
        refuses (``message_reused``, nothing written); else the message is bound to
        ``key_hash`` (kept if it already is) and the reservation goes on.
        """
        ...

    async def lookup(self, key_hash: str, *, now_ms: int) -> IdempotencyRecord | None:
        """The live fence of ``key_hash`` with its snapshot, or ``None`` (absent or expired)."""
        ...

    async def complete(
        self, *, key_hash: str, run_id: str, response: StoredResponse, now_ms: int
    ) -> bool:
        """Mark the pending fence ``accepted`` and store its exact response, together. False
        when no pending fence with that run id exists, or its lease has run out at ``now_ms``
        (replays already answer ``outcome_unknown``; that answer stays): nothing changed."""
        ...

    async def mark_unknown(self, *, key_hash: str, run_id: str, now_ms: int) -> bool:
        """Mark the pending fence ``outcome_unknown``; False when there is none."""
        ...

    async def mark_vanished(self, *, run_id: str, integration: str, now_ms: int) -> int:
        """The run ``run_id`` of ``integration`` vanished (its process died with it in flight;
        it was completed as ``vanished``, never executed again): its ``accepted`` or
        ``pending`` fence becomes ``outcome_unknown`` (the exact response stays stored, but a
        replay now answers the uncertain receipt). Returns how many fences changed (0 when
        none, or already unknown)."""
        ...

    async def release(self, *, key_hash: str, run_id: str) -> bool:
        """Delete the pending fence (the submission was definitely refused, nothing ran), so
        the key is not burned; False when there is none."""
        ...

    async def recover(self, *, now_ms: int) -> int:
        """After a restart of the only writer: every ``pending`` fence with a run id becomes
        ``outcome_unknown`` (legacy fences without one stay ambiguous). Returns the count."""
        ...

    async def sweep(self, *, now_ms: int) -> SweepReport:
        """Remove expired snapshots, then their fences; record the watermark. On failure
        nothing is removed and the watermark stays where it was."""
        ...

    async def watermark(self) -> int:
        """The last sweep's watermark (0 before the first)."""
        ...

    async def records(
        self, *, limit: int = 100, integration: str | None = None
    ) -> list[IdempotencyRecord]:
        """The most recent fences (newest first), with their snapshots."""
        ...

    async def migrate_legacy(self, *, now_ms: int, ttl_ms: int) -> MigrationReport:
        """Move legacy raw-key rows to hashed fences (see the README for the order)."""
        ...

    async def schema_version(self) -> int: ...

    async def close(self) -> None:
        """Release the backend. Idempotent."""

    def statistics(self) -> dict[str, Any]: ...
