"""Tool-call approvals for the terminal runtime.

Interim: lemon_core has no ``ExecApprovals`` yet (it is being built with the coding
executor), so this module is the minimal broker the terminal needs, speaking the contract's
events: ``approval_requested`` / ``approval_resolved`` on the ``exec_approvals`` topic. A
client (the chat terminal) listens for requests and answers through :meth:`resolve`.

Grants: ``approve_once`` runs this call; ``approve_session`` every later call of the tool in
the same session key; ``approve_global`` ("always") every later call of the tool, persisted
in the store (table ``approval_grants``); ``deny`` refuses. Pending requests are bounded
(``max_pending``, 64): past it a request is refused at once as ``deny``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass
from typing import Any, Final

from lemon_core.bus import EXEC_APPROVALS, Bus
from lemon_core.events import ApprovalDecision, ApprovalPending, ApprovalRequested, ApprovalResolved
from lemon_core.execution import Capability
from lemon_core.store import Store

__all__ = ["APPROVALS", "ApprovalBroker", "ApprovalStatistics"]

_GRANTS_TABLE: Final = "approval_grants"


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalStatistics:
    pending: int
    requested: int
    approved: int
    denied: int
    overflowed: int


class ApprovalBroker:
    """Asks for approvals on the bus and waits for a client's decision."""

    def __init__(
        self, *, bus: Bus, store: Store | None = None, max_pending: int = 64, timeout_s: float = 600
    ) -> None:
        self._bus = bus
        self._store = store
        self._max_pending = max_pending
        self._timeout_s = timeout_s
        self._pending: dict[str, tuple[ApprovalPending, asyncio.Future[ApprovalDecision]]] = {}
        self._session_grants: set[tuple[str, str]] = set()
        self._ids = itertools.count(1)
        self._requested = self._approved = self._denied = self._overflowed = 0

    def pending(self) -> tuple[ApprovalPending, ...]:
        """Requests waiting for a decision, oldest first."""
        return tuple(p for p, _ in self._pending.values())

    async def granted(self, *, tool: str, session_key: str | None) -> bool:
        """Whether an earlier session or global grant covers ``tool``."""
        if session_key is not None and (session_key, tool) in self._session_grants:
            return True
        if self._store is not None:
            return bool(await self._store.get(_GRANTS_TABLE, tool))
        return False

    async def request(
        self,
        *,
        tool: str,
        run_id: str | None,
        session_key: str | None,
        tool_call_id: str | None = None,
        action: dict[str, Any] | None = None,
    ) -> ApprovalDecision:
        """Publish ``approval_requested`` and wait for the decision (or the timeout)."""
        if await self.granted(tool=tool, session_key=session_key):
            return ApprovalDecision.APPROVE_SESSION
        self._requested += 1
        approval_id = f"approval-{next(self._ids)}"
        now = int(time.time() * 1000)
        pending = ApprovalPending.new(
            id=approval_id,
            run_id=run_id,
            session_key=session_key,
            tool=tool,
            tool_call_id=tool_call_id,
            action=action,
            requested_at_ms=now,
            expires_at_ms=now + int(self._timeout_s * 1000),
        )
        if len(self._pending) >= self._max_pending:
            self._overflowed += 1
            self._denied += 1
            self._publish_resolved(approval_id, ApprovalDecision.DENY, pending)
            return ApprovalDecision.DENY
        future: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        self._pending[approval_id] = (pending, future)
        self._bus.broadcast_event(
            EXEC_APPROVALS,
            "approval_requested",
            ApprovalRequested.new(approval_id=approval_id, pending=pending),
            {"run_id": run_id, "session_key": session_key},
        )
        try:
            decision = await asyncio.wait_for(asyncio.shield(future), self._timeout_s)
        except TimeoutError:
            decision = ApprovalDecision.TIMEOUT
            self._publish_resolved(approval_id, decision, pending)
        except asyncio.CancelledError:
            if not future.done():
                self._publish_resolved(approval_id, ApprovalDecision.CANCELLED, pending)
            raise
        finally:
            self._pending.pop(approval_id, None)
        return decision

    async def resolve(self, approval_id: str, decision: ApprovalDecision) -> bool:
        """Decide a pending request; False when it is unknown or already decided."""
        entry = self._pending.get(approval_id)
        if entry is None or entry[1].done():
            return False
        pending, future = entry
        if decision is ApprovalDecision.APPROVE_SESSION and pending.session_key is not None:
            self._session_grants.add((pending.session_key, pending.tool))
        global_grant = (ApprovalDecision.APPROVE_GLOBAL, ApprovalDecision.APPROVE_AGENT)
        if decision in global_grant and self._store is not None:
            await self._store.put(_GRANTS_TABLE, pending.tool, True)
        if _approves(decision):
            self._approved += 1
        else:
            self._denied += 1
        future.set_result(decision)
        self._publish_resolved(approval_id, decision, pending)
        return True

    def _publish_resolved(
        self, approval_id: str, decision: ApprovalDecision, pending: ApprovalPending
    ) -> None:
        if self._bus.running():
            self._bus.broadcast_event(
                EXEC_APPROVALS,
                "approval_resolved",
                ApprovalResolved.new(approval_id=approval_id, decision=decision, pending=pending),
                {"run_id": pending.run_id, "session_key": pending.session_key},
            )

    def statistics(self) -> ApprovalStatistics:
        return ApprovalStatistics(
            pending=len(self._pending),
            requested=self._requested,
            approved=self._approved,
            denied=self._denied,
            overflowed=self._overflowed,
        )


def _approves(decision: ApprovalDecision) -> bool:
    return decision in (
        ApprovalDecision.APPROVE_ONCE,
        ApprovalDecision.APPROVE_SESSION,
        ApprovalDecision.APPROVE_AGENT,
        ApprovalDecision.APPROVE_GLOBAL,
    )


def approves(decision: ApprovalDecision) -> bool:
    """Whether ``decision`` lets the call run."""
    return _approves(decision)


#: Where the terminal runtime registers its broker.
APPROVALS: Final[Capability[ApprovalBroker]] = Capability("ExecApprovals", ApprovalBroker)
