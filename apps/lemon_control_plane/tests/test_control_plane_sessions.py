"""sessions.patch / reset / delete over the wire (the session port's settings and lifecycle),
and session.detail showing what was set."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lemon_control_plane.testing import ClientFactory as Client

SESSION = "agent:default:main"


def real(path: Path) -> str:
    return str(path.resolve())


async def test_patch_model_shows_in_detail_and_names_the_model_of_the_next_run(
    client: Client,
) -> None:
    async with client() as c, client() as other:
        models = await c.call("models.list")
        pick = next(m["id"] for m in models["models"] if m["id"] != models["summary"]["default"])
        before = await c.call("session.detail", {"sessionKey": SESSION})
        assert before["session"]["modelSource"] == "default"
        assert before["session"]["modelOverride"] is None
        assert (
            f"{before['session']['provider']}:{before['session']['model']}"
            == (models["summary"]["default"])
        )
        patched = await c.call("sessions.patch", {"sessionKey": SESSION, "model": pick})
        assert patched["success"] is True
        assert patched["sessionKey"] == SESSION
        assert patched["summary"]["patchedKeys"] == ["model"]
        detail = (await other.call("session.detail", {"sessionKey": SESSION}))["session"]
        provider, _, name = pick.partition(":")
        assert (detail["provider"], detail["model"]) == (provider, name)
        assert (detail["modelSource"], detail["modelOverride"]) == ("session", pick)
        level = await c.call("sessions.patch", {"sessionKey": SESSION, "thinkingLevel": "high"})
        assert level["session"] == {
            "model": pick,
            "thinkingLevel": "high",
            "label": None,
            "workspace": None,
            "updatedAtMs": level["session"]["updatedAtMs"],
        }
        sent = await c.call("chat.send", {"sessionKey": SESSION, "prompt": "hello"})
        started = await other.event("agent", type="started", runId=sent["runId"])
        assert (started["payload"]["provider"], started["payload"]["model"]) == (provider, name)
        assert started["payload"]["thinkingLevel"] == "high"
        await c.completed(sent["runId"])
        cleared = await c.call("sessions.patch", {"sessionKey": SESSION, "model": None})
        assert cleared["session"]["model"] is None
        after = (await c.call("session.detail", {"sessionKey": SESSION}))["session"]
        assert (after["modelSource"], after["thinkingLevel"]) == ("default", "high")


async def test_patch_refuses_unknown_models_levels_legacy_fields_and_empty_patches(
    client: Client,
) -> None:
    async with client() as c:
        for params, code, words in (
            ({"model": "nowhere:nothing"}, "INVALID_PARAMS", "unknown model"),
            ({"thinkingLevel": "extreme"}, "INVALID_PARAMS", "thinkingLevel"),
            ({"engine": "codex"}, "INVALID_PARAMS", "cannot be patched"),
            ({"model": 3}, "INVALID_REQUEST", "expected string"),
            ({}, "INVALID_REQUEST", "Missing required fields"),
        ):
            res = await c.request("sessions.patch", {"sessionKey": SESSION, **params})
            assert not res["ok"], params
            assert res["error"]["code"] == code, res
            assert words in res["error"]["message"], res
        detail = (await c.call("session.detail", {"sessionKey": SESSION}))["session"]
        assert detail["modelOverride"] is None


async def test_reset_and_delete_over_the_wire(client: Client) -> None:
    async with client() as c:
        sent = await c.call("chat.send", {"sessionKey": SESSION, "prompt": "remember me"})
        await c.completed(sent["runId"])
        history = await c.call("chat.history", {"sessionKey": SESSION})
        assert [m["role"] for m in history["messages"]][:2] == ["user", "assistant"]
        reset = await c.call("sessions.reset", {"sessionKey": SESSION})
        assert reset["success"] is True
        assert (await c.call("chat.history", {"sessionKey": SESSION}))["messages"] == []
        await c.call("sessions.patch", {"sessionKey": SESSION, "label": "kept"})
        listed = await c.call("sessions.list", {"limit": 100})
        assert [s["sessionKey"] for s in listed["sessions"]] == [SESSION]
        assert (listed["sessions"][0]["label"], listed["sessions"][0]["model"]) == ("kept", None)
        deleted = await c.call("sessions.delete", {"sessionKey": SESSION})
        assert deleted == {"deleted": True, "sessionKey": SESSION, "summary": {"deleted": True}}
        assert (await c.call("sessions.list", {"limit": 100}))["sessions"] == []


async def test_reset_of_a_busy_session_is_a_conflict(client: Client) -> None:
    async with client() as c:
        sent = await c.call(
            "chat.send", {"sessionKey": SESSION, "prompt": '/tool bash {"command": "echo hi"}'}
        )
        ask = await c.event("exec.approval.requested", runId=sent["runId"])
        for method in ("sessions.reset", "sessions.delete"):
            res = await c.request(method, {"sessionKey": SESSION})
            assert not res["ok"]
            assert res["error"]["code"] == "CONFLICT"
            assert "busy" in res["error"]["message"]
        await c.call(
            "exec.approval.resolve",
            {"approvalId": ask["payload"]["approvalId"], "decision": "deny"},
        )
        await c.completed(sent["runId"])


async def test_the_patch_methods_need_the_admin_scope(client: Client) -> None:
    async with client(handshake=False) as c:
        hello = await c.connect(scopes=["read", "write"])
        assert "admin" not in hello["auth"]["scopes"]
        for method in ("sessions.patch", "sessions.reset", "sessions.delete"):
            res = await c.request(method, {"sessionKey": SESSION, "model": "offline:offline"})
            assert res["error"]["code"] == "FORBIDDEN", res


async def test_chat_history_carries_when_each_message_was_written(client: Client) -> None:
    import time

    async with client() as c:
        before = int(time.time() * 1000)
        first = await c.call("chat.send", {"sessionKey": SESSION, "prompt": "first"})
        await c.completed(first["runId"])
        between = int(time.time() * 1000)
        second = await c.call("chat.send", {"sessionKey": SESSION, "prompt": "second"})
        await c.completed(second["runId"])
        after = int(time.time() * 1000)
        history = await c.call("chat.history", {"sessionKey": SESSION})
        snapshot = await c.call("sessions.snapshot", {"sessionKey": SESSION})
    messages = history["messages"]
    stamps = [m["timestampMs"] for m in messages]
    assert [m["content"] for m in messages if m["role"] == "user"] == ["first", "second"]
    assert all(isinstance(t, int) for t in stamps), stamps
    assert stamps == sorted(stamps)
    assert before <= stamps[0] <= between <= stamps[-1] <= after
    assert [m["timestampMs"] for m in snapshot["messages"]] == stamps


#: Every field the reference's control plane sends in a session row (sessions.list,
#: sessions.active.list, and session.detail's session block).
ROW_FIELDS = {"sessionKey", "agentId", "origin", "createdAtMs", "updatedAtMs", "runCount", "model"}


async def test_detail_and_lists_carry_the_reference_fields_and_the_run_count(
    client: Client,
) -> None:
    async with client() as c:
        fresh = await c.call("session.detail", {"sessionKey": SESSION})
        assert fresh["runCount"] == 0
        assert fresh["runs"] == []
        assert fresh["session"]["runCount"] == 0
        assert fresh["session"]["active"] is False
        run_ids = []
        for prompt in ("/echo one", "/echo two"):
            sent = await c.call("chat.send", {"sessionKey": SESSION, "prompt": prompt})
            await c.completed(sent["runId"])
            run_ids.append(sent["runId"])
        other = await c.call("chat.send", {"sessionKey": "tui-other", "prompt": "/echo x"})
        await c.completed(other["runId"])
        listed = await _eventually(
            lambda: c.call("sessions.list", {"limit": 100}),
            lambda p: {s["sessionKey"]: s["runCount"] for s in p["sessions"]}.get(SESSION) == 2,
        )
        detail = await _eventually(
            lambda: c.call("session.detail", {"sessionKey": SESSION}),
            lambda p: p["runCount"] == 2,
        )
        active = await c.call("sessions.active.list")
    assert set(listed) >= {"sessions", "total", "filters", "summary"}
    rows = {s["sessionKey"]: s for s in listed["sessions"]}
    for row in rows.values():
        assert set(row) >= ROW_FIELDS, row
    assert rows[SESSION]["runCount"] == 2
    assert rows[SESSION]["agentId"] == "default"
    assert rows["tui-other"]["runCount"] == 1
    updated = [s["updatedAtMs"] for s in listed["sessions"]]
    assert updated == sorted(updated, reverse=True)
    assert set(active) >= {"sessions", "total", "filters", "summary"}

    assert set(detail) >= {"sessionKey", "session", "runs", "runCount", "summary"}
    assert detail["sessionKey"] == SESSION
    session = detail["session"]
    assert set(session) >= ROW_FIELDS | {
        "model",
        "provider",
        "contextWindow",
        "thinkingLevel",
        "modelSource",
        "modelOverride",
        "maxOutput",
        "engine",
        "active",
    }
    assert session["runCount"] == 2
    assert session["agentId"] == "default"
    assert session["active"] is False
    assert session["updatedAtMs"] == rows[SESSION]["updatedAtMs"]
    # The session's own runs, newest first (the other session's run is not among them).
    assert [r["runId"] for r in detail["runs"]] == run_ids[::-1]
    assert all(r["sessionKey"] == SESSION and r["ok"] for r in detail["runs"])
    assert detail["summary"]["runCount"] == 2


async def _eventually(
    ask: Callable[[], Awaitable[Any]], ready: Callable[[Any], bool], within_s: float = 10.0
) -> Any:
    """Ask until ``ready`` (the session index is written just after a run's end is published)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        value = await ask()
        if ready(value) or asyncio.get_running_loop().time() > deadline:
            return value
        await asyncio.sleep(0.01)


async def test_a_sessions_workspace_is_set_by_an_admin_only_shown_in_detail_and_used_by_runs(
    client: Client, work: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "note.txt").write_text("the note says lemons")
    async with client(handshake=False) as reader:
        hello = await reader.connect(scopes=["read", "write"])
        assert "admin" not in hello["auth"]["scopes"]
        res = await reader.request(
            "sessions.patch", {"sessionKey": SESSION, "workspace": str(elsewhere)}
        )
        assert res["error"]["code"] == "FORBIDDEN", res
    async with client() as c:
        before = (await c.call("session.detail", {"sessionKey": SESSION}))["session"]
        assert (before["workspace"], before["workspaceSource"]) == (real(work), "default")
        missing = await c.request(
            "sessions.patch", {"sessionKey": SESSION, "workspace": str(tmp_path / "nowhere")}
        )
        assert missing["error"]["code"] == "INVALID_PARAMS", missing
        assert "does not exist" in missing["error"]["message"]
        relative = await c.request("sessions.patch", {"sessionKey": SESSION, "workspace": "x"})
        assert relative["error"]["code"] == "INVALID_PARAMS", relative
        patched = await c.call(
            "sessions.patch", {"sessionKey": SESSION, "workspace": str(elsewhere)}
        )
        assert patched["summary"]["patchedKeys"] == ["workspace"]
        assert patched["session"]["workspace"] == real(elsewhere)
        detail = (await c.call("session.detail", {"sessionKey": SESSION}))["session"]
        assert (detail["workspace"], detail["workspaceSource"]) == (
            real(elsewhere),
            "session",
        )
        note = json.dumps({"path": str(elsewhere / "note.txt")})
        sent = await c.call("chat.send", {"sessionKey": SESSION, "prompt": f"/tool read {note}"})
        done = await c.completed(sent["runId"])
        assert "the note says lemons" in done["payload"]["answer"]
        assert c.events("exec.approval.requested") == []
        cleared = await c.call("sessions.patch", {"sessionKey": SESSION, "workspace": None})
        assert cleared["session"]["workspace"] is None
        after = (await c.call("session.detail", {"sessionKey": SESSION}))["session"]
        assert (after["workspace"], after["workspaceSource"]) == (real(work), "default")
