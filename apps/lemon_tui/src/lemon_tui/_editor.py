"""The message editor: multi-line, with input history, reverse search and command completion.

Keys, and what terminals deliver for them: Enter arrives as ``\\r`` everywhere and sends.
Shift+Enter is told apart from Enter only by terminals that speak the kitty keyboard protocol
(kitty, WezTerm, foot, Ghostty, iTerm2 3.5+, recent Alacritty; Textual turns it on), where it
arrives as ``shift+enter``; elsewhere (xterm, tmux, most VTE terminals) it *is* ``\\r``. So a
newline also comes from keys every terminal delivers distinctly: Ctrl+J (``\\n``) and a ``\\``
typed at the end of the line before Enter (both checked in tmux); Alt+Enter too where it
arrives as ``alt+enter`` (in tmux it arrives as Enter and sends). A paste arrives as one
bracketed paste and stays one message, indentation and newlines kept.

Up on the first line and Down on the last walk the history (what was being typed is kept and
comes back at the bottom); Ctrl+R opens the search over it. While the text is the start of a
slash command, the rest of the first match is shown after the cursor and the matches are
listed above; Tab (or Right) takes it, Tab again moves to the next match.
"""

from __future__ import annotations

import json
import os
from collections import deque
from pathlib import Path
from typing import ClassVar, Final

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from lemon_tui._commands import Command, complete
from lemon_tui._text import escape

__all__ = ["CommandHints", "Editor", "HistorySearch", "InputHistory"]

_HISTORY: Final = 500
_NEWLINE_KEYS: Final = frozenset({"shift+enter", "ctrl+j", "alt+enter", "ctrl+enter"})


class InputHistory:
    """What was sent, oldest first (at most ``bound`` entries; an immediate repeat is kept
    once). A cursor walks it for Up/Down; :meth:`reset` puts the cursor after the newest.

    With ``path`` it is kept in that file across runs: one JSON string per line, appended as
    entries come, created owner-only (0600: what is typed may be private), rewritten with the
    last ``bound`` entries when it holds twice as many. A file that cannot be read or written
    leaves the history in memory only; a line that is not a JSON string is skipped."""

    def __init__(self, bound: int = _HISTORY, path: Path | None = None) -> None:
        self.entries: deque[str] = deque(maxlen=bound)
        self._at: int | None = None  # index being shown; None: the draft
        self._draft = ""
        self._path = path
        self._lines = 0
        if path is not None:
            self._load(path)

    def _load(self, path: Path) -> None:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            return
        self._lines = len(lines)
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, str) and entry:
                self.entries.append(entry)

    def add(self, text: str) -> None:
        if text and (not self.entries or self.entries[-1] != text):
            self.entries.append(text)
            self._keep(text)
        self.reset()

    def _keep(self, text: str) -> None:
        path = self._path
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if self._lines + 1 >= 2 * (self.entries.maxlen or _HISTORY):
                body = "".join(json.dumps(e) + "\n" for e in self.entries)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                self._lines = len(self.entries)
            else:
                body = json.dumps(text) + "\n"
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                self._lines += 1
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(body)
        except OSError:
            self._path = None  # the history stays in memory only

    def reset(self) -> None:
        self._at = None
        self._draft = ""

    def older(self, current: str) -> str | None:
        """The entry before the one shown (``current`` is kept as the draft the first time);
        ``None`` at the oldest."""
        if not self.entries:
            return None
        if self._at is None:
            self._draft = current
            self._at = len(self.entries) - 1
        elif self._at == 0:
            return None
        else:
            self._at -= 1
        return self.entries[self._at]

    def newer(self) -> str | None:
        """The entry after the one shown, the draft after the newest; ``None`` when not
        walking the history."""
        if self._at is None:
            return None
        if self._at >= len(self.entries) - 1:
            draft = self._draft
            self.reset()
            return draft
        self._at += 1
        return self.entries[self._at]

    def search(self, query: str) -> list[str]:
        """Entries containing ``query`` (case-insensitive), newest first, each once."""
        needle = query.lower()
        seen: set[str] = set()
        found: list[str] = []
        for entry in reversed(self.entries):
            if needle in entry.lower() and entry not in seen:
                seen.add(entry)
                found.append(entry)
        return found


class CommandHints(Static):
    """The commands the editor's text could become, one line, shown above the editor."""

    DEFAULT_CSS = """
    CommandHints { height: auto; max-height: 3; padding: 0 1; color: $text-muted; display: none; }
    CommandHints.-shown { display: block; }
    """

    def show(self, matches: list[Command], chosen: int) -> None:
        if not matches:
            self.remove_class("-shown")
            return
        parts = []
        for i, c in enumerate(matches):
            label = f"{c.name} {c.arg}".strip()
            parts.append(f"[reverse]{escape(label)}[/]" if i == chosen else escape(label))
        says = matches[min(chosen, len(matches) - 1)].says
        self.update(" ".join(parts) + f"  [dim]· {escape(says)}[/]")
        self.add_class("-shown")


