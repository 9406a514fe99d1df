"""The approval panel: it never takes keys typed for the editor (Tab opens it), 1/2/3 3/4/Esc
resolve it through the port ("always" asks for a second 3), it says what a grant covers, and it
closes when the approval is answered from another client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from lemon_control_plane import ControlPlane, WebSocketSessionPort
from lemon_core.events import ApprovalDecision
from lemon_tui import LemonTUI
from lemon_tui._editor import Editor
from lemon_tui._widgets import ApprovalPanel, ToolCardView, UserBlock

from .conftest import ASK_BASH, app_for, open_panel, status_text, until

COMMAND = '/tool bash {"command": "echo approved-ran"}'
_KEY_OF = {" ": "space", ",": "comma"}


@pytest.mark.parametrize(
    ("keys", "ok"),
    [(("1",), True), (("2",), True), (("3", "3"), True), (("4",), False), (("escape",), False)],
)
async def test_a_key_answers_the_panel(
    daemon: ControlPlane, keys: tuple[str, ...], ok: bool
) -> None:
    app = app_for(daemon, ASK_BASH)
    async with app.run_test(size=(80, 24)) as pilot:
        panel = await ask_bash(pilot, app)
        assert panel.asked.tool == "bash"
        assert "echo approved-ran" in str(panel.query_one("#approval-question").render())
        assert "waiting for approval" in status_text(app)
        await pilot.press(*keys)
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
        panel = await ask_bash(pilot, app)
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
        await open_panel(pilot, app)
        panel = app.screen
        assert isinstance(panel, ApprovalPanel)
        shown = " ".join(str(s.render()) for s in panel.query(Static))
        assert f"write {target.resolve()} (outside the workspace)" in shown
        await pilot.press("4")
        await until(pilot, lambda: not app.waiting_for, "the run ended")
    assert not target.exists()


async def ask_bash(pilot: Pilot[object], app: LemonTUI) -> ApprovalPanel:
    """Once connected, send :data:`COMMAND` and open the approval panel it asks with (Tab)."""
    await until(pilot, lambda: app.status.connection == "online", "connected")
    app.query_one("#input", Editor).value = COMMAND
    await pilot.press("enter")
    await open_panel(pilot, app)
    panel = app.screen
    assert isinstance(panel, ApprovalPanel)
    return panel


def panel_text(panel: ApprovalPanel) -> str:
    return "\n".join(str(s.render()) for s in panel.query(Static))


async def test_a_sentence_typed_while_an_approval_waits_is_a_queued_message(
    daemon: ControlPlane, other: WebSocketSessionPort
) -> None:
    app = app_for(daemon, ASK_BASH)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        app.query_one("#input", Editor).value = COMMAND
        await pilot.press("enter")
        await until(pilot, lambda: "waiting for approval" in status_text(app), "asked")
        sentence = "also check item 1 please, then 3 and 2"
        await pilot.press(*[_KEY_OF.get(c, c) for c in sentence])  # typed, key by key
        await pilot.press("enter")
        await until(pilot, lambda: len(list(app.query(UserBlock))) == 2, "the message shown")
        assert not isinstance(app.screen, ApprovalPanel)
        said = [b.text for b in app.query(UserBlock)]
        assert said[-1] == sentence
        await until(pilot, lambda: len(app.waiting_for) == 2, "the message queued")
        snapshot = await other.snapshot(app.session)
        assert [p.tool for p in snapshot.pending_approvals] == ["bash"]
        assert [c.state for c in app.query(ToolCardView)] == ["running"]
        assert app.query_one("#input", Editor).has_focus
        assert app.query_one("#input", Editor).text == ""
        await pilot.press("tab", "4")
        await until(pilot, lambda: not app.waiting_for, "both runs ended")


async def test_the_explicit_key_opens_the_panel_and_1_approves_once(daemon: ControlPlane) -> None:
    app = app_for(daemon, ASK_BASH)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        app.query_one("#input", Editor).value = COMMAND
        await pilot.press("enter")
        await until(pilot, lambda: app.panel is not None, "asked")
        assert not isinstance(app.screen, ApprovalPanel)
        assert app.query_one("#input", Editor).has_focus
        assert "Tab to answer" in str(app.query_one("#approval-waiting", Static).render())
        await pilot.press("tab")
        await until(pilot, lambda: isinstance(app.screen, ApprovalPanel), "the panel")
        await pilot.press("1")
        await until(pilot, lambda: not app.waiting_for, "the run ended")
        assert [c.state for c in app.query(ToolCardView)] == ["ok"]
        assert app.query_one("#input", Editor).has_focus


async def test_always_is_granted_only_after_a_second_press(daemon: ControlPlane) -> None:
    app = app_for(daemon, ASK_BASH)
    async with app.run_test(size=(80, 24)) as pilot:
        panel = await ask_bash(pilot, app)
        await pilot.press("3")
        await pilot.pause()
        assert app.screen is panel, "3 alone grants nothing"
        assert "press 3 again" in panel_text(panel)
        await pilot.press("x")  # any other key takes the confirmation back
        await pilot.pause()
        assert app.screen is panel
        assert "press 3 again" not in panel_text(panel)
        await pilot.press("3", "3")
        await until(pilot, lambda: not app.waiting_for, "the run ended")
        assert [c.state for c in app.query(ToolCardView)] == ["ok"]
        # The grant covers the same command from now on, in another session too: it runs
        # without asking.
        first = app.session
        app.query_one("#input", Editor).value = "/new"
        await pilot.press("enter")
        await until(pilot, lambda: app.session != first, "a new session")
        app.query_one("#input", Editor).value = COMMAND
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.query(ToolCardView)), "the second call")
        await until(pilot, lambda: not app.waiting_for, "the second run ended")
        assert [c.state for c in app.query(ToolCardView)] == ["ok"]
        assert app.panel is None


async def test_the_panel_says_what_each_grant_covers(daemon: ControlPlane) -> None:
    app = app_for(daemon, ASK_BASH)
    async with app.run_test(size=(100, 24)) as pilot:
        panel = await ask_bash(pilot, app)
        shown = panel_text(panel)
        assert "1 once: this call only" in shown
        assert "2 this session: bash `echo approved-ran` exactly" in shown
        assert "3 always: bash `echo approved-ran` exactly, in every session" in shown
        await pilot.press("4")
        await until(pilot, lambda: not app.waiting_for, "the run ended")


async def test_editing_keys_stay_the_editors_while_an_approval_waits(
    daemon: ControlPlane, other: WebSocketSessionPort
) -> None:
    app = app_for(daemon, ASK_BASH)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        editor = app.query_one("#input", Editor)
        editor.value = COMMAND
        await pilot.press("enter")
        await until(pilot, lambda: app.panel is not None, "asked")
        editor.value = "item"
        await pilot.press("ctrl+a", "1", "space")  # line start, then typing
        assert editor.text == "1 item"
        editor.value = "/mo"
        await pilot.press("tab")  # a shown completion takes Tab
        assert editor.text == "/model"
        assert not isinstance(app.screen, ApprovalPanel)
        editor.value = ""
        await pilot.press("tab")
        await until(pilot, lambda: isinstance(app.screen, ApprovalPanel), "the panel")
        await pilot.press("tab")  # back to the editor, still waiting
        await until(pilot, lambda: not isinstance(app.screen, ApprovalPanel), "back")
        assert editor.has_focus
        assert [p.tool for p in (await other.snapshot(app.session)).pending_approvals] == ["bash"]
        assert "waiting for approval" in status_text(app)
        await pilot.press("tab", "1")
        await until(pilot, lambda: not app.waiting_for, "the run ended")
        assert [c.state for c in app.query(ToolCardView)] == ["ok"]
        assert not app.query_one("#approval-waiting", Static).display
