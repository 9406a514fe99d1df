"""ExecApprovals with a grant store: agent/global grants survive a restart, session grants do
not, a grant is durable before it is acknowledged, store failures approve but are reported,
and grants can be listed and revoked."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lemon_core.approvals import ApprovalGrantStore, ExecApprovals, action_hash
from lemon_core.bus import EXEC_APPROVALS, Bus, Delivery, Subscription
from lemon_core.events import (
    ApprovalDecision,
    ApprovalPending,
    ApprovalRequested,
    ApprovalResolved,
    Event,
)
from lemon_core.store import Store, StoreClosedError
from lemon_infra import MemoryStore, SQLiteStore

LS: dict[str, Any] = {"argv": ["ls", "-la"]}
RM: dict[str, Any] = {"argv": ["rm", "-rf", "build"]}
PWD: dict[str, Any] = {"argv": ["pwd"]}


def _events(sub: Subscription) -> list[Event]:
    out: list[Event] = []
    while True:
        try:
            out.append(sub.delivery.get_nowait())
        except asyncio.QueueEmpty:
            return out


async def _asked(sub: Subscription) -> ApprovalRequested:
    while True:
        event = await asyncio.wait_for(sub.get(), 10)
        if isinstance(event.payload, ApprovalRequested):
            return event.payload


def _request(approvals: ExecApprovals, **kw: Any) -> asyncio.Task[Any]:
    args: dict[str, Any] = {
        "tool": "bash",
        "action": LS,
        "run_id": "r1",
        "session_key": "agent:a:main",
        "agent_id": "a",
    }
    args.update(kw)
    return asyncio.ensure_future(approvals.request(**args))


async def _grant(approvals: ExecApprovals, sub: Subscription, decision: str, **kw: Any) -> Any:
    task = _request(approvals, **kw)
    approvals.resolve((await _asked(sub)).approval_id, decision)
    return await task


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / "lemon.sqlite3"


@pytest.fixture
async def bus() -> AsyncIterator[Bus]:
    bus = Bus()
    yield bus
    bus.close()


@pytest.fixture
def sub(bus: Bus) -> Subscription:
    return bus.subscribe(EXEC_APPROVALS, delivery=Delivery(bind_current_task=False))


async def _open(db: Path, bus: Bus) -> tuple[SQLiteStore, ExecApprovals]:
    store = await SQLiteStore.open(db)
    approvals = ExecApprovals(bus, grant_store=ApprovalGrantStore(store))
    await approvals.load_grants()
    return store, approvals


async def test_always_and_agent_grants_survive_a_restart_session_grants_do_not(
    db: Path, bus: Bus, sub: Subscription
) -> None:
    store, approvals = await _open(db, bus)
    outcome = await _grant(approvals, sub, "approve_global")
    assert outcome.approved
    assert outcome.persisted is True
    assert (await _grant(approvals, sub, "approve_agent", action=RM)).persisted is True
    session = await _grant(approvals, sub, "approve_session", action={"argv": ["make"]})
    assert session.persisted is None
    assert approvals.statistics().grants_persisted == 2
    await approvals.drain()
    await store.close()

    # A new process: a new ExecApprovals over the same SQLite file.
    store, restarted = await _open(db, bus)
    try:
        _events(sub)
        stats = restarted.statistics()
        assert stats.persistent
        assert stats.grants_loaded == 2
        same = await restarted.request(tool="bash", action={"argv": ["ls", "-la"]}, agent_id="z")
        assert same.approved
        assert same.from_grant == "global"
        assert same.approval_id is None
        # The agent grant covers agent "a" in any session, not another agent.
        assert restarted.granted("bash", RM, agent_id="a", session_key="agent:a:other") == "agent"
        assert restarted.granted("bash", RM, agent_id="b") is None
        # The session grant ended with the process.
        assert restarted.granted("bash", {"argv": ["make"]}, session_key="agent:a:main") is None
        assert _events(sub) == []
        # A different command (or the same command for another tool) still asks.
        other = _request(restarted, action={"argv": ["ls", "-l"]})
        asked = await _asked(sub)
        assert asked.pending.action == {"argv": ["ls", "-l"]}
        restarted.resolve(asked.approval_id, "deny")
        assert (await other).decision is ApprovalDecision.DENY
        assert restarted.granted("write", LS) is None
    finally:
        await store.close()


async def test_a_grant_is_durable_before_the_requester_or_the_bus_hears_of_it(
    bus: Bus, sub: Subscription
) -> None:
    class GatedStore(MemoryStore):
        """A real MemoryStore whose writes wait for a gate (a slow disk)."""

        def __init__(self) -> None:
            super().__init__()
            self.entered = asyncio.Event()
            self.gate = asyncio.Event()

        async def put(self, table: str, key: str, value: Any, *, ttl_ms: int | None = None) -> None:
            self.entered.set()
            await self.gate.wait()
            await super().put(table, key, value, ttl_ms=ttl_ms)

    store = GatedStore()
    grants = ApprovalGrantStore(store)
    approvals = ExecApprovals(bus, grant_store=grants)
    task = _request(approvals, deadline_s=0.05)
    asked = await _asked(sub)
    approvals.resolve(asked.approval_id, "approve_global")
    await store.entered.wait()
    # Decided (no longer pending) but not acknowledged until the write is done, even after
    # the requester's deadline has passed.
    assert approvals.pending() == ()
    assert approvals.statistics().grant_writes_in_flight == 1
    await asyncio.sleep(0.1)
    assert not task.done()
    assert _events(sub) == []
    assert await grants.load() == []
    store.gate.set()
    outcome = await task
    assert outcome.decision is ApprovalDecision.APPROVE_GLOBAL
    assert outcome.persisted is True
    (resolved,) = _events(sub)
    assert isinstance(resolved.payload, ApprovalResolved)
    assert resolved.payload.decision is ApprovalDecision.APPROVE_GLOBAL
    (persisted,) = await grants.load()
    assert persisted.key == action_hash("bash", LS)
    assert approvals.statistics().resolved == {"approve_global": 1}


async def test_a_failed_grant_write_still_approves_and_is_reported(
    db: Path, bus: Bus, sub: Subscription, caplog: pytest.LogCaptureFixture
) -> None:
    store, approvals = await _open(db, bus)
    await store.close()  # the disk goes away under the runtime
    with caplog.at_level(logging.WARNING, logger="lemon_core.approvals"):
        outcome = await _grant(approvals, sub, "approve_global")
    assert outcome.approved
    assert outcome.persisted is False
    stats = approvals.statistics()
    assert stats.grant_store_failures == 1
    assert stats.grant_store_last_error is not None
    assert "StoreClosedError" in stats.grant_store_last_error
    assert "approval grant store failed" in caplog.text
    # It is remembered for the rest of this process.
    again = await approvals.request(tool="bash", action=LS)
    assert again.from_grant == "global"

    # Loading from a broken store loads nothing, reports it, and requests still ask.
    broken: Store = await SQLiteStore.open(db)
    await broken.close()
    fresh = ExecApprovals(bus, grant_store=ApprovalGrantStore(broken))
    assert await fresh.load_grants() == 0
    assert fresh.statistics().grant_store_failures == 1
    task = _request(fresh)
    fresh.resolve((await _asked(sub)).approval_id, "approve_once")
    assert (await task).approved
    # Revoking needs the store: the failure is raised and the grant kept.
    with pytest.raises(StoreClosedError):
        await approvals.revoke_grant("global")
    assert approvals.granted("bash", LS) == "global"


async def test_grants_are_listed_and_revoked_durably(db: Path, bus: Bus, sub: Subscription) -> None:
    store, approvals = await _open(db, bus)
    try:
        await _grant(approvals, sub, "approve_global")
        await _grant(approvals, sub, "approve_global", action=RM)
        await _grant(approvals, sub, "approve_agent", agent_id="a", action=PWD)
        await _grant(approvals, sub, "approve_agent", agent_id="b", action=PWD)
        await _grant(approvals, sub, "approve_session", action={"argv": ["make"]})
        listed = approvals.grants()
        assert [(g.scope, g.owner) for g in listed] == [
            ("global", ""),
            ("global", ""),
            ("agent", "a"),
            ("agent", "b"),
            ("session", "agent:a:main"),
        ]
        assert listed[0].tool == "bash"
        assert listed[0].action_preview == '{"argv":["ls","-la"]}'
        assert [g.owner for g in approvals.grants("agent")] == ["a", "b"]
        # Persisted scopes are revoked durably, not with the memory-only revoke().
        with pytest.raises(ValueError, match="revoke_grant"):
            approvals.revoke("global")
        with pytest.raises(ValueError, match="unknown grant scope"):
            await approvals.revoke_grant("forever")  # type: ignore[arg-type]
        assert await approvals.revoke_grant("global", tool="bash", action=RM) == 1
        assert await approvals.revoke_grant("agent", owner="a", key=listed[2].key) == 1
        assert await approvals.revoke_grant("agent", owner="a") == 0
        assert approvals.revoke("session") == 1
        assert approvals.granted("bash", RM) is None
        assert approvals.granted("bash", LS) == "global"
        await approvals.drain()
    finally:
        await store.close()

    store, restarted = await _open(db, bus)
    try:
        assert [(g.scope, g.owner) for g in await restarted.list_grants()] == [
            ("global", ""),
            ("agent", "b"),
        ]
        assert restarted.granted("bash", RM) is None
        assert await restarted.revoke_grant("global") == 1
        assert await restarted.revoke_grant("agent") == 1
        assert restarted.grants() == ()
        assert await ApprovalGrantStore(store).load() == []
    finally:
        await store.close()


async def test_the_bound_forgets_the_oldest_grant_in_the_store_too(
    bus: Bus, sub: Subscription
) -> None:
    store = MemoryStore()
    grants = ApprovalGrantStore(store)
    approvals = ExecApprovals(bus, max_grants=2, grant_store=grants)
    for n in range(3):
        await _grant(approvals, sub, "approve_global", action={"n": n})
    await approvals.drain()
    stats = approvals.statistics()
    assert stats.grants == 2
    assert stats.grants_forgotten == 1
    assert [g.key for g in await grants.load()] == [
        action_hash("bash", {"n": 1}),
        action_hash("bash", {"n": 2}),
    ]
    # A restart with the bound loads the newest grants only.
    restarted = ExecApprovals(bus, max_grants=1, grant_store=ApprovalGrantStore(store))
    assert await restarted.load_grants() == 2
    assert [g.key for g in restarted.grants()] == [action_hash("bash", {"n": 2})]
    assert restarted.statistics().grants_forgotten == 1


async def test_the_first_request_loads_the_persisted_grants(bus: Bus) -> None:
    store = MemoryStore()
    first = ExecApprovals(bus, grant_store=ApprovalGrantStore(store))
    sub = bus.subscribe(EXEC_APPROVALS, delivery=Delivery(bind_current_task=False))
    await _grant(first, sub, "approve_agent")
    second = ExecApprovals(bus, grant_store=ApprovalGrantStore(store))
    assert second.granted("bash", LS, agent_id="a") is None  # not loaded yet
    outcome = await second.request(tool="bash", action=LS, agent_id="a")
    assert outcome.from_grant == "agent"
    assert second.statistics().grants_loaded == 1


_DECISIONS = st.sampled_from(["approve_session", "approve_agent", "approve_global", "deny"])


@given(
    st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["a", "b"]), _DECISIONS), max_size=25),
    st.integers(1, 6),
)
@settings(max_examples=60)
def test_a_restart_keeps_exactly_the_durable_grants_in_memory(
    steps: list[tuple[int, str, str]], max_grants: int
) -> None:
    async def scenario() -> None:
        bus = Bus()
        store = MemoryStore()
        approvals = ExecApprovals(bus, max_grants=max_grants, grant_store=ApprovalGrantStore(store))
        for n, agent, decision in steps:

            def decide(record: ApprovalPending, decision: str = decision) -> None:
                approvals.resolve(record.id, decision)

            await approvals.request(
                tool="bash",
                action={"n": n},
                agent_id=agent,
                session_key=f"agent:{agent}:main",
                on_requested=decide,
            )
        await approvals.drain()
        durable = [g for g in approvals.grants() if g.scope != "session"]
        restarted = ExecApprovals(bus, max_grants=max_grants, grant_store=ApprovalGrantStore(store))
        await restarted.load_grants()
        assert restarted.grants() == tuple(durable)
        assert approvals.statistics().grant_store_failures == 0
        bus.close()

    asyncio.run(scenario())
