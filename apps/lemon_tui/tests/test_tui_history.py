"""Reopening a session shows its tool calls as cards with their real outcome (ran ok, failed,
denied, expired), from the transcript; not only the text."""

from __future__ import annotations

import json

from lemon_control_plane import ControlPlane, WebSocketSessionPort
from lemon_core.events import ApprovalDecision
from lemon_core.execution import RunRequest
from lemon_core.sessions import ApprovalAsked, RunEnded
from lemon_tui import LemonTUI, websocket_connector
from lemon_tui._widgets import AnswerBlock, ToolCardView, UserBlock

from .conftest import ASK_BASH, until

KEY = "agent:default:main:sub:history"


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
    daemon: ControlPlane, other: WebSocketSessionPort
) -> None:
    await run(other, "echo ran-fine", ApprovalDecision.APPROVE_ONCE)
    await run(other, "exit 3", ApprovalDecision.APPROVE_ONCE)
    await run(other, "echo refused", ApprovalDecision.DENY)
    await run(other, "echo too-late", None)
    app = LemonTUI(
        websocket_connector(daemon.ws_url, token=daemon.local_token),
        where=daemon.ws_url,
        session=KEY,
    )
    async with app.run_test(size=(100, 60)) as pilot:
        await until(pilot, lambda: len(app.query(ToolCardView)) == 4, "the history's cards")
        cards = list(app.query(ToolCardView))
        assert [c.state for c in cards] == ["ok", "failed", "denied", "expired"]
        assert [c.title for c in cards] == ["bash"] * 4
        assert "ran-fine" in cards[0].message
        assert cards[1].exit_code == 3
        assert "did not run" in cards[2].message
        rendered = [str(c.render()) for c in cards]
        assert [r[0] for r in rendered] == ["✓", "✗", "⊘", "⊘"]
        assert "denied" in rendered[2]
        assert "expired" in rendered[3]
        # Each card sits in its turn: after its message, before the answer that reports it.
        order = [type(w).__name__ for w in app.transcript.children if not w.has_class("note")]
        kinds = [k for k in order if k in ("UserBlock", "ToolCardView", "AnswerBlock")]
        assert kinds[:4] == ["UserBlock", "AnswerBlock", "ToolCardView", "AnswerBlock"]
        assert len(app.query(UserBlock)) == 4
        assert len(app.query(AnswerBlock)) >= 7
