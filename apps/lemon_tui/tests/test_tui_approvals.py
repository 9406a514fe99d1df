"""The approval panel: takes focus, 1/2/3/4/Esc resolve it through the port, and it closes
when the approval is answered from another client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import Static

from lemon_control_plane import ControlPlane, WebSocketSessionPort
from lemon_core.events import ApprovalDecision
from lemon_tui._editor import Editor
from lemon_tui._widgets import ApprovalPanel, ToolCardView

from .conftest import ASK_BASH, app_for, status_text, until

COMMAND = '/tool bash {"command": "echo approved-ran"}'


@pytest.mark.parametrize(
    ("key", "ok"), [("1", True), ("2", True), ("3", True), ("4", False), ("escape", False)]
)
async def test_a_key_answers_the_panel(daemon: ControlPlane, key: str, ok: bool) -> None:
    app = app_for(daemon, ASK_BASH)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        app.query_one("#input", Editor).value = COMMAND
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalPanel), "the panel")
        panel = app.screen
        assert isinstance(panel, ApprovalPanel)
        assert panel.asked.tool == "bash"
        assert "echo approved-ran" in str(panel.query_one("#approval-question").render())
        assert "waiting for approval" in status_text(app)
        await pilot.press(key)
        await until(pilot, lambda: not isinstance(app.screen, ApprovalPanel), "panel closed")
        await until(pilot, lambda: not app.waiting_for, "the run ended")
        cards = list(app.query(ToolCardView))
        assert [c.state for c in cards] == ["ok" if ok else "failed"]
        assert app.query_one("#input", Editor).has_focus


async def test_an_approval_answered_elsewhere_closes_the_panel(
    daemon: ControlPlane, other: WebSocketSessionPort
) -> None:
    app = app_for(daemon, ASK_BASH)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        app.query_one("#input", Editor).value = COMMAND
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalPanel), "the panel")
        panel = app.screen
        assert isinstance(panel, ApprovalPanel)
        result = await other.resolve_approval(
            panel.asked.approval_id, ApprovalDecision.APPROVE_ONCE
        )
        assert result.resolved
        await until(pilot, lambda: not isinstance(app.screen, ApprovalPanel), "panel closed")
        await until(pilot, lambda: not app.waiting_for, "the run ended")
        assert [c.state for c in app.query(ToolCardView)] == ["ok"]


async def test_a_write_outside_the_workspace_says_so_in_the_panel(
    daemon: ControlPlane, tmp_path: Path
) -> None:
    target = tmp_path / "outside.txt"  # the daemon's workspace is tmp_path / "work"
    app = app_for(daemon)  # the default policy: write asks
    async with app.run_test(size=(120, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        command = {"path": str(target), "content": "x"}
        app.query_one("#input", Editor).value = f"/tool write {json.dumps(command)}"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalPanel), "the panel")
        panel = app.screen
        assert isinstance(panel, ApprovalPanel)
        shown = " ".join(str(s.render()) for s in panel.query(Static))
        assert f"write {target.resolve()} (outside the workspace)" in shown
        await pilot.press("4")
        await until(pilot, lambda: not app.waiting_for, "the run ended")
    assert not target.exists()
