"""ExecApprovals: decisions, grants by scope, bounds, expiry, events on exec_approvals."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lemon_core import ApprovalCapacityError, ExecApprovals, UnknownApprovalError
from lemon_core.approvals import action_hash
from lemon_core.bus import EXEC_APPROVALS, Bus, Delivery, Subscription
from lemon_core.events import ApprovalDecision, ApprovalRequested, ApprovalResolved, Event


def _events(sub: Subscription) -> list[Event]:
    out: list[Event] = []
    while True:
        try:
            out.append(sub.delivery.get_nowait())
        except asyncio.QueueEmpty:
            return out


async def _asked(sub: Subscription) -> ApprovalRequested:
    """The next approval_requested (resolutions published before it are skipped)."""
    while True:
        event = await asyncio.wait_for(sub.get(), 10)
        if isinstance(event.payload, ApprovalRequested):
            return event.payload


def _request(approvals: ExecApprovals, **kw: Any) -> asyncio.Task[Any]:
    args: dict[str, Any] = {
        "tool": "bash",
        "action": {"argv": ["ls"]},
        "run_id": "r1",
        "session_key": "agent:a:main",
        "agent_id": "a",
    }
    args.update(kw)
    return asyncio.ensure_future(approvals.request(**args))


@pytest.fixture
def bus() -> Bus:
    return Bus()


@pytest.fixture
def sub(bus: Bus) -> Subscription:
    return bus.subscribe(EXEC_APPROVALS, delivery=Delivery(bind_current_task=False))


@pytest.mark.parametrize(
    ("decision", "approved", "remembered"),
    [
        ("approve_once", True, None),
        ("approve_session", True, "session"),
        ("approve_agent", True, "agent"),
        ("approve_global", True, "global"),
        ("deny", False, None),
    ],
)
async def test_a_decision_ends_the_wait_and_is_remembered_at_its_scope(
    bus: Bus, sub: Subscription, decision: str, approved: bool, remembered: str | None
) -> None:
    approvals = ExecApprovals(bus, clock=lambda: 100.0)
    task = _request(approvals, deadline_s=30.0)
    asked = await _asked(sub)
    assert asked.pending.requested_at_ms == 100_000
    assert asked.pending.expires_at_ms == 130_000
    assert approvals.pending() == (asked.pending,)
    approvals.resolve(asked.approval_id, decision)
    outcome = await task
    assert outcome.approved is approved
    assert outcome.decision.value == decision
    (resolved,) = _events(sub)
    assert isinstance(resolved.payload, ApprovalResolved)
    assert resolved.payload.decision.value == decision
    assert resolved.payload.pending == asked.pending
    assert approvals.granted("bash", {"argv": ["ls"]}, session_key="agent:a:main",
                             agent_id="a") == remembered  # fmt: skip
    # Another session of the same agent is covered only by agent and global grants.
    other = approvals.granted("bash", {"argv": ["ls"]}, session_key="agent:a:other", agent_id="a")
    assert other == (remembered if remembered in ("agent", "global") else None)


async def test_a_grant_answers_at_once_without_events(bus: Bus, sub: Subscription) -> None:
    approvals = ExecApprovals(bus)
    task = _request(approvals)
    approvals.resolve((await _asked(sub)).approval_id, "approve_session")
    await task
    _events(sub)
    outcome = await approvals.request(
        tool="bash", action={"argv": ["ls"]}, session_key="agent:a:main", agent_id="a"
    )
    assert outcome.approved
    assert outcome.from_grant == "session"
    assert outcome.approval_id is None
    assert _events(sub) == []
    # A different action is not covered.
    task = _request(approvals, action={"argv": ["ls", "-la"]})
    await _asked(sub)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [e.payload.decision for e in _events(sub)] == [ApprovalDecision.CANCELLED]
    assert approvals.revoke("session") == 1
    assert approvals.statistics().grants == 0


async def test_timeout_cancel_and_expiry(bus: Bus, sub: Subscription) -> None:
    approvals = ExecApprovals(bus)
    outcome = await approvals.request(tool="write", action={"path": "/x"}, deadline_s=0.001)
    assert outcome.decision is ApprovalDecision.TIMEOUT
    assert not outcome.approved
    assert [e.type for e in _events(sub)] == ["approval_requested", "approval_resolved"]
    first = _request(approvals, run_id="r1")
    second = _request(approvals, run_id="r2")
    await _asked(sub)
    await _asked(sub)
    assert approvals.expire_owner("r1") == 1
    assert (await first).decision is ApprovalDecision.EXPIRED
    assert not second.done()
    assert approvals.expire_owner("r1") == 0
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    decisions = [e.payload.decision for e in _events(sub) if e.type == "approval_resolved"]
    assert decisions == [
        ApprovalDecision.EXPIRED,
        ApprovalDecision.CANCELLED,
    ]
    stats = approvals.statistics()
    assert stats.pending == 0
    assert stats.grants == 0
    assert stats.resolved == {"timeout": 1, "expired": 1, "cancelled": 1}


async def test_bad_resolutions_are_refused_clearly(bus: Bus, sub: Subscription) -> None:
    approvals = ExecApprovals(bus)
    with pytest.raises(UnknownApprovalError, match="not pending"):
        approvals.resolve("appr_nope", "approve_once")
    task = _request(approvals)
    asked = await _asked(sub)
    with pytest.raises(ValueError, match="made by ExecApprovals itself"):
        approvals.resolve(asked.approval_id, "expired")
    with pytest.raises(ValueError, match="unknown approval decision"):
        approvals.resolve(asked.approval_id, "yes please")
    approvals.resolve(asked.approval_id, "deny")
    with pytest.raises(UnknownApprovalError):
        approvals.resolve(asked.approval_id, "approve_once")
    assert (await task).decision is ApprovalDecision.DENY


async def test_pending_and_grants_are_bounded(bus: Bus, sub: Subscription) -> None:
    approvals = ExecApprovals(bus, max_pending=2, max_grants=2)
    tasks = [_request(approvals, action={"n": i}) for i in range(2)]
    for _ in tasks:
        await _asked(sub)
    with pytest.raises(ApprovalCapacityError, match="max_pending=2"):
        await approvals.request(tool="bash", action={"n": 9})
    assert approvals.statistics().refused_over_capacity == 1
    for pending in approvals.pending():
        approvals.resolve(pending.id, "approve_global")
    await asyncio.gather(*tasks)
    task = _request(approvals, action={"n": 3})
    approvals.resolve((await _asked(sub)).approval_id, "approve_global")
    await task
    stats = approvals.statistics()
    assert stats.grants == 2
    assert stats.grants_forgotten == 1
    assert approvals.granted("bash", {"n": 0}) is None  # the oldest grant was forgotten
    assert approvals.granted("bash", {"n": 3}) == "global"


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=5))
def test_action_hash_ignores_key_order(action: dict[str, Any]) -> None:
    reordered = dict(reversed(list(action.items())))
    assert action_hash("bash", action) == action_hash("bash", reordered)
    assert action_hash("bash", action) != action_hash("edit", action)
