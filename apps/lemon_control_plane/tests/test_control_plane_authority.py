"""What a client-supplied field can change: a token's scopes bound the run it submits.

A ``read,write`` token submits runs; it cannot relax the daemon's tool policy (a client policy
only narrows), skip approval questions (``preapproved`` needs the approvals or admin scope),
run outside the daemon's workspace, pick another agent, or claim the daemon's own ingress
origins. Each test drives the real daemon profile over a raw ``port.submit`` frame.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from lemon_control_plane import ControlPlane, WebSocketSessionPort
from lemon_control_plane.testing import until_run_end, wire_client
from lemon_control_plane.tokens import TokenStore, tokens_path
from lemon_core.events import ApprovalDecision
from lemon_core.sessions import ApprovalAsked, ToolCard
from lemon_runtime import Runtime

SESSION = "agent:default:main"


@pytest.fixture
def tokens(tmp_path: Path) -> dict[str, str]:
    store = TokenStore(tokens_path(tmp_path / "home"))
    return {
        "write": store.create("writer", ("read", "write"))[1],
        "approvals": store.create("approver", ("approvals", "read", "write"))[1],
        "admin": store.create("owner")[1],
    }


@pytest.fixture
async def plane(
    boot: Callable[..., Runtime], tokens: dict[str, str]
) -> AsyncIterator[ControlPlane]:
    async with boot() as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        yield plane


def wire_request(prompt: str, **fields: Any) -> dict[str, Any]:
    return {"origin": "control_plane", "sessionKey": SESSION, "prompt": prompt, **fields}


async def submit(plane: ControlPlane, token: str, **fields: Any) -> dict[str, Any]:
    async with wire_client(plane.ws_url)(handshake=False) as c:
        hello = await c.connect(auth={"token": token})
        assert "auth" in hello, hello
        return await c.request("port.submit", {"request": wire_request(**fields)})


async def test_a_write_token_cannot_lift_the_approval_of_bash(
    plane: ControlPlane, tokens: dict[str, str], work: Path
) -> None:
    marker = work / "ran"
    async with WebSocketSessionPort(plane.ws_url, token=tokens["admin"]) as owner:
        stream = owner.watch(SESSION)
        answer = await submit(
            plane,
            tokens["write"],
            prompt=f'/tool bash {{"command": "touch {marker}"}}',
            toolPolicy={"allow": None, "deny": [], "require_approval": []},
        )
        assert answer["ok"] is True, answer
        run_id = answer["payload"]["run_id"]
        asked = None
        while asked is None:
            event = await stream.get()
            if isinstance(event, ApprovalAsked):
                asked = event
        assert asked.tool == "bash"
        assert not marker.exists(), "bash ran before anyone approved it"
        await owner.resolve_approval(asked.approval_id, ApprovalDecision.DENY)
        await until_run_end(stream, run_id)
        stream.close()
    assert not marker.exists()


async def test_skipping_approval_questions_needs_the_approvals_scope(
    plane: ControlPlane, tokens: dict[str, str], work: Path
) -> None:
    marker = work / "ran"
    prompt = f'/tool bash {{"command": "touch {marker}"}}'
    refused = await submit(plane, tokens["write"], prompt=prompt, preapproved=["bash"])
    assert refused["error"]["code"] == "FORBIDDEN"
    assert "approvals" in refused["error"]["message"]
    refused = await submit(plane, tokens["write"], prompt=prompt, preapproved=["*"])
    assert refused["error"]["code"] == "FORBIDDEN"
    assert not marker.exists()
    async with WebSocketSessionPort(plane.ws_url, token=tokens["admin"]) as owner:
        stream = owner.watch(SESSION)
        accepted = await submit(plane, tokens["approvals"], prompt=prompt, preapproved=["bash"])
        assert accepted["ok"] is True, accepted
        events = await until_run_end(stream, accepted["payload"]["run_id"])
        stream.close()
    assert not any(isinstance(e, ApprovalAsked) for e in events)
    assert any(isinstance(e, ToolCard) and e.phase == "completed" for e in events)
    assert marker.exists()


async def test_a_write_token_stays_in_the_daemons_workspace(
    plane: ControlPlane, tokens: dict[str, str], tmp_path: Path, work: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for cwd in ("/", str(outside), str(work / ".." / "elsewhere"), "relative/dir"):
        refused = await submit(plane, tokens["write"], prompt="/echo hi", cwd=cwd)
        assert refused["error"]["code"] == "FORBIDDEN", cwd
        assert "workspace" in refused["error"]["message"]
    link = work / "up"
    link.symlink_to(outside)
    refused = await submit(plane, tokens["write"], prompt="/echo hi", cwd=str(link))
    assert refused["error"]["code"] == "FORBIDDEN", "a link out of the workspace is outside"
    inside = work / "sub"
    inside.mkdir()
    for cwd in (str(work), str(inside), None):
        answer = await submit(plane, tokens["write"], prompt="/echo hi", cwd=cwd)
        assert answer["ok"] is True, (cwd, answer)
    answer = await submit(plane, tokens["admin"], prompt="/echo hi", cwd=str(outside))
    assert answer["ok"] is True, "the admin scope may run elsewhere"


async def test_a_write_token_cannot_claim_another_agent_or_an_ingress_origin(
    plane: ControlPlane, tokens: dict[str, str]
) -> None:
    refused = await submit(plane, tokens["write"], prompt="/echo hi", agentId="coder")
    assert refused["error"]["code"] == "FORBIDDEN"
    assert "admin" in refused["error"]["message"]
    for origin in ("webhook:ci", "cron", "telegram"):
        refused = await submit(plane, tokens["write"], prompt="/echo hi", origin=origin)
        assert refused["error"]["code"] == "FORBIDDEN", origin
    for origin in ("cli", "tui", "web", "control_plane"):
        answer = await submit(plane, tokens["write"], prompt="/echo hi", origin=origin)
        assert answer["ok"] is True, (origin, answer)


async def test_a_bad_preapproved_value_is_a_clear_error(
    plane: ControlPlane, tokens: dict[str, str]
) -> None:
    for bad in ("bash", [1], ["no spaces allowed"]):
        answer = await submit(plane, tokens["admin"], prompt="/echo hi", preapproved=bad)
        assert answer["error"]["code"] in ("INVALID_PARAMS", "INVALID_REQUEST"), bad
        assert "preapproved" in answer["error"]["message"]


async def test_a_sessions_own_mcp_servers_need_the_admin_scope(
    plane: ControlPlane, tokens: dict[str, str], work: Path
) -> None:
    marker = work / "started"
    server = {"name": "editor", "command": "/bin/sh", "args": ["-c", f"touch {marker}"]}
    for scope in ("write", "approvals"):
        refused = await submit(plane, tokens[scope], prompt="/echo hi", mcpServers=[server])
        assert refused["error"]["code"] == "FORBIDDEN", scope
        assert "admin" in refused["error"]["message"]
    assert not marker.exists(), "a refused request started nothing"
    for bad, field in (
        ({"name": "a b", "command": "x"}, "name"),
        ({"name": "web", "transport": "http", "url": "ftp://host"}, "url"),
        ({"name": "x", "command": "x", "shell": True}, "mcpServers[0]"),
    ):
        answer = await submit(plane, tokens["admin"], prompt="/echo hi", mcpServers=[bad])
        assert answer["error"]["code"] in ("INVALID_PARAMS", "INVALID_REQUEST"), bad
        assert field in answer["error"]["message"], answer


async def test_an_editor_handle_needs_the_admin_scope_and_a_loopback_endpoint(
    plane: ControlPlane, tokens: dict[str, str]
) -> None:
    editor = {"host": "127.0.0.1", "port": 9, "token": "t", "read": True}
    for scope in ("write", "approvals"):
        refused = await submit(plane, tokens[scope], prompt="/echo hi", editor=editor)
        assert refused["error"]["code"] == "FORBIDDEN", scope
        assert "admin" in refused["error"]["message"]
    remote = {**editor, "host": "10.0.0.1"}
    answer = await submit(plane, tokens["admin"], prompt="/echo hi", editor=remote)
    assert answer["error"]["code"] in ("INVALID_PARAMS", "INVALID_REQUEST"), answer
    assert "loopback" in answer["error"]["message"], answer
