"""Tool cards keyed by action id: started → completed, or sealed when the run ends open."""

from __future__ import annotations

from lemon_control_plane import ControlPlane
from lemon_core.execution import ToolPolicy
from lemon_tui._diff import diff_markup, diff_stat, tool_diff
from lemon_tui._editor import Editor
from lemon_tui._widgets import ApprovalPanel, ToolCardView

from .conftest import NO_APPROVALS, app_for, open_panel, until


async def test_a_tool_call_is_one_card_from_start_to_completion(daemon: ControlPlane) -> None:
    app = app_for(daemon, NO_APPROVALS)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        app.query_one("#input", Editor).value = '/tool bash {"command": "echo card-output"}'
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.query(ToolCardView)), "a card")
        card = app.query_one(ToolCardView)
        await until(pilot, lambda: card.state != "running", "the card completed")
        await until(pilot, lambda: not app.waiting_for, "the run ended")
        assert card.state == "ok"
        assert "card-output" in card.message
        assert len(app.query(ToolCardView)) == 1
        assert "✓" in str(card.render())


async def test_a_card_open_when_the_run_is_aborted_is_sealed(daemon: ControlPlane) -> None:
    app = app_for(daemon, NO_APPROVALS)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        app.query_one("#input", Editor).value = '/tool bash {"command": "sleep 30"}'
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.query(ToolCardView)), "a card")
        card = app.query_one(ToolCardView)
        assert card.state == "running"
        await pilot.press("ctrl+c")
        await until(pilot, lambda: not app.waiting_for, "the run ended")
        assert card.state in ("cancelled", "failed")
        assert "…" not in str(card.render()).split("\n")[0]


async def test_a_command_card_shows_its_exit_code_and_unfolds_its_output(
    daemon: ControlPlane,
) -> None:
    app = app_for(daemon, NO_APPROVALS)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        command = "printf 'line-1\\nline-2\\nline-3\\n'; exit 3"
        app.query_one("#input", Editor).value = f'/tool bash {{"command": "{command}"}}'
        await pilot.press("enter")
        await until(pilot, lambda: not app.waiting_for and bool(app.query(ToolCardView)), "ran")
        card = app.query_one(ToolCardView)
        assert card.state == "failed"
        assert card.exit_code == 3
        folded = str(card.render())
        assert "exit 3" in folded
        assert "▸" in folded
        assert len(folded.splitlines()) == 2  # title and one clipped line
        await pilot.press("ctrl+t")
        unfolded = str(card.render())
        assert card.expanded
        assert [x for x in unfolded.splitlines() if x.startswith("line-")] == [
            "line-1",
            "line-2",
            "line-3",
        ]
        await pilot.click(ToolCardView)
        assert not card.expanded


async def test_edit_and_write_cards_carry_a_diff_shown_in_the_approval_panel(
    daemon: ControlPlane,
) -> None:
    app = app_for(daemon, ToolPolicy(require_approval=frozenset({"edit"})))
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        editor = app.query_one("#input", Editor)
        editor.value = '/tool write {"path": "notes.txt", "content": "hi\\nthere\\n"}'
        await pilot.press("enter")
        await until(pilot, lambda: not app.waiting_for and bool(app.query(ToolCardView)), "ran")
        written = app.query_one(ToolCardView)
        assert written.state == "ok"
        assert "+2 -0" in str(written.render())
        editor.value = '/tool edit {"path": "notes.txt", "old_text": "hi", "new_text": "hello"}'
        await pilot.press("enter")
        await open_panel(pilot, app)
        panel = app.screen
        assert isinstance(panel, ApprovalPanel)
        assert panel.diff is not None
        assert "-hi" in panel.diff
        assert "+hello" in panel.diff
        await pilot.press("1")
        await until(pilot, lambda: not app.waiting_for, "the run ended")
        edited = list(app.query(ToolCardView))[-1]
        assert edited.state == "ok"
        assert "+1 -1" in str(edited.render())
        await pilot.press("ctrl+t")
        shown = str(edited.render()).splitlines()
        assert "-hi" in shown
        assert "+hello" in shown


def test_diffs_of_edit_and_write_arguments() -> None:
    edit = {"tool": "edit", "arguments": {"path": "f.py", "old_text": "a\nb", "new_text": "a\nc"}}
    lines = tool_diff(edit)
    assert lines is not None
    assert lines[:2] == ["--- a/f.py", "+++ b/f.py"]
    assert "-b" in lines
    assert "+c" in lines
    assert diff_stat(lines) == "+1 -1"
    write = {"tool": "write", "arguments": {"path": "n.txt", "content": "x\n[y]\n"}}
    lines = tool_diff(write)
    assert lines is not None
    assert diff_stat(lines) == "+2 -0"
    assert "[y]" in diff_markup(lines).replace("\\[", "[")
    assert tool_diff({"tool": "bash", "arguments": {"command": "ls"}}) is None
    assert tool_diff({"tool": "edit", "arguments": {"path": 3}}) is None
