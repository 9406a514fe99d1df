"""Grants are live across processes sharing a grant store: each request decides from the store,
so a grant revoked elsewhere asks again, a grant made elsewhere approves, a failed read asks
(a revocation is never missed), and ``list_grants`` reads the store afresh."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from lemon_core.approvals import ApprovalGrantStore, ExecApprovals
from lemon_core.bus import Bus
from lemon_core.events import ApprovalPending
from lemon_infra import SQLiteStore

LS: dict[str, Any] = {"argv": ["ls"]}


@pytest.fixture
async def bus() -> AsyncIterator[Bus]:
    bus = Bus()
    yield bus
    bus.close()


async def ask(approvals: ExecApprovals, decision: str | None, **kw: Any) -> Any:
    """Request bash LS; answer ``decision`` if it asks (None: it must not ask)."""
    asked: list[ApprovalPending] = []

    def on_requested(record: ApprovalPending) -> None:
        asked.append(record)
        assert decision is not None, "it asked, but a grant should have covered it"
        approvals.resolve(record.id, decision)

    args: dict[str, Any] = {"tool": "bash", "action": LS, "agent_id": "a"}
    args.update(kw)
    outcome = await approvals.request(**args, on_requested=on_requested)
    return outcome, bool(asked)


async def test_a_grant_revoked_by_another_process_asks_again(tmp_path: Path, bus: Bus) -> None:
    db = tmp_path / "lemon.sqlite3"
    async with await SQLiteStore.open(db) as daemon_store, await SQLiteStore.open(db) as cli:
        daemon = ExecApprovals(bus, grant_store=ApprovalGrantStore(daemon_store))
        await daemon.load_grants()
        outcome, asked = await ask(daemon, "approve_global")
        assert asked
        assert outcome.persisted is True
        assert (await ask(daemon, None))[0].from_grant == "global"

        other = ExecApprovals(Bus(), grant_store=ApprovalGrantStore(cli))
        assert [g.scope for g in await other.list_grants()] == ["global"]
        assert await other.revoke_grant("global") == 1

        outcome, asked = await ask(daemon, "deny")
        assert asked
        assert not outcome.approved
        assert daemon.granted("bash", LS) is None  # the cache followed the store
        assert await daemon.list_grants() == ()
        assert daemon.statistics().grant_store_reads >= 3


async def test_an_agent_grant_made_by_another_daemon_approves_here(
    tmp_path: Path, bus: Bus
) -> None:
    db = tmp_path / "lemon.sqlite3"
    async with await SQLiteStore.open(db) as one, await SQLiteStore.open(db) as two:
        a = ExecApprovals(bus, grant_store=ApprovalGrantStore(one))
        b = ExecApprovals(Bus(), grant_store=ApprovalGrantStore(two))
        await b.load_grants()  # b loaded before the grant existed
        await ask(a, "approve_agent")
        outcome, asked = await ask(b, None)
        assert not asked
        assert outcome.from_grant == "agent"
        assert [(g.scope, g.owner) for g in await b.list_grants()] == [("agent", "a")]
        # Another agent is not covered.
        outcome, asked = await ask(b, "deny", agent_id="z")
        assert asked


async def test_a_failed_read_asks_and_is_reported(
    tmp_path: Path, bus: Bus, caplog: pytest.LogCaptureFixture
) -> None:
    store = await SQLiteStore.open(tmp_path / "lemon.sqlite3")
    approvals = ExecApprovals(bus, grant_store=ApprovalGrantStore(store))
    await ask(approvals, "approve_global")
    await approvals.drain()
    await store.close()  # the store goes away: its grants can no longer be checked
    with caplog.at_level(logging.WARNING, logger="lemon_core.approvals"):
        outcome, asked = await ask(approvals, "approve_once")
    assert asked
    assert outcome.approved
    stats = approvals.statistics()
    assert stats.grant_store_read_failures == 1
    assert stats.grant_store_last_error is not None
    assert "reading the global grant" in stats.grant_store_last_error
    assert "asking" in caplog.text


async def test_session_grants_stay_in_memory_and_are_listed_with_the_stored_ones(
    tmp_path: Path, bus: Bus
) -> None:
    async with await SQLiteStore.open(tmp_path / "lemon.sqlite3") as store:
        approvals = ExecApprovals(bus, grant_store=ApprovalGrantStore(store))
        await ask(approvals, "approve_session", session_key="agent:a:main")
        await ask(approvals, "approve_global", action={"argv": ["pwd"]})
        outcome, _asked = await ask(approvals, None, session_key="agent:a:main")
        assert outcome.from_grant == "session"
        listed = await approvals.list_grants()
        assert sorted(g.scope for g in listed) == ["global", "session"]
        assert await ApprovalGrantStore(store).get("session", "agent:a:main", listed[0].key) is None


async def test_concurrent_requests_each_read_the_store(tmp_path: Path, bus: Bus) -> None:
    async with await SQLiteStore.open(tmp_path / "lemon.sqlite3") as store:
        approvals = ExecApprovals(bus, grant_store=ApprovalGrantStore(store))
        await ask(approvals, "approve_global")
        outcomes = await asyncio.gather(*(ask(approvals, None) for _ in range(5)))
        assert all(o.from_grant == "global" and not asked for o, asked in outcomes)