class Editor(TextArea):
    """See the module docstring. Posts :class:`Editor.Submitted` on Enter."""

    DEFAULT_CSS = """
    Editor { height: auto; min-height: 3; max-height: 12; border: round $primary 50%; }
    Editor:focus { border: round $primary; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "older", "history", show=False),
        Binding("down", "newer", "history", show=False),
        Binding("tab", "take_completion", "complete", show=False),
    ]

    class Submitted(Message):
        """Enter was pressed: ``value`` is the whole text (the editor is not cleared)."""

        def __init__(self, editor: Editor, value: str) -> None:
            super().__init__()
            self.editor = editor
            self.value = value

        @property
        def control(self) -> Editor:
            return self.editor

    def __init__(
        self, *, id: str | None = None, placeholder: str = "", history: Path | None = None
    ) -> None:
        super().__init__(
            id=id,
            soft_wrap=True,
            tab_behavior="focus",
            show_line_numbers=False,
            highlight_cursor_line=False,
            placeholder=placeholder,
        )
        self.sent_history = InputHistory(path=history)
        self.matches: list[Command] = []
        self.chosen = 0
        self.hints: CommandHints | None = None

    @property
    def value(self) -> str:
        return self.text

    @value.setter
    def value(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)

    # -- keys ------------------------------------------------------------------------------------

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            row, column = self.cursor_location
            if column > 0 and self.document[row][column - 1] == "\\":
                # A trailing backslash continues the message on a new line (every terminal).
                self.replace("\n", (row, column - 1), (row, column))
                return
            self.post_message(self.Submitted(self, self.text))
            return
        if event.key in _NEWLINE_KEYS:
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        await super()._on_key(event)

    def action_older(self) -> None:
        if self.cursor_location[0] > 0:
            self.action_cursor_up()
            return
        entry = self.sent_history.older(self.text)
        if entry is not None:
            self.value = entry

    def action_newer(self) -> None:
        if self.cursor_location[0] < self.document.line_count - 1:
            self.action_cursor_down()
            return
        entry = self.sent_history.newer()
        if entry is not None:
            self.value = entry

    def action_take_completion(self) -> None:
        """Tab: take the shown completion; pressed again, move to the next match."""
        if not self.matches:
            return
        name = self.matches[self.chosen].name
        if self.text == name or (self.text + self.suggestion) != name:
            self.chosen = (self.chosen + 1) % len(self.matches) if self.text == name else 0
            name = self.matches[self.chosen].name
        self.value = name
        self._show_matches()

    # -- completion ------------------------------------------------------------------------------

    def update_suggestion(self) -> None:
        """Textual's hook after each edit: the rest of the chosen command, and the list."""
        matches = complete(self.text)
        if [c.name for c in matches] != [c.name for c in self.matches]:
            self.chosen = 0
        self.matches = matches
        self._show_matches()

    def _show_matches(self) -> None:
        if self.matches:
            name = self.matches[min(self.chosen, len(self.matches) - 1)].name
            self.suggestion = name[len(self.text) :] if name.startswith(self.text) else ""
        else:
            self.suggestion = ""
        if self.hints is not None:
            self.hints.show(self.matches, self.chosen)

    def sent(self, text: str) -> None:
        """The text was taken (sent or run): remember it and start afresh."""
        self.sent_history.add(text)
        self.value = ""


class HistorySearch(ModalScreen[str | None]):
    """Ctrl+R: type to filter the history (newest first); Enter takes the highlighted entry,
    Ctrl+R moves to the next older match, Esc leaves the editor as it was."""

    DEFAULT_CSS = """
    HistorySearch { align: center bottom; }
    HistorySearch > Vertical {
        width: 100%; height: auto; max-height: 16; border: round $accent; background: $surface;
    }
    HistorySearch OptionList { height: auto; max-height: 12; border: none; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_none", "cancel"),
        Binding("ctrl+r", "next_match", "older", priority=True),
        Binding("down", "move(1)", show=False, priority=True),
        Binding("up", "move(-1)", show=False, priority=True),
    ]

    def __init__(self, history: InputHistory, query: str = "") -> None:
        super().__init__()
        self.sent_history = history
        self.query_text = query
        self.found: list[str] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("[b]history search[/] · Enter takes · Ctrl+R older · Esc cancels")
            yield Input(value=self.query_text, placeholder="search", id="history-query")
            yield OptionList(id="history-found")

    def on_mount(self) -> None:
        self._refresh(self.query_text)
        self.query_one("#history-query", Input).focus()

    def on_input_changed(self, message: Input.Changed) -> None:
        self._refresh(message.value)

    def _refresh(self, query: str) -> None:
        self.found = self.sent_history.search(query)
        box = self.query_one("#history-found", OptionList)
        box.clear_options()
        box.add_options(Option(escape(entry.replace("\n", " ⏎ ")[:200])) for entry in self.found)
        if self.found:
            box.highlighted = 0

    def on_input_submitted(self, message: Input.Submitted) -> None:
        message.stop()
        box = self.query_one("#history-found", OptionList)
        index = box.highlighted
        self.dismiss(self.found[index] if index is not None and self.found else None)

    def on_option_list_option_selected(self, message: OptionList.OptionSelected) -> None:
        self.dismiss(self.found[message.option_index])

    def action_next_match(self) -> None:
        self.action_move(1)

    def action_move(self, by: int) -> None:
        box = self.query_one("#history-found", OptionList)
        if self.found:
            box.highlighted = ((box.highlighted or 0) + by) % len(self.found)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
