"""The editor against a real daemon: Enter sends, Shift+Enter / Ctrl+J / Alt+Enter / a trailing
backslash add a line, a paste stays one message with its indentation, Up/Down walk the
history, Ctrl+R searches it, and slash commands complete."""

from __future__ import annotations

import stat
from pathlib import Path

from textual import events

from lemon_control_plane import ControlPlane
from lemon_tui._editor import CommandHints, Editor, HistorySearch, InputHistory
from lemon_tui._widgets import AnswerBlock, NoteLine, UserBlock

from .conftest import app_for, until


def sent(app: object) -> list[str]:
    from lemon_tui import LemonTUI

    assert isinstance(app, LemonTUI)
    return [u.text for u in app.query(UserBlock)]


async def test_newline_keys_build_one_multi_line_message(daemon: ControlPlane) -> None:
    app = app_for(daemon)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        editor = app.query_one("#input", Editor)
        await pilot.press(*"/echo a", "shift+enter", "b", "ctrl+j", "c", "alt+enter", "d")
        await pilot.press(*"\\", "enter", "e")
        assert editor.text == "/echo a\nb\nc\nd\ne"
        assert not app.query(UserBlock)  # nothing was sent yet
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.query(AnswerBlock)), "the answer")
        assert sent(app) == ["/echo a\nb\nc\nd\ne"]
        await until(pilot, lambda: app.query_one(AnswerBlock).sealed == "ok", "sealed")
        assert app.query_one(AnswerBlock).text == "a\nb\nc\nd\ne"
        assert editor.text == ""


async def test_a_paste_stays_one_message_with_its_indentation(daemon: ControlPlane) -> None:
    app = app_for(daemon)
    pasted = "def f():\n    return 1\n\n        deeper\n"
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        editor = app.query_one("#input", Editor)
        app.post_message(events.Paste(pasted))  # as the driver delivers it
        await until(pilot, lambda: editor.text == pasted, "pasted")
        assert not app.query(UserBlock)
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.query(UserBlock)), "sent")
        assert sent(app) == [pasted.rstrip()]


async def test_up_and_down_walk_the_history_and_keep_the_draft(daemon: ControlPlane) -> None:
    app = app_for(daemon)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        editor = app.query_one("#input", Editor)
        for line in ("/echo one", "/echo two"):
            editor.value = line
            await pilot.press("enter")
            await until(pilot, lambda: not app.waiting_for and editor.text == "", "sent")
        await pilot.press(*"draft")
        await pilot.press("up")
        assert editor.text == "/echo two"
        await pilot.press("up")
        assert editor.text == "/echo one"
        await pilot.press("up")
        assert editor.text == "/echo one"  # the oldest stays
        await pilot.press("down")
        assert editor.text == "/echo two"
        await pilot.press("down")
        assert editor.text == "draft"


async def test_up_moves_inside_a_multi_line_text_before_the_history(
    daemon: ControlPlane,
) -> None:
    app = app_for(daemon)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        editor = app.query_one("#input", Editor)
        editor.sent_history.add("older entry")
        await pilot.press("x", "ctrl+j", "y")
        await pilot.press("up")
        assert editor.text == "x\ny"
        assert editor.cursor_location[0] == 0
        await pilot.press("up")
        assert editor.text == "older entry"


async def test_ctrl_r_finds_an_earlier_message(daemon: ControlPlane) -> None:
    app = app_for(daemon)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        editor = app.query_one("#input", Editor)
        for line in ("/echo alpha one", "/echo beta", "/echo alpha two"):
            editor.sent_history.add(line)
        await pilot.press("ctrl+r")
        await until(pilot, lambda: isinstance(app.screen, HistorySearch), "the search")
        await pilot.press(*"alpha")
        search = app.screen
        assert isinstance(search, HistorySearch)
        assert search.found == ["/echo alpha two", "/echo alpha one"]
        await pilot.press("ctrl+r")  # the next older match
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, HistorySearch), "closed")
        assert editor.text == "/echo alpha one"
        assert editor.has_focus
        await pilot.press("ctrl+r", "escape")
        assert editor.text == "/echo alpha one"  # Esc keeps what was there


async def test_slash_completes_commands(daemon: ControlPlane) -> None:
    app = app_for(daemon)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        editor = app.query_one("#input", Editor)
        hints = app.query_one(CommandHints)
        await pilot.press("/")
        assert hints.has_class("-shown")
        assert "/model" in str(hints.render())
        await pilot.press("m", "o")
        assert [c.name for c in editor.matches] == ["/model"]
        assert editor.suggestion == "del"
        await pilot.press("tab")
        assert editor.text == "/model"
        await pilot.press("ctrl+a", "ctrl+k")  # clear
        await pilot.press("/", "h", "e")
        await pilot.press("enter")  # Enter on a unique start runs the command
        await until(pilot, lambda: "/history" in _notes(app), "the help")
        assert editor.text == ""
        await pilot.press("/", "r", "e", "s")
        await pilot.press("enter")  # a command with an argument waits for it
        assert editor.text == "/resume "
        assert not hints.has_class("-shown")


def _notes(app: object) -> str:
    from lemon_tui import LemonTUI

    assert isinstance(app, LemonTUI)
    return "\n".join(str(n.render()) for n in app.query(NoteLine))


def test_history_is_bounded_and_keeps_one_of_a_repeat() -> None:
    history = InputHistory(bound=3)
    for entry in ("a", "b", "b", "c", "d"):
        history.add(entry)
    assert list(history.entries) == ["b", "c", "d"]
    assert history.older("draft") == "d"
    assert history.newer() == "draft"
    assert history.newer() is None
    assert history.search("") == ["d", "c", "b"]


def test_history_is_kept_in_a_private_file_across_runs(tmp_path: Path) -> None:
    path = tmp_path / "tui" / "history.jsonl"
    first = InputHistory(bound=3, path=path)
    for entry in ("one", "two\nlines", "three"):
        first.add(entry)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = InputHistory(bound=3, path=path)
    assert list(again.entries) == ["one", "two\nlines", "three"]
    for entry in ("four", "five", "six"):  # 6 lines: rewritten with the last 3
        again.add(entry)
    assert len(path.read_text().splitlines()) == 3
    with path.open("a") as out:
        out.write("not json\n7\n")
    assert list(InputHistory(bound=3, path=path).entries) == ["four", "five", "six"]


def test_an_unwritable_history_file_keeps_the_history_in_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    history = InputHistory(path=blocker / "history.jsonl")  # under a file: cannot be made
    history.add("still kept")
    assert list(history.entries) == ["still kept"]
