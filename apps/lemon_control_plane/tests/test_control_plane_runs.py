"""Runs over the wire: abort, approvals answered from another client (the first answer wins),
reconnect with snapshot recovery, and a shutdown with a run in flight."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed

from lemon_control_plane import ControlPlane
from lemon_control_plane.testing import ClientFactory as Client
from lemon_control_plane.testing import WireClient, plane_client
from lemon_runtime import Runtime

SESSION = "agent:default:main"
ASKS = '/tool bash {"command": "echo hi"}'


async def _asked(c: WireClient, prompt: str = ASKS) -> tuple[str, dict[str, Any]]:
    """Send a prompt whose bash call waits for an approval; return the run id and the ask."""
    sent = await c.call("chat.send", {"sessionKey": SESSION, "prompt": prompt})
    asked = await c.event("exec.approval.requested", runId=sent["runId"])
    return sent["runId"], asked["payload"]


async def test_chat_abort_ends_the_run_with_a_failed_completion(client: Client) -> None:
    async with client() as c:
        run_id, ask = await _asked(c)
        aborted = await c.call("chat.abort", {"runId": run_id, "sessionKey": SESSION})
        assert aborted["aborted"] is True
        done = await c.completed(run_id)
        ended = await c.event("exec.approval.resolved", approvalId=ask["approvalId"])
    assert done["payload"]["ok"] is False
    assert ended["payload"]["decision"] in ("expired", "cancelled")


async def test_chat_abort_by_session_and_of_nothing(client: Client) -> None:
    async with client() as c:
        run_id, _ = await _asked(c)
        aborted = await c.call("chat.abort", {"sessionKey": SESSION})
        assert aborted["cancelled"] >= 1
        assert (await c.completed(run_id))["payload"]["ok"] is False
        again = await c.call("chat.abort", {"sessionKey": SESSION})
        assert again["cancelled"] == 0


async def test_an_approval_asked_in_one_client_is_answered_in_another(client: Client) -> None:
    async with client() as asker, client() as other:
        run_id, ask = await _asked(asker)
        seen = await other.event("exec.approval.requested", approvalId=ask["approvalId"])
        assert seen["payload"]["runId"] == run_id
        pending = await other.call("exec.approvals.get")
        assert [p["approvalId"] for p in pending["pending"]] == [ask["approvalId"]]
        won = await other.request(
            "exec.approval.resolve", {"approvalId": ask["approvalId"], "decision": "approve_once"}
        )
        lost = await asker.request(
            "exec.approval.resolve", {"approvalId": ask["approvalId"], "decision": "deny"}
        )
        assert won["ok"] is True
        assert lost["ok"] is False
        assert lost["error"]["code"] == "CONFLICT"
        for c in (asker, other):
            resolved = await c.event("exec.approval.resolved", approvalId=ask["approvalId"])
            assert resolved["payload"]["decision"] == "approve_once"
            assert (await c.completed(run_id))["payload"]["ok"] is True
        assert (await other.call("exec.approvals.get"))["pending"] == []


async def test_a_reconnect_recovers_from_the_snapshot(client: Client) -> None:
    async with client() as first:
        run_id, ask = await _asked(first)
    async with client() as again:
        snapshot = await again.call("sessions.snapshot", {"sessionKey": SESSION})
        assert snapshot["active"]["runId"] == run_id
        assert [p["approvalId"] for p in snapshot["pendingApprovals"]] == [ask["approvalId"]]
        await again.call(
            "exec.approval.resolve", {"approvalId": ask["approvalId"], "decision": "approve_once"}
        )
        await again.completed(run_id)
    async with client() as third:
        snapshot = await third.call("sessions.snapshot", {"sessionKey": SESSION})
        assert snapshot["active"] is None
        assert snapshot["pendingApprovals"] == [], "an approval decided elsewhere does not return"
        history = await third.call("chat.history", {"sessionKey": SESSION})
        users = [m["content"] for m in history["messages"] if m["role"] == "user"]
        assert users == [ASKS], "no duplicated text"


async def test_a_shutdown_cancels_the_run_in_flight_and_tells_the_clients(
    boot: Callable[..., Runtime],
) -> None:
    runtime = boot()
    await runtime.start()
    stopped = False
    try:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        async with plane_client(plane)() as c:
            run_id, _ = await _asked(c)
            await runtime.stop()
            stopped = True
            done = await c.completed(run_id)
            shutdown = await c.event("shutdown")
            with pytest.raises(ConnectionClosed) as closed:
                await c.drain()
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.code == 1001
    finally:
        if not stopped:
            await runtime.stop()
    assert done["payload"]["ok"] is False
    assert c.frames.index(done) < c.frames.index(shutdown)


async def test_interrupt_seals_the_old_run_and_follows_the_new_one(client: Client) -> None:
    async with client() as c:
        first, _ = await _asked(c)
        sent = await c.request(
            "chat.send",
            {"sessionKey": SESSION, "prompt": "/echo instead", "queueMode": "interrupt"},
        )
        second = sent["payload"]["runId"]
        assert second != first
        old = await c.completed(first)
        new = await c.completed(second)
    assert old["payload"]["ok"] is False
    assert new["payload"]["ok"] is True
    assert new["payload"]["answer"] == "instead"
    assert c.frames.index(sent) < c.frames.index(new)


async def test_a_message_to_a_busy_session_is_queued_and_runs_after(client: Client) -> None:
    async with client() as c:
        first, ask = await _asked(c)
        queued = await c.call("chat.send", {"sessionKey": SESSION, "prompt": "/echo later"})
        assert queued["runId"] != first
        await c.call("exec.approval.resolve", {"approvalId": ask["approvalId"], "decision": "deny"})
        assert (await c.completed(first))["payload"]["ok"] is True
        later = await c.completed(queued["runId"])
        status = await c.call("status")
    assert later["payload"]["answer"] == "later"
    assert status["connections"]["operators"] == 1
    assert status["runs"]["submitted"] >= 2


async def test_a_steer_answers_with_the_run_that_carries_it(client: Client) -> None:
    async with client() as c:
        first, ask = await _asked(c)
        steered = await c.call(
            "chat.send", {"sessionKey": SESSION, "prompt": "/echo steered", "queueMode": "steer"}
        )
        await c.call(
            "exec.approval.resolve", {"approvalId": ask["approvalId"], "decision": "approve_once"}
        )
        # Whatever became of the steer (taken by the running answer, or queued behind it), the
        # id it answered with completes: the terminal client leaves `busy` on that id.
        done = await c.completed(steered["runId"])
    assert done["payload"]["runId"] == steered["runId"]
    assert steered["runId"] == first, "the running answer took the steer"


async def test_exec_approvals_get_lists_the_standing_grants_apart_from_the_pending(
    client: Client,
) -> None:
    # Lemon's /approvals prints approvals[] as the standing policy; its resync re-adds only the
    # entries with an approvalId: a grant is listed with its tool, hash and scope, never an id.
    async with client() as c:
        run_id, ask = await _asked(c)
        asking = await c.call("exec.approvals.get")
        assert [p["approvalId"] for p in asking["pending"]] == [ask["approvalId"]]
        assert asking["summary"] == {"pending": 1, "grants": 0}
        await c.call(
            "exec.approval.resolve",
            {"approvalId": ask["approvalId"], "decision": "approve_global"},
        )
        assert (await c.completed(run_id))["payload"]["ok"] is True
        listed = await c.call("exec.approvals.get")
    assert listed["pending"] == []
    assert listed["summary"] == {"pending": 0, "grants": 1}
    [grant] = listed["approvals"]
    assert grant["tool"] == "bash"
    assert grant["scope"] == "global"
    assert grant["approved"] is True
    assert isinstance(grant["actionHash"], str)
    assert grant["actionHash"]
    assert isinstance(grant["approvedAtMs"], int)
    assert not {"approvalId", "approval_id", "id"} & set(grant)
