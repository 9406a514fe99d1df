"""The reference's conversation (§3-§6) replayed with a real WebSocket client against the real
daemon profile: handshake, chat.send, streamed deltas, a tool card, an approval, the
completion, and the reads that follow (history, sessions, snapshot)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lemon_control_plane.testing import ClientFactory as Client
from lemon_control_plane.testing import plane_client

SESSION = "tui-harness"


async def test_hello_ok_advertises_the_methods_and_the_liveness_policy(client: Client) -> None:
    async with client(handshake=False) as c:
        hello = await c.connect()
    assert hello["type"] == "hello-ok"
    assert hello["protocol"] == 1
    assert set(hello["server"]) == {"version", "commit", "host", "connId"}
    methods = hello["features"]["methods"]
    assert methods == sorted(methods)
    for name in (
        "chat.send",
        "chat.abort",
        "chat.history",
        "sessions.list",
        "sessions.snapshot",
        "exec.approval.resolve",
        "health",
    ):
        assert name in methods
    assert "agent" in hello["features"]["events"]
    assert hello["policy"]["tickIntervalMs"] == 1000
    assert hello["auth"] == {
        "role": "operator",
        "scopes": ["admin", "approvals", "pairing", "read", "write"],
        "clientId": "lemon-tui@local-1",
    }


async def test_health_without_params_answers_ok(client: Client) -> None:
    async with client() as c:
        res = await c.request("health")
    assert res["ok"] is True
    assert res["payload"]["ok"] is True


async def test_a_run_with_a_tool_and_an_approval_streams_in_the_reference_order(
    client: Client, work: Path
) -> None:
    (work / "a.txt").write_text("1")
    prompt = '/tool bash {"command": "ls"}'
    async with client() as c:
        detail = await c.call("session.detail", {"sessionKey": SESSION})
        assert detail["session"]["engine"] == "lemon"
        sent = await c.request("chat.send", {"sessionKey": SESSION, "prompt": prompt})
        assert sent["ok"], sent
        run_id = sent["payload"]["runId"]
        assert sent["payload"]["sessionKey"] == SESSION

        asked = await c.event("exec.approval.requested", runId=run_id)
        approval = asked["payload"]
        assert approval["tool"] == "bash"
        assert approval["sessionKey"] == SESSION
        resolve = await c.call(
            "exec.approval.resolve",
            {"approvalId": approval["approvalId"], "decision": "approve_once"},
        )
        assert resolve == {
            "resolved": True,
            "approvalId": approval["approvalId"],
            "decision": "approve_once",
        }
        resolved = await c.event("exec.approval.resolved", approvalId=approval["approvalId"])
        assert resolved["payload"]["decision"] == "approve_once"
        assert resolved["payload"]["tool"] == "bash"
        done = await c.completed(run_id)

    frames = c.frames
    index = {id(f): i for i, f in enumerate(frames)}
    # res(chat.send) comes before anything of the run that follows it, completed included.
    assert index[id(sent)] < index[id(done)]
    run_events = [
        f
        for f in c.events()
        if f["payload"].get("runId") == run_id and f["event"] in ("agent", "chat")
    ]
    kinds = [f["payload"]["type"] for f in run_events]
    assert kinds[0] == "started"
    assert kinds[-1] == "completed"
    seqs = [f["payload"]["seq"] for f in run_events if f["event"] == "chat"]
    assert seqs
    assert seqs == sorted(set(seqs)), "delta seqs strictly increase"
    tools = [f["payload"] for f in run_events if f["payload"]["type"] == "tool_use"]
    assert {t["action"]["id"] for t in tools} == {tools[0]["action"]["id"]}
    assert tools[0]["phase"] == "started"
    assert tools[-1]["phase"] == "completed"
    assert tools[0]["action"]["detail"]["name"] == "bash"
    assert tools[0]["action"]["detail"]["args"] == {"command": "ls"}
    assert tools[-1]["ok"] is True
    assert "a.txt" in (tools[-1]["action"]["detail"]["result"] or "")
    # Every event frame carries the connection's seq, 1, 2, 3, ...
    event_seqs = [f["seq"] for f in c.events()]
    assert event_seqs == list(range(1, len(event_seqs) + 1))
    final = done["payload"]
    assert final["ok"] is True
    text = "".join(f["payload"]["text"] for f in run_events if f["event"] == "chat")
    # The terminal client's text is its delta buffer; the answer is the run's final message.
    assert text.endswith(final["answer"])
    assert "a.txt" in final["answer"]


async def test_history_sessions_and_snapshot_after_a_run(client: Client) -> None:
    async with client() as c:
        sent = await c.call("chat.send", {"sessionKey": SESSION, "prompt": "/echo exactly this"})
        done = await c.completed(sent["runId"])
        assert done["payload"]["answer"] == "exactly this"
        history = await c.call("chat.history", {"sessionKey": SESSION, "limit": 100})
        # The port publishes a run's end before the session index records it (the gateway
        # writes the index after publishing), so the list catches up a moment later.
        listed = await _eventually(
            lambda: c.call("sessions.list", {"limit": 100}), lambda p: bool(p["sessions"])
        )
        snapshot = await c.call("sessions.snapshot", {"sessionKey": SESSION})
    roles = [(m["role"], m["content"]) for m in history["messages"]]
    assert roles[:2] == [("user", "/echo exactly this"), ("assistant", "exactly this")]
    assert [s["sessionKey"] for s in listed["sessions"]] == [SESSION]
    assert listed["sessions"][0]["runCount"] == 1
    assert snapshot["sessionKey"] == SESSION
    assert snapshot["status"] == "ok"
    assert snapshot["active"] is None
    assert snapshot["lastRunId"] == sent["runId"]
    assert snapshot["lastOk"] is True


async def test_every_event_goes_to_every_connection(client: Client) -> None:
    async with client() as sender, client() as watcher:
        sent = await sender.call("chat.send", {"sessionKey": SESSION, "prompt": "/echo hi"})
        theirs = await watcher.completed(sent["runId"])
        ours = await sender.completed(sent["runId"])
    assert theirs["payload"] == ours["payload"]


async def _eventually(
    ask: Callable[[], Awaitable[Any]], ready: Callable[[Any], bool], within_s: float = 10.0
) -> Any:
    """Ask until ``ready`` (for state another owner writes after the event we saw)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        value = await ask()
        if ready(value) or asyncio.get_running_loop().time() > deadline:
            return value
        await asyncio.sleep(0.01)


