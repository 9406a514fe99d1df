"""``lemon approvals revoke`` reaches a running daemon: a real ``lemon serve`` subprocess, an
"always" grant made through its wire, then ``lemon approvals list`` / ``revoke`` in other
processes; the next run of the same command through the daemon asks again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lemon_control_plane.local_token import read_local_token
from lemon_control_plane.testing import WireClient, wire_client
from lemon_platform_test.lemon_process import lemon_env, run_lemon, start_serve, stop_serve

SESSION = "agent:default:main"
BASH = '/tool bash {"command": "echo granted"}'


async def ask_and_grant(client: WireClient, decision: str) -> str:
    """Run BASH, answer its approval with ``decision``; return the run id (completed)."""
    sent = await client.call("chat.send", {"sessionKey": SESSION, "prompt": BASH})
    asked = await client.event("exec.approval.requested", runId=sent["runId"])
    await client.call(
        "exec.approval.resolve",
        {"approvalId": asked["payload"]["approvalId"], "decision": decision},
    )
    done = await client.completed(sent["runId"])
    assert done["payload"]["ok"] is True, done
    return str(sent["runId"])


def asked_for(client: WireClient, run_id: str) -> list[dict[str, Any]]:
    return [
        f for f in client.events("exec.approval.requested") if f["payload"].get("runId") == run_id
    ]


def listed(env: dict[str, str]) -> list[dict[str, Any]]:
    proc = run_lemon(env, "approvals", "list", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    grants: list[dict[str, Any]] = json.loads(proc.stdout)["grants"]
    return grants


async def test_a_revoked_always_grant_asks_again_on_the_running_daemon(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "agent").mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    env = lemon_env(tmp_path, home=home)
    proc, url = start_serve(env, work)
    try:
        async with wire_client(url.replace("http://", "ws://") + "/ws",
                               token=read_local_token(home))() as c:  # fmt: skip
            await ask_and_grant(c, "approve_global")
            # The grant is in force: the same command runs without asking.
            again = await c.call("chat.send", {"sessionKey": SESSION, "prompt": BASH})
            done = await c.completed(again["runId"])
            assert done["payload"]["ok"] is True
            assert asked_for(c, again["runId"]) == []

            # Another process lists the daemon's live grant and revokes it.
            grants = listed(env)
            assert [(g["scope"], g["tool"]) for g in grants] == [("global", "bash")]
            revoked = run_lemon(env, "approvals", "revoke", grants[0]["key"][:12])
            assert revoked.returncode == 0, revoked.stdout + revoked.stderr
            assert "Revoked the global grant" in revoked.stdout
            assert "until it restarts" not in revoked.stdout
            assert listed(env) == []

            # The running daemon asks again for the same command.
            after = await c.call("chat.send", {"sessionKey": SESSION, "prompt": BASH})
            asked = await c.event("exec.approval.requested", runId=after["runId"])
            assert asked["payload"]["tool"] == "bash"
            await c.call(
                "exec.approval.resolve",
                {"approvalId": asked["payload"]["approvalId"], "decision": "deny"},
            )
            await c.completed(after["runId"])
    finally:
        stop_serve(proc, graceful=True)
