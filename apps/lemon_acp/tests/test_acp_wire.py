"""``lemon acp`` on raw pipes: every stdout line is a JSON-RPC frame (logs go to stderr), and
bad input is answered with the JSON-RPC error codes, naming the field."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

LEMON = str(Path(sys.executable).parent / "lemon")


async def _converse(
    env: dict[str, str], cwd: Path, frames: list[dict[str, Any] | str]
) -> tuple[list[str], str]:
    """Send ``frames`` (a ``str`` goes as it is), close stdin; every stdout line, and stderr."""
    process = await asyncio.create_subprocess_exec(
        LEMON,
        "acp",
        env=env,
        cwd=cwd,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    lines = [f if isinstance(f, str) else json.dumps(f) for f in frames]
    out, err = await asyncio.wait_for(process.communicate(("\n".join(lines) + "\n").encode()), 120)
    assert process.returncode == 0, err.decode()
    return out.decode().splitlines(), err.decode()


def _req(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


async def test_stdout_carries_only_frames_and_bad_input_gets_rpc_errors(
    agent_env: dict[str, str], workspace: Path
) -> None:
    # Ask the runtime to log at debug level on stdout's behalf: nothing may reach stdout.
    env = {**agent_env, "LEMON_LOG_LEVEL": "DEBUG", "PYTHONWARNINGS": "default"}
    lines, _err = await _converse(
        env,
        workspace,
        [
            _req(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}}),
            _req(2, "no/such/method", {}),
            _req(3, "session/new", {"cwd": "relative/path", "mcpServers": []}),
            _req(
                4,
                "session/prompt",
                {"sessionId": "acp:nope", "prompt": [{"type": "text", "text": "x"}]},
            ),
            _req(
                5,
                "session/new",
                {
                    "cwd": str(workspace),
                    "mcpServers": [{"type": "sse", "name": "s", "url": "http://x"}],
                },
            ),
            _req(
                6,
                "session/load",
                {
                    "sessionId": "acp:00000000-0000-0000-0000-000000000000",
                    "cwd": str(workspace),
                    "mcpServers": [],
                },
            ),
            _req(7, "initialize", {"protocolVersion": "one"}),
            "this is not json",
        ],
    )
    frames = [json.loads(line) for line in lines]  # every line parses
    assert all(f.get("jsonrpc") == "2.0" for f in frames)
    by_id = {f.get("id"): f for f in frames}
    assert by_id[1]["result"]["protocolVersion"] == 1
    assert by_id[2]["error"]["code"] == -32601
    assert by_id[3]["error"]["code"] == -32602
    assert by_id[3]["error"]["data"] == {"field": "cwd"}
    assert by_id[4]["error"]["code"] == -32602
    assert "unknown session" in by_id[4]["error"]["message"]
    assert by_id[5]["error"]["data"] == {"field": "mcpServers[0].type"}
    assert by_id[6]["error"]["code"] == -32602
    assert by_id[7]["error"]["data"] == {"field": "protocolVersion"}
    assert by_id[None]["error"]["code"] == -32700


async def test_modes_and_mcp_servers_are_kept_per_session(
    agent_env: dict[str, str], workspace: Path
) -> None:
    lines, _ = await _converse(
        agent_env,
        workspace,
        [
            _req(1, "initialize", {"protocolVersion": 1}),
            _req(
                2,
                "session/new",
                {
                    "cwd": str(workspace),
                    "mcpServers": [
                        {"name": "files", "command": "/usr/bin/true", "args": [], "env": []},
                        {
                            "type": "http",
                            "name": "web",
                            "url": "http://127.0.0.1:9/mcp",
                            "headers": [],
                        },
                    ],
                },
            ),
        ],
    )
    frames = [json.loads(line) for line in lines]
    new = next(f for f in frames if f.get("id") == 2)
    assert new["result"]["sessionId"].startswith("acp:")
    assert new["result"]["modes"]["currentModeId"] == "default"


@pytest.mark.parametrize(
    ("tool", "action_kind", "kind"),
    [
        ("web_fetch", "fetch", "fetch"),
        ("web_search", "web_search", "fetch"),
        ("browser", "fetch", "fetch"),
        ("mcp_fs_read", "fetch", "fetch"),  # an unknown tool: by its action kind
        ("task", "subagent", "other"),
        ("bash", "command", "execute"),
    ],
)
def test_a_tool_call_has_the_acp_kind_of_its_tool_or_action(
    tool: str, action_kind: str, kind: str
) -> None:
    from lemon_acp._content import tool_kind

    assert tool_kind(tool, action_kind) == kind