def _payloads(frames: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [f["payload"] for f in frames if f.get("type") == "event" and f["event"] == name]


async def test_a_session_subscription_narrows_what_a_connection_gets(client: Client) -> None:
    async with client() as narrow, client() as sender:
        subscribed = await narrow.call("events.subscribe", {"sessionKeys": ["tui-b"]})
        assert subscribed == {"mode": "sessions", "sessionKeys": ["tui-b"]}
        other = await sender.call("chat.send", {"sessionKey": "tui-a", "prompt": "/echo a"})
        mine = await sender.call("chat.send", {"sessionKey": "tui-b", "prompt": "/echo b"})
        await sender.completed(other["runId"])
        await narrow.completed(mine["runId"])
        # One broadcast reaches every connection at once: once the sender has a's end, every
        # event of a's run has been offered to `narrow` too (and filtered out).
        widened = await narrow.call("events.subscribe", {"all": True})
        assert widened["mode"] == "all"
        again = await sender.call("chat.send", {"sessionKey": "tui-a", "prompt": "/echo c"})
        await narrow.completed(again["runId"])
    seen = {f["payload"].get("sessionKey") for f in narrow.events("agent")}
    assert {f["payload"]["runId"] for f in narrow.events("agent")} >= {
        mine["runId"],
        again["runId"],
    }
    assert other["runId"] not in {f["payload"]["runId"] for f in narrow.events("agent")}
    assert seen == {"tui-a", "tui-b"}


async def test_the_default_model_is_shown_as_the_session_and_run_model(
    boot: Callable[..., Any],
) -> None:
    async with boot(default_model="offline:offline-model") as runtime:
        plane = runtime.handle("lemon_control_plane")
        async with plane_client(plane)() as c:
            detail = await c.call("session.detail", {"sessionKey": SESSION})
            sent = await c.call("chat.send", {"sessionKey": SESSION, "prompt": "/echo m"})
            started = await c.event("agent", type="started", runId=sent["runId"])
            await c.completed(sent["runId"])
    assert (detail["session"]["provider"], detail["session"]["model"]) == (
        "offline",
        "offline-model",
    )
    assert (started["payload"]["provider"], started["payload"]["model"]) == (
        "offline",
        "offline-model",
    )


async def test_models_list_is_the_agents_catalogue_with_the_default_first(client: Client) -> None:
    # The reference's models.list (the TUI's model picker): rows with an id chat.send's model
    # takes, grouped by provider; advertised because the runtime's agent registers its models.
    async with client(handshake=False) as c:
        hello = await c.connect()
        assert "models.list" in hello["features"]["methods"]
        res = await c.request("models.list")
    assert res["ok"] is True
    rows = res["payload"]["models"]
    assert rows[0]["id"] == "offline:offline"  # nothing configured: the offline model
    assert rows[0]["default"] is True
    assert res["payload"]["summary"]["default"] == "offline:offline"
    ids = {row["id"] for row in rows}
    assert "openai:gpt-4o-mini" in ids
    assert any(i.startswith("anthropic:") for i in ids)
    for row in rows:
        assert set(row) >= {"id", "provider", "name", "contextWindow", "supportsThinking"}
        assert row["id"].startswith(row["provider"] + ":")
