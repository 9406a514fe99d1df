"""ExecApprovals: tool calls waiting for a human decision, and remembered scoped grants.

A requester (a gated tool) calls :meth:`ExecApprovals.request`. Remembered grants are checked
first, broadest scope first (global, then agent, then session), keyed by the tool and a hash of
the action (the canonical JSON of what the call would do). With no grant, a pending record is
kept, ``approval_requested`` is published on ``exec_approvals`` (and on the owner's own stream:
``run:<run_id>`` when the approval belongs to a run, so the session sees it in order with the
run's text, else ``session:<key>``) and the requester waits until:

* someone calls :meth:`ExecApprovals.resolve` with ``approve_once`` (not remembered),
  ``approve_session`` / ``approve_agent`` / ``approve_global`` (remembered at that scope) or
  ``deny``;
* the deadline passes (``timeout``);
* the requester is cancelled (``cancelled``);
* the run or session owning it ends, :meth:`ExecApprovals.expire_owner` (``expired``: grants
  nothing).

Every ending publishes ``approval_resolved`` exactly once. Bounds: at most ``max_pending``
approvals wait at once (a further request raises :class:`ApprovalCapacityError` and publishes
nothing); at most ``max_grants`` grants are remembered (the oldest grant is forgotten first).
Loop-only: use it from the event loop that runs the requesters.

Durable grants: with a ``grant_store`` (:class:`~lemon_core.store.ApprovalGrantStore`),
``agent`` and ``global`` grants outlive the process. They are loaded by :meth:`load_grants`
(or before the first request), and a new one is written to the store *before* the requester
gets its outcome and before ``approval_resolved`` is published. A failed write still approves
the call (and remembers the grant in memory) but is logged and counted
(``statistics().grant_store_failures``); it never raises into the requester. ``session``
grants stay in memory.

The grant store is the authority on ``agent`` / ``global`` grants: every request reads the two
grants that could cover it (global, then the agent's) from the store at decision time, so a
grant revoked by another process (``lemon approvals revoke``, another daemon sharing the store)
stops approving at once, and a grant made by another daemon sharing the store approves here
too. When that read fails the store's grants cover nothing (the request asks; the failure is
logged and counted): a revocation is never missed. Grants kept in memory only (``session``, and
one whose durable write failed) are checked in memory. The in-memory view (:meth:`grants`,
:meth:`granted`) is a cache of the store as last read; :meth:`list_grants` reads the store
afresh.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from lemon_core.bus import EXEC_APPROVALS, Bus, run_topic, session_topic
from lemon_core.errors import LemonCoreError, UsageError
from lemon_core.events import (
    ApprovalDecision,
    ApprovalPending,
    ApprovalRequested,
    ApprovalResolved,
)
from lemon_core.store import PERSISTED_GRANT_SCOPES, ApprovalGrant, ApprovalGrantStore
from lemon_core.store._grants import GrantScope, check_grant_scope
from lemon_core.tasks import Supervisor

__all__ = [
    "ApprovalCapacityError",
    "ApprovalError",
    "ApprovalGrant",
    "ApprovalGrantStore",
    "ApprovalOutcome",
    "ApprovalUsageError",
    "ApprovalsStatistics",
    "ExecApprovals",
    "GrantScope",
    "UnknownApprovalError",
    "action_hash",
]

_log = logging.getLogger("lemon_core.approvals")
#: How much of an action's canonical JSON a grant keeps for listings.
_PREVIEW_CHARS: Final = 256

#: Decisions a human (or an operator API) may give; the others are made by ExecApprovals.
_HUMAN: Final = frozenset(
    {
        ApprovalDecision.APPROVE_ONCE,
        ApprovalDecision.APPROVE_SESSION,
        ApprovalDecision.APPROVE_AGENT,
        ApprovalDecision.APPROVE_GLOBAL,
        ApprovalDecision.DENY,
    }
)
_SCOPE_OF: Final[Mapping[ApprovalDecision, GrantScope]] = {
    ApprovalDecision.APPROVE_SESSION: "session",
    ApprovalDecision.APPROVE_AGENT: "agent",
    ApprovalDecision.APPROVE_GLOBAL: "global",
}
_APPROVING: Final = frozenset({ApprovalDecision.APPROVE_ONCE, *_SCOPE_OF})

_encoder = msgspec.json.Encoder(order="sorted")


class ApprovalError(LemonCoreError):
    """Base class of ExecApprovals errors."""


class ApprovalCapacityError(ApprovalError):
    """Too many approvals are pending; nothing was requested."""


class ApprovalUsageError(ApprovalError, UsageError):
    """An argument ExecApprovals cannot take (the message says which)."""


class UnknownApprovalError(ApprovalError):
    """``resolve`` named an approval that is not pending (never was, or already ended)."""


def action_hash(tool: str, action: Mapping[str, Any] | None) -> str:
    """A stable hash of ``tool`` and the canonical JSON of ``action`` (sorted keys)."""
    body = _encoder.encode({"tool": tool, "action": dict(action or {})})
    return hashlib.sha256(body).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalOutcome:
    """How a request ended: the decision, and whether it came from a remembered grant.

    ``persisted`` is set for an ``approve_agent`` / ``approve_global`` decision when a grant
    store is attached: True when the grant was written durably, False when the write failed
    (the call is approved all the same). None otherwise."""

    decision: ApprovalDecision
    approval_id: str | None = None
    from_grant: GrantScope | None = None
    persisted: bool | None = None

    @property
    def approved(self) -> bool:
        return self.decision in _APPROVING


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalsStatistics:
    pending: int
    max_pending: int
    grants: int
    max_grants: int
    requested: int
    granted_from_memory: int
    resolved: Mapping[str, int]
    refused_over_capacity: int
    grants_forgotten: int
    persistent: bool = False
    grants_loaded: int = 0
    grants_persisted: int = 0
    grant_store_failures: int = 0
    grant_store_last_error: str | None = None
    grant_writes_in_flight: int = 0
    grant_store_reads: int = 0
    """Grant reads at decision time (each request reads the global and the agent's grant)."""
    grant_store_read_failures: int = 0
    """Decision-time reads that failed (the request asked instead of trusting a cache)."""


@dataclass(slots=True)
class _Pending:
    record: ApprovalPending
    future: asyncio.Future[ApprovalDecision]
    grant_key: str
    persisted: bool | None = None


class ExecApprovals:
    """Pending approvals and scoped grants, announced on the ``exec_approvals`` topic."""

    def __init__(
        self,
        bus: Bus,
        *,
        max_pending: int = 1024,
        max_grants: int = 10_000,
        clock: Callable[[], float] = time.time,
        grant_store: ApprovalGrantStore | None = None,
    ) -> None:
        if max_pending < 1 or max_grants < 1:
            raise ApprovalUsageError("ExecApprovals: max_pending and max_grants must be >= 1")
        self._bus = bus
        self._max_pending = max_pending
        self._max_grants = max_grants
        self._clock = clock
        self._grant_store = grant_store
        self._pending: dict[str, _Pending] = {}
        self._grants: OrderedDict[tuple[str, str, str], ApprovalGrant] = OrderedDict()
        self._requested = 0
        self._from_memory = 0
        self._over_capacity = 0
        self._forgotten = 0
        self._resolved: dict[str, int] = {}
        # Durable grants: one write at a time, in the order decisions were made.
        self._write_lock = asyncio.Lock()
        self._load_lock = asyncio.Lock()
        self._loaded = grant_store is None
        # Grant writes in flight: owned by a supervisor (a failing write is logged and
        # counted there, never lost as an unretrieved task exception).
        self._writes = Supervisor("exec_approvals", logger=_log)
        self._grants_loaded = 0
        self._grants_persisted = 0
        self._store_failures = 0
        self._store_last_error: str | None = None
        self._last_stamp_ms = 0
        # Persisted-scope grants whose durable write failed: remembered in memory only.
        self._memory_only: set[tuple[str, str, str]] = set()
        self._store_reads = 0
        self._read_failures = 0

    # -- durable grants -------------------------------------------------------------------

    async def load_grants(self) -> int:
        """Load the persisted ``agent`` / ``global`` grants; return how many were loaded.

        Without a grant store this does nothing. A store failure is logged and counted
        (``statistics().grant_store_failures``) and loads nothing; it never raises. Loaded grants
        count as older than the grants already in memory (``max_grants`` still applies).
        """
        return await self._load(force=True)

    async def _load(self, *, force: bool) -> int:
        if self._grant_store is None:
            return 0
        async with self._load_lock:
            if self._loaded and not force:
                return 0
            self._loaded = True
            try:
                loaded = await self._grant_store.load()
            except Exception as exc:
                self._store_failed("loading the persisted grants", exc)
                return 0
            merged: OrderedDict[tuple[str, str, str], ApprovalGrant] = OrderedDict()
            for grant in loaded:
                if grant.identity not in self._grants:
                    merged[grant.identity] = grant
            count = len(merged)
            newest = max((g.granted_at_ms for g in loaded), default=0)
            self._last_stamp_ms = max(self._last_stamp_ms, newest)
            merged.update(self._grants)
            self._grants = merged
            while len(self._grants) > self._max_grants:
                self._grants.popitem(last=False)
                self._forgotten += 1
            self._grants_loaded += count
            return count

    async def drain(self) -> None:
        """Wait until every grant write started so far has finished (for shutdown)."""
        while len(self._writes):
            await asyncio.gather(*self._writes.tasks(), return_exceptions=True)

    def grants(
        self, scope: GrantScope | None = None, owner: str | None = None
    ) -> tuple[ApprovalGrant, ...]:
        """The remembered grants (of ``scope``, for ``owner``, or all), oldest first."""
        if scope is not None:
            check_grant_scope(scope)
        return tuple(
            g
            for g in self._grants.values()
            if (scope is None or g.scope == scope) and (owner is None or g.owner == owner)
        )

    async def list_grants(
        self, scope: GrantScope | None = None, owner: str | None = None
    ) -> tuple[ApprovalGrant, ...]:
        """The live grants (of ``scope``, for ``owner``, or all), oldest first: the grant
        store's ``agent`` / ``global`` grants read afresh (what another process revoked is gone,
        what another daemon granted is there), with the ones kept in memory only (``session``
        grants, a grant whose durable write failed). Without a grant store: :meth:`grants`.
        A store failure raises :class:`~lemon_core.store.StoreError`."""
        if self._grant_store is not None:
            await self._ensure_loaded()
            stored = await self._grant_store.load()
            async with self._write_lock:
                kept = [
                    g
                    for g in self._grants.values()
                    if g.scope not in PERSISTED_GRANT_SCOPES or g.identity in self._memory_only
                ]
                live = {g.identity: g for g in stored}
                for grant in kept:
                    live.setdefault(grant.identity, grant)
                ordered = sorted(live.values(), key=lambda g: g.granted_at_ms)
                self._grants = OrderedDict((g.identity, g) for g in ordered)
                while len(self._grants) > self._max_grants:
                    self._grants.popitem(last=False)
        return self.grants(scope, owner)

    async def revoke_grant(
        self,
        scope: GrantScope,
        *,
        owner: str | None = None,
        tool: str | None = None,
        action: Mapping[str, Any] | None = None,
        key: str | None = None,
    ) -> int:
        """Forget grants of ``scope``, in memory and (``agent`` / ``global``) in the grant store;
        return how many were forgotten.

        Narrow it with ``owner`` (the agent id, the session key; ``global`` grants have owner
        ``""``) and either ``key`` (an :attr:`ApprovalGrant.key` from :meth:`grants`) or ``tool``
        with ``action`` (the same call as was approved, keyed exactly as requests are). A grant
        is forgotten in memory only once its durable delete succeeded: a store failure raises
        :class:`~lemon_core.store.StoreError` and keeps the grants not yet deleted.
        """
        check_grant_scope(scope)
        if key is not None and tool is not None:
            raise ApprovalUsageError(
                "revoke_grant: give either key= or tool= (with action=), not both"
            )
        wanted = key if tool is None else action_hash(tool, action)
        await self._ensure_loaded()

        def matches(grant: ApprovalGrant) -> bool:
            return (
                grant.scope == scope
                and (owner is None or grant.owner == owner)
                and (wanted is None or grant.key == wanted)
            )

        async with self._write_lock:
            targets = {g.identity: g for g in self._grants.values() if matches(g)}
            store = self._grant_store
            if store is not None and scope in PERSISTED_GRANT_SCOPES:
                for grant in await store.load():
                    if matches(grant):
                        targets.setdefault(grant.identity, grant)
            for identity in targets:
                if store is not None and scope in PERSISTED_GRANT_SCOPES:
                    await store.delete(*identity)
                self._grants.pop(identity, None)
                self._memory_only.discard(identity)
        return len(targets)

    # -- requesting -----------------------------------------------------------------------

    def granted(
        self,
        tool: str,
        action: Mapping[str, Any] | None,
        *,
        session_key: str | None = None,
        agent_id: str | None = None,
    ) -> GrantScope | None:
        """The broadest grant in the in-memory view covering this call, if any (persisted
        grants count once loaded: :meth:`load_grants`). A cache: :meth:`request` decides from
        the grant store itself."""
        key = action_hash(tool, action)
        owners: tuple[tuple[GrantScope, str | None], ...] = (
            ("global", ""),
            ("agent", agent_id),
            ("session", session_key),
        )
        for scope, owner in owners:
            if owner is not None and (scope, owner, key) in self._grants:
                return scope
        return None

    async def request(
        self,
        *,
        tool: str,
        action: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        session_id: str | None = None,
        session_key: str | None = None,
        agent_id: str | None = None,
        tool_call_id: str | None = None,
        rationale: str | None = None,
        deadline_s: float | None = None,
        on_requested: Callable[[ApprovalPending], None] | None = None,
        use_grants: bool = True,
    ) -> ApprovalOutcome:
        """Wait for a decision on one call of ``tool`` doing ``action``.

        ``use_grants=False`` asks a person even when a remembered grant would cover the call
        (a run that read untrusted web content asks afresh; the decision still records its
        grant as usual).

        ``deadline_s`` (seconds, ``None``: no deadline) ends the wait with ``timeout``.
        Returns at once when a remembered grant covers it (nothing is published); the
        persisted grants are loaded first if they were not yet. Raises
        :class:`ApprovalCapacityError` when ``max_pending`` approvals already wait. Cancelling
        the caller resolves the approval as ``cancelled`` and re-raises. A decision that is
        being written to the grant store when the deadline passes still wins (the write is
        awaited).
        """
        await self._ensure_loaded()
        scope = (
            await self._granted_now(tool, action, session_key=session_key, agent_id=agent_id)
            if use_grants
            else None
        )
        if scope is not None:
            self._from_memory += 1
            return ApprovalOutcome(decision=_decision_of(scope), from_grant=scope)
        if len(self._pending) >= self._max_pending:
            self._over_capacity += 1
            raise ApprovalCapacityError(
                f"{len(self._pending)} approvals are already pending (max_pending="
                f"{self._max_pending}); resolve some or raise the bound"
            )
        now_ms = int(self._clock() * 1000)
        approval_id = f"appr_{uuid.uuid4().hex}"
        record = ApprovalPending(
            id=approval_id,
            run_id=run_id,
            session_id=session_id,
            session_key=session_key,
            agent_id=agent_id,
            tool=tool,
            tool_call_id=tool_call_id,
            action=None if action is None else dict(action),
            rationale=rationale,
            requested_at_ms=now_ms,
            expires_at_ms=None if deadline_s is None else now_ms + int(deadline_s * 1000),
        )
        future: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        entry = _Pending(record=record, future=future, grant_key=action_hash(tool, action))
        self._pending[approval_id] = entry
        self._requested += 1
        self._announce(
            "approval_requested", ApprovalRequested(approval_id=approval_id, pending=record)
        )
        if on_requested is not None:
            on_requested(record)
        try:
            decision = await asyncio.wait_for(asyncio.shield(future), deadline_s)
        except TimeoutError:
            self._finish(approval_id, ApprovalDecision.TIMEOUT)
            # Either TIMEOUT now, or a decision made just before whose grant is being written.
            decision = await asyncio.shield(future)
        except asyncio.CancelledError:
            self._finish(approval_id, ApprovalDecision.CANCELLED)
            raise
        return ApprovalOutcome(
            decision=decision, approval_id=approval_id, persisted=entry.persisted
        )

    # -- deciding -------------------------------------------------------------------------

    def resolve(self, approval_id: str, decision: ApprovalDecision | str) -> None:
        """Decide a pending approval (approve_once / approve_session / approve_agent /
        approve_global / deny). Raises :class:`UnknownApprovalError` when it is not pending and
        ``ValueError`` for any other decision.

        With a grant store, an ``approve_agent`` / ``approve_global`` decision is written
        durably before the requester sees it and before ``approval_resolved`` is published
        (the approval stops being pending at once)."""
        try:
            value = ApprovalDecision(decision)
        except ValueError:
            raise ApprovalUsageError(
                f"unknown approval decision {decision!r}; use one of {sorted(_HUMAN)}"
            ) from None
        if value not in _HUMAN:
            raise ApprovalUsageError(
                f"decision {value.value!r} is made by ExecApprovals itself; resolve with one "
                f"of {sorted(_HUMAN)}"
            )
        if approval_id not in self._pending:
            raise UnknownApprovalError(
                f"approval {approval_id!r} is not pending (unknown, or already resolved, timed "
                "out, cancelled or expired)"
            )
        self._finish(approval_id, value)

    def expire_owner(self, owner_id: str) -> int:
        """Expire every approval owned by run or session ``owner_id``; return how many."""
        ids = [
            a
            for a, p in self._pending.items()
            if owner_id in (p.record.run_id, p.record.session_id)
        ]
        for approval_id in ids:
            self._finish(approval_id, ApprovalDecision.EXPIRED)
        return len(ids)

    def revoke(self, scope: GrantScope, owner: str | None = None) -> int:
        """Forget the in-memory grants of ``scope`` (for ``owner``, or all); return how many.

        With a grant store, ``agent`` and ``global`` grants are durable: revoke them with
        ``await revoke_grant(...)`` (this raises ``ValueError`` for them)."""
        check_grant_scope(scope)
        if self._grant_store is not None and scope in PERSISTED_GRANT_SCOPES:
            raise ApprovalUsageError(
                f"{scope} grants are persisted in the grant store; revoke them with "
                "`await approvals.revoke_grant(...)`"
            )
        keys = [k for k in self._grants if k[0] == scope and (owner is None or k[1] == owner)]
        for key in keys:
            del self._grants[key]
        return len(keys)

    # -- views ----------------------------------------------------------------------------

    def pending(self) -> tuple[ApprovalPending, ...]:
        """The approvals waiting for a decision, oldest first."""
        return tuple(p.record for p in self._pending.values())

    def statistics(self) -> ApprovalsStatistics:
        return ApprovalsStatistics(
            pending=len(self._pending),
            max_pending=self._max_pending,
            grants=len(self._grants),
            max_grants=self._max_grants,
            requested=self._requested,
            granted_from_memory=self._from_memory,
            resolved=dict(self._resolved),
            refused_over_capacity=self._over_capacity,
            grants_forgotten=self._forgotten,
            persistent=self._grant_store is not None,
            grants_loaded=self._grants_loaded,
            grants_persisted=self._grants_persisted,
            grant_store_failures=self._store_failures,
            grant_store_last_error=self._store_last_error,
            grant_writes_in_flight=len(self._writes),
            grant_store_reads=self._store_reads,
            grant_store_read_failures=self._read_failures,
        )

    # -- internals ------------------------------------------------------------------------

    async def _granted_now(
        self,
        tool: str,
        action: Mapping[str, Any] | None,
        *,
        session_key: str | None,
        agent_id: str | None,
    ) -> GrantScope | None:
        """The broadest grant covering this call now: the persisted scopes read from the grant
        store (the authority; the cache follows what it finds), the memory-only grants from
        memory. A failed read lets no stored grant approve (the request asks)."""
        store = self._grant_store
        if store is None:
            return self.granted(tool, action, session_key=session_key, agent_id=agent_id)
        key = action_hash(tool, action)
        owners: tuple[tuple[GrantScope, str | None], ...] = (
            ("global", ""),
            ("agent", agent_id),
            ("session", session_key),
        )
        store_failed = False
        for scope, owner in owners:
            if owner is None:
                continue
            identity = (scope, owner, key)
            if scope not in PERSISTED_GRANT_SCOPES or identity in self._memory_only:
                if identity in self._grants:
                    return scope
                continue
            if store_failed:
                continue
            try:
                found = await store.get(scope, owner, key)
                self._store_reads += 1
            except Exception as exc:
                self._read_failures += 1
                self._store_last_error = f"reading the {scope} grant: {type(exc).__name__}: {exc}"
                _log.warning(
                    "approval grant store failed reading the %s grant for %s (%s: %s); the "
                    "stored grants cover nothing until it answers: asking",
                    scope, tool, type(exc).__name__, exc,
                )  # fmt: skip
                store_failed = True
                continue
            if found is None:
                self._grants.pop(identity, None)  # revoked elsewhere: the cache follows
                continue
            if identity not in self._grants and len(self._grants) < self._max_grants:
                self._grants[identity] = found  # granted elsewhere
            return scope
        return None

    async def _ensure_loaded(self) -> None:
        if not self._loaded:
            await self._load(force=False)

    def _finish(self, approval_id: str, decision: ApprovalDecision) -> None:
        entry = self._pending.pop(approval_id, None)
        if entry is None:
            return
        self._resolved[decision.value] = self._resolved.get(decision.value, 0) + 1
        scope = _SCOPE_OF.get(decision)
        grant = None if scope is None else self._grant_for(scope, entry)
        if grant is None:
            self._ack(entry, decision)
            return
        if self._grant_store is None or grant.scope not in PERSISTED_GRANT_SCOPES:
            self._forget_evicted(self._remember(grant))
            self._ack(entry, decision)
            return
        self._track(self._persist_then_ack(entry, decision, grant))

    def _ack(self, entry: _Pending, decision: ApprovalDecision) -> None:
        if not entry.future.done():
            entry.future.set_result(decision)
        self._announce(
            "approval_resolved",
            ApprovalResolved(approval_id=entry.record.id, decision=decision, pending=entry.record),
        )

    def _announce(self, type_: str, payload: ApprovalRequested | ApprovalResolved) -> None:
        """Publish on ``exec_approvals`` and on the owner's own stream: the run topic when the
        approval belongs to a run (so it reaches the session in order with the run's text),
        else the session topic."""
        event = self._bus.broadcast_event(EXEC_APPROVALS, type_, payload)
        record = payload.pending
        if record is None:
            return
        if record.run_id:
            self._bus.broadcast(run_topic(record.run_id), event)
        elif record.session_key:
            self._bus.broadcast(session_topic(record.session_key), event)

    def _grant_for(self, scope: GrantScope, entry: _Pending) -> ApprovalGrant | None:
        record = entry.record
        owner = {"global": "", "agent": record.agent_id, "session": record.session_key}[scope]
        if owner is None:
            return None
        preview = _encoder.encode(record.action or {}).decode()[:_PREVIEW_CHARS]
        return ApprovalGrant(
            scope=scope,
            owner=owner,
            tool=record.tool,
            key=entry.grant_key,
            granted_at_ms=self._stamp(),
            approval_id=record.id,
            action_preview=preview,
        )

    def _stamp(self) -> int:
        """Grant time in ms, strictly increasing (a load restores the grants' order from it)."""
        self._last_stamp_ms = max(int(self._clock() * 1000), self._last_stamp_ms + 1)
        return self._last_stamp_ms

    def _remember(self, grant: ApprovalGrant) -> list[ApprovalGrant]:
        """Keep ``grant`` in memory; return the grants the bound forgot."""
        self._grants[grant.identity] = grant
        self._grants.move_to_end(grant.identity)
        evicted: list[ApprovalGrant] = []
        while len(self._grants) > self._max_grants:
            gone = self._grants.popitem(last=False)[1]
            self._memory_only.discard(gone.identity)
            evicted.append(gone)
            self._forgotten += 1
        return evicted

    def _forget_evicted(self, evicted: list[ApprovalGrant]) -> None:
        durable = [g for g in evicted if g.scope in PERSISTED_GRANT_SCOPES]
        if durable and self._grant_store is not None:
            self._track(self._delete_evicted(durable))

    def _track(self, coro: Coroutine[Any, Any, None]) -> None:
        self._writes.spawn(coro, name="grant-write")

    async def _persist_then_ack(
        self, entry: _Pending, decision: ApprovalDecision, grant: ApprovalGrant
    ) -> None:
        assert self._grant_store is not None
        evicted: list[ApprovalGrant] = []
        persisted = False
        try:
            async with self._write_lock:
                try:
                    await self._grant_store.put(grant)
                    persisted = True
                    self._grants_persisted += 1
                    self._memory_only.discard(grant.identity)
                except Exception as exc:
                    self._store_failed(f"writing the {grant.scope} grant for {grant.tool}", exc)
                    self._memory_only.add(grant.identity)
                evicted = self._remember(grant)
        finally:
            entry.persisted = persisted
            self._ack(entry, decision)
        self._forget_evicted(evicted)

    async def _delete_evicted(self, grants: list[ApprovalGrant]) -> None:
        assert self._grant_store is not None
        async with self._write_lock:
            for grant in grants:
                if grant.identity in self._grants:
                    continue  # granted again meanwhile
                try:
                    await self._grant_store.delete(*grant.identity)
                except Exception as exc:
                    self._store_failed(f"deleting the forgotten {grant.scope} grant", exc)

    def _store_failed(self, what: str, exc: Exception) -> None:
        self._store_failures += 1
        self._store_last_error = f"{what}: {type(exc).__name__}: {exc}"
        _log.warning("approval grant store failed %s (%s: %s)", what, type(exc).__name__, exc)


def _decision_of(scope: GrantScope) -> ApprovalDecision:
    return {
        "session": ApprovalDecision.APPROVE_SESSION,
        "agent": ApprovalDecision.APPROVE_AGENT,
        "global": ApprovalDecision.APPROVE_GLOBAL,
    }[scope]
