"""The two pickers: the session switcher (Ctrl+X) and the model picker (Ctrl+O). Each is a
modal list with a filter box: type to narrow it, Up/Down to move, Enter to take, Esc to leave."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from lemon_tui._daemon import ModelInfo
from lemon_tui._text import clip, count, escape

__all__ = ["NEW_SESSION", "ModelPicker", "SessionRow", "SessionSwitcher", "age"]

T = TypeVar("T")
NEW_SESSION = "+new"
"""What the switcher returns for its "new session" line."""


def age(updated_at_ms: int, now_ms: int) -> str:
    """How long ago, in one short word: ``now`` (under a minute), ``5m``, ``3h``, ``2d``."""
    if updated_at_ms <= 0:
        return ""
    s = max(0, (now_ms - updated_at_ms) // 1000)
    for size, unit in ((86_400, "d"), (3600, "h"), (60, "m")):
        if s >= size:
            return f"{s // size}{unit}"
    return "now"


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionRow:
    """One line of the switcher (``sessions.list`` with what this client collected)."""

    key: str
    runs: int = 0
    active: bool = False
    updated_at_ms: int = 0
    preview: str = ""
    unread: int = 0
    current: bool = False


class Picker(ModalScreen[T | None], Generic[T]):
    DEFAULT_CSS = """
    Picker { align: center middle; }
    Picker > Vertical {
        width: 90%; max-width: 100; height: auto; max-height: 90%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    Picker OptionList { height: auto; max-height: 16; border: none; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "leave", "cancel"),
        Binding("down", "move(1)", show=False, priority=True),
        Binding("up", "move(-1)", show=False, priority=True),
    ]

    heading = ""

    def __init__(self, items: Sequence[tuple[T, str, str]], *, chosen: T | None = None) -> None:
        """``items``: (value, label markup, filter text)."""
        super().__init__()
        self.items = list(items)
        self.shown: list[T] = []
        self._chosen = chosen

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"[b]{self.heading}[/] · type to filter · Enter takes · Esc leaves")
            yield Input(placeholder="filter", id="picker-filter")
            yield OptionList(id="picker-list")

    def on_mount(self) -> None:
        self._fill("")
        box = self.query_one("#picker-list", OptionList)
        if self._chosen is not None and self._chosen in self.shown:
            box.highlighted = self.shown.index(self._chosen)
        self.query_one("#picker-filter", Input).focus()

    def on_input_changed(self, message: Input.Changed) -> None:
        self._fill(message.value)

    def _fill(self, text: str) -> None:
        needle = text.lower().strip()
        box = self.query_one("#picker-list", OptionList)
        box.clear_options()
        kept = [(v, label) for v, label, key in self.items if needle in key.lower()]
        self.shown = [v for v, _ in kept]
        box.add_options(Option(label) for _, label in kept)
        if kept:
            box.highlighted = 0

    def action_move(self, by: int) -> None:
        box = self.query_one("#picker-list", OptionList)
        if self.shown:
            box.highlighted = ((box.highlighted or 0) + by) % len(self.shown)

    def on_input_submitted(self, message: Input.Submitted) -> None:
        message.stop()
        index = self.query_one("#picker-list", OptionList).highlighted
        self.dismiss(self.shown[index] if index is not None and self.shown else None)

    def on_option_list_option_selected(self, message: OptionList.OptionSelected) -> None:
        self.dismiss(self.shown[message.option_index])

    def action_leave(self) -> None:
        self.dismiss(None)


class SessionSwitcher(Picker[str]):
    """Ctrl+X: the sessions, newest first, with their activity; returns a session key (or
    :data:`NEW_SESSION`)."""

    heading = "sessions"

    def __init__(self, rows: Sequence[SessionRow], *, now: Callable[[], float] = time.time) -> None:
        now_ms = int(now() * 1000)
        items: list[tuple[str, str, str]] = [(NEW_SESSION, "[b]+[/] new session", "new")]
        for r in rows:
            mark = "[b]*[/]" if r.current else " "
            state = " [yellow]running[/]" if r.active else ""
            unread = f" [reverse] {r.unread} new [/]" if r.unread else ""
            when = age(r.updated_at_ms, now_ms)
            preview = f"  [dim]{escape(clip(r.preview, 40))}[/]" if r.preview else ""
            runs = count(r.runs, "run") + (f" · {when}" if when else "")
            label = f"{mark} {escape(r.key)}  [dim]{runs}[/]{state}{unread}{preview}"
            items.append((r.key, label, f"{r.key} {r.preview}"))
        current = next((r.key for r in rows if r.current), None)
        super().__init__(items, chosen=current)


class ModelPicker(Picker[ModelInfo]):
    """Ctrl+O: the daemon's models grouped by provider; returns the one taken."""

    heading = "models"

    def __init__(self, models: Sequence[ModelInfo], *, current: str | None) -> None:
        ordered = sorted(models, key=lambda m: (not m.default, m.provider, m.name))
        items = []
        chosen = None
        for m in ordered:
            mark = "[b]*[/]" if m.ref == current or (current is None and m.default) else " "
            if mark != " ":
                chosen = m
            window = f"  [dim]{m.context_window // 1000:,}k context[/]" if m.context_window else ""
            default = " [dim](default)[/]" if m.default else ""
            label = f"{mark} [b]{escape(m.provider)}[/] {escape(m.name)}{default}{window}"
            items.append((m, label, f"{m.ref} {m.name}"))
        super().__init__(items, chosen=chosen)
