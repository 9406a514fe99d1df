"""ExecApprovals: tool calls waiting for a human decision, and remembered scoped grants.

A requester (a gated tool) calls :meth:`ExecApprovals.request`. Remembered grants are checked
first, broadest scope first (global, then agent, then session), keyed by the tool and a hash of
the action (the canonical JSON of what the call would do). With no grant, a pending record is
kept, ``approval_requested`` is published on ``exec_approvals`` and the requester waits until:

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
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import msgspec

from lemon_core.bus import EXEC_APPROVALS, Bus
from lemon_core.errors import LemonCoreError
from lemon_core.events import (
    ApprovalDecision,
    ApprovalPending,
    ApprovalRequested,
    ApprovalResolved,
)

__all__ = [
    "ApprovalCapacityError",
    "ApprovalError",
    "ApprovalOutcome",
    "ApprovalsStatistics",
    "ExecApprovals",
    "GrantScope",
    "UnknownApprovalError",
    "action_hash",
]

GrantScope = Literal["session", "agent", "global"]

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


class UnknownApprovalError(ApprovalError):
    """``resolve`` named an approval that is not pending (never was, or already ended)."""


def action_hash(tool: str, action: Mapping[str, Any] | None) -> str:
    """A stable hash of ``tool`` and the canonical JSON of ``action`` (sorted keys)."""
    body = _encoder.encode({"tool": tool, "action": dict(action or {})})
    return hashlib.sha256(body).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalOutcome:
    """How a request ended: the decision, and whether it came from a remembered grant."""

    decision: ApprovalDecision
    approval_id: str | None = None
    from_grant: GrantScope | None = None

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


@dataclass(slots=True)
class _Pending:
    record: ApprovalPending
    future: asyncio.Future[ApprovalDecision]
    grant_key: str


class ExecApprovals:
    """Pending approvals and scoped grants, announced on the ``exec_approvals`` topic."""

    def __init__(
        self,
        bus: Bus,
        *,
        max_pending: int = 1024,
        max_grants: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if max_pending < 1 or max_grants < 1:
            raise ValueError("ExecApprovals: max_pending and max_grants must be >= 1")
        self._bus = bus
        self._max_pending = max_pending
        self._max_grants = max_grants
        self._clock = clock
        self._pending: dict[str, _Pending] = {}
        self._grants: OrderedDict[tuple[str, str, str], ApprovalDecision] = OrderedDict()
        self._requested = 0
        self._from_memory = 0
        self._over_capacity = 0
        self._forgotten = 0
        self._resolved: dict[str, int] = {}

    # -- requesting -----------------------------------------------------------------------

    def granted(
        self,
        tool: str,
        action: Mapping[str, Any] | None,
        *,
        session_key: str | None = None,
        agent_id: str | None = None,
    ) -> GrantScope | None:
        """The broadest remembered grant covering this call, if any."""
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
    ) -> ApprovalOutcome:
        """Wait for a decision on one call of ``tool`` doing ``action``.

        ``deadline_s`` (seconds, ``None``: no deadline) ends the wait with ``timeout``.
        Returns at once when a remembered grant covers it (nothing is published). Raises
        :class:`ApprovalCapacityError` when ``max_pending`` approvals already wait. Cancelling
        the caller resolves the approval as ``cancelled`` and re-raises.
        """
        scope = self.granted(tool, action, session_key=session_key, agent_id=agent_id)
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
        self._pending[approval_id] = _Pending(
            record=record, future=future, grant_key=action_hash(tool, action)
        )
        self._requested += 1
        self._bus.broadcast_event(
            EXEC_APPROVALS,
            "approval_requested",
            ApprovalRequested(approval_id=approval_id, pending=record),
        )
        if on_requested is not None:
            on_requested(record)
        try:
            decision = await asyncio.wait_for(asyncio.shield(future), deadline_s)
        except TimeoutError:
            self._finish(approval_id, ApprovalDecision.TIMEOUT)
            decision = future.result() if future.done() else ApprovalDecision.TIMEOUT
        except asyncio.CancelledError:
            self._finish(approval_id, ApprovalDecision.CANCELLED)
            raise
        return ApprovalOutcome(decision=decision, approval_id=approval_id)

    # -- deciding -------------------------------------------------------------------------

    def resolve(self, approval_id: str, decision: ApprovalDecision | str) -> None:
        """Decide a pending approval (approve_once / approve_session / approve_agent /
        approve_global / deny). Raises :class:`UnknownApprovalError` when it is not pending and
        ``ValueError`` for any other decision."""
        try:
            value = ApprovalDecision(decision)
        except ValueError:
            raise ValueError(
                f"unknown approval decision {decision!r}; use one of {sorted(_HUMAN)}"
            ) from None
        if value not in _HUMAN:
            raise ValueError(
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
        """Forget the grants of ``scope`` (for ``owner``, or all); return how many."""
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
        )

    # -- internals ------------------------------------------------------------------------

    def _finish(self, approval_id: str, decision: ApprovalDecision) -> None:
        entry = self._pending.pop(approval_id, None)
        if entry is None:
            return
        scope = _SCOPE_OF.get(decision)
        if scope is not None:
            self._remember(scope, entry.record, entry.grant_key)
        self._resolved[decision.value] = self._resolved.get(decision.value, 0) + 1
        if not entry.future.done():
            entry.future.set_result(decision)
        self._bus.broadcast_event(
            EXEC_APPROVALS,
            "approval_resolved",
            ApprovalResolved(approval_id=approval_id, decision=decision, pending=entry.record),
        )

    def _remember(self, scope: GrantScope, record: ApprovalPending, key: str) -> None:
        owner = {"global": "", "agent": record.agent_id, "session": record.session_key}[scope]
        if owner is None:
            return
        grant = (scope, owner, key)
        self._grants[grant] = _decision_of(scope)
        self._grants.move_to_end(grant)
        while len(self._grants) > self._max_grants:
            self._grants.popitem(last=False)
            self._forgotten += 1


def _decision_of(scope: GrantScope) -> ApprovalDecision:
    return {
        "session": ApprovalDecision.APPROVE_SESSION,
        "agent": ApprovalDecision.APPROVE_AGENT,
        "global": ApprovalDecision.APPROVE_GLOBAL,
    }[scope]
