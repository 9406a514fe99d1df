"""Reopening a session: each tool call of the history shows its real outcome (ran ok, failed,
denied, expired), from the transcript; a call that never ran is never a green "done"."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from lemon_control_plane import ControlPlane, WebSocketSessionPort
from lemon_core.events import ApprovalDecision
from lemon_core.execution import RunRequest, ToolPolicy
from lemon_core.sessions import ApprovalAsked, RunEnded

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT_MS = 10_000
KEY = "agent:default:web:browser:unknown:tool-history"
ASK_BASH = ToolPolicy(require_approval=frozenset({"bash"}))


async def run(port: WebSocketSessionPort, command: str, decision: ApprovalDecision | None) -> None:
    """One run calling bash ``command``; its approval gets ``decision`` (``None``: the run is
    cancelled while the approval waits, which expires it)."""
    stream = port.watch(KEY)
    prompt = "/tool bash " + json.dumps({"command": command})
    receipt = await port.submit(
        RunRequest(origin="test", session_key=KEY, prompt=prompt, tool_policy=ASK_BASH)
    )
    async for event in stream:
        if isinstance(event, ApprovalAsked):
            if decision is None:
                await port.cancel(session_key=KEY)
            else:
                await port.resolve_approval(event.approval_id, decision)
        if isinstance(event, RunEnded) and event.run_id == receipt.run_id:
            break
    stream.close()


async def test_history_shows_each_tool_call_with_its_outcome(
    page: Any, daemon: ControlPlane, shot: Callable[[str], Path]
) -> None:
    async with WebSocketSessionPort(daemon.ws_url, token=daemon.local_token) as port:
        await run(port, "echo ran-fine", ApprovalDecision.APPROVE_ONCE)
        await run(port, "exit 3", ApprovalDecision.APPROVE_ONCE)
        await run(port, "echo refused", ApprovalDecision.DENY)
        await run(port, "echo too-late", None)
    await page.goto(daemon.url + "/chat/" + quote(KEY, safe=""))
    await page.wait_for_selector("body[data-ready]", timeout=WAIT_MS)
    tools = page.locator(".tool")
    assert await tools.count() == 4
    states = await tools.evaluate_all("(cards) => cards.map((c) => c.dataset.state)")
    assert states == ["done", "failed", "denied", "expired"]
    exits = await page.locator(".tool .tool-exit").all_inner_texts()
    assert exits == ["exit 0", "exit 3", "denied: did not run", "expired: did not run"]
    assert await page.locator(".tool .tool-name").all_inner_texts() == ["bash"] * 4
    await tools.nth(2).locator("summary").click()
    assert "did not run" in await tools.nth(2).locator("pre.output").inner_text()
    await page.screenshot(path=str(shot("history_tool_outcomes")), full_page=True)
    assert page.page_errors == []
