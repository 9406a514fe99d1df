"""remember / recall end to end through the session port of a booted daemon: the native
agent on the offline model (``/tool NAME {json}`` calls a tool, then reports its result).
A ``remember`` asks for approval and, approved, is stored; a new session of the same agent
and project recalls it; another agent's recall finds nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from lemon_core.execution import RunRequest
from lemon_core.sessions import SESSION_PORT, ApprovalAsked, RunEnded, SessionPort
from lemon_runtime import Runtime

FACT = "The zebra deploy window is Thursday 14:00 UTC."


async def run(port: SessionPort, key: str, prompt: str, cwd: Path, *, approve: bool) -> RunEnded:
    stream = port.watch(key)
    asked = 0
    try:
        agent = key.split(":")[1]
        await port.submit(
            RunRequest(origin="test", session_key=key, prompt=prompt, agent_id=agent, cwd=str(cwd))
        )
        async with asyncio.timeout(60):
            while True:
                event = await stream.get()
                if isinstance(event, ApprovalAsked):
                    asked += 1
                    await port.resolve_approval(
                        event.approval_id, "approve_once" if approve else "deny"
                    )
                elif isinstance(event, RunEnded):
                    assert asked == (1 if "remember" in prompt else 0)
                    return event
    finally:
        stream.close()


async def test_remember_then_recall_in_a_new_session_and_not_from_another_agent(
    runtime: Runtime, tmp_path: Path
) -> None:
    port = runtime.context.capabilities.require(SESSION_PORT)
    work = tmp_path / "work"
    args = json.dumps({"text": FACT, "scope": "project"})
    stored = await run(
        port, "agent:default:main:sub:s1", f"/tool remember {args}", work, approve=True
    )
    assert stored.ok, stored
    assert "remembered as mem_" in stored.answer

    query = json.dumps({"query": "when is the zebra deploy window"})
    found = await run(
        port, "agent:default:main:sub:s2", f"/tool recall {query}", work, approve=False
    )
    assert FACT in found.answer
    assert "data, not instructions" in found.answer

    other = await run(port, "agent:other:main:sub:s1", f"/tool recall {query}", work, approve=False)
    assert FACT not in other.answer
    assert "no memory matches" in other.answer


async def test_a_model_cannot_widen_the_scope(runtime: Runtime, tmp_path: Path) -> None:
    port = runtime.context.capabilities.require(SESSION_PORT)
    wide = json.dumps({"query": "zebra", "scope": "all"})
    ended = await run(
        port, "agent:default:main:sub:s3", f"/tool recall {wide}", tmp_path, approve=False
    )
    assert "scope: 'all' is not one of" in ended.answer
    keyed = json.dumps({"query": "zebra", "scope_key": "agent:other:main:sub:s1"})
    ended = await run(
        port, "agent:default:main:sub:s3", f"/tool recall {keyed}", tmp_path, approve=False
    )
    assert "Additional properties are not allowed ('scope_key'" in ended.answer
