"""The pieces of the screen: transcript blocks, tool cards, the approval panel, the status line."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Markdown, Static

from lemon_core.events import ApprovalDecision
from lemon_core.sessions import ApprovalAsked

__all__ = ["AnswerBlock", "ApprovalPanel", "NoteLine", "StatusLine", "ToolCardView", "UserBlock"]

_SHOWN: Final = 200


def escape(text: str) -> str:
    """``text`` shown as itself inside markup. Textual's own ``escape`` leaves ``[N]`` (an
    upper-case start) alone, which its parser then drops as a tag; every ``[`` is escaped
    here, so a model's answer or a command's output can never style or link anything."""
    return text.replace("[", "\\[")


def clip(text: str, limit: int = _SHOWN) -> str:
    """One line of at most ``limit`` characters (``…`` when cut)."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


class UserBlock(Static):
    """What the person typed."""

    DEFAULT_CSS = """
    UserBlock { margin: 1 0 0 0; padding: 0 1; border-left: thick $accent; }
    """

    def __init__(self, text: str, *, note: str = "") -> None:
        super().__init__()
        self.text = text
        self.note = note
        self.set_note(note)

    def set_note(self, note: str) -> None:
        """Say what became of the message (queued, steering, waiting: offline)."""
        self.note = note
        self.update(escape(self.text) + (f" [dim]({escape(note)})[/]" if note else ""))


class NoteLine(Static):
    """A dim line from the client (a command's answer, a warning)."""

    DEFAULT_CSS = "NoteLine { color: $text-muted; padding: 0 1; }"


class AnswerBlock(Markdown):
    """One assistant answer, rendered as Markdown while it streams; sealed at the run's end."""

    DEFAULT_CSS = "AnswerBlock { margin: 1 0 0 0; padding: 0 1; }"

    def __init__(self) -> None:
        super().__init__("")
        self.text = ""
        self.sealed: str | None = None  # None while streaming; else "ok" / "cancelled" / ...

    def append_text(self, piece: str) -> None:
        self.text += piece
        self.update(self.text)

    def replace_text(self, text: str) -> None:
        """The authority's text (a snapshot): what was shown is replaced, never extended."""
        self.text = text
        self.update(text)


class ToolCardView(Static):
    """A tool call keyed by its action id: started → completed (✓ / ✗ and the message)."""

    DEFAULT_CSS = """
    ToolCardView { margin: 0 0 0 2; padding: 0 1; border: round $secondary; height: auto; }
    """

    def __init__(self, action_id: str, title: str) -> None:
        super().__init__(classes="card")
        self.action_id = action_id
        self.title = title
        self.state = "running"  # running / ok / failed / cancelled
        self.message = ""
        self._paint()

    def complete(self, ok: bool | None, message: str | None) -> None:
        self.state = "ok" if ok else "failed"
        self.message = message or ""
        self._paint()

    def seal(self, state: str) -> None:
        """The run ended with this card open: it is shown as ``state``, never spinning."""
        if self.state == "running":
            self.state = state
            self._paint()

    def _paint(self) -> None:
        mark = {
            "running": "[yellow]…[/]",
            "ok": "[green]✓[/]",
            "failed": "[red]✗[/]",
        }.get(self.state, "[red]✗[/]")
        label = "" if self.state in ("running", "ok", "failed") else f" [dim]{self.state}[/]"
        body = f"\n[dim]{escape(clip(self.message))}[/]" if self.message else ""
        self.update(f"{mark} [b]{escape(self.title)}[/]{label}{body}")


def question(tool: str, action: dict[str, Any] | None) -> str:
    """The approval question in one line: the command for bash, the path for write/edit."""
    given = action or {}
    args = given.get("arguments", given)
    if not isinstance(args, dict):
        args = {"action": args}
    if tool == "bash":
        argv = args.get("argv")
        if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
            command = shlex.join(argv)  # as the shell would show it
        else:
            command = str(args.get("command", ""))
        if command:
            return f"Allow bash: {clip(command)} ?"
    if tool in ("write", "edit") and isinstance(args.get("path"), str):
        return f"Allow {tool} to {clip(args['path'])} ?"
    compact = " ".join(f"{k}={v!r}" for k, v in args.items())
    return f"Allow {tool} {clip(compact)}?" if compact else f"Allow {tool}?"


class ApprovalPanel(ModalScreen[ApprovalDecision | None]):
    """Takes focus; 1 once, 2 session, 3 always, 4 or Esc deny. Dismissed with ``None``
    when the approval ended elsewhere."""

    DEFAULT_CSS = """
    ApprovalPanel { align: center middle; }
    ApprovalPanel > Vertical {
        width: 76; height: auto; padding: 1 2; border: thick $warning; background: $surface;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "decide('approve_once')", "once"),
        Binding("2", "decide('approve_session')", "session"),
        Binding("3", "decide('approve_global')", "always"),
        Binding("4", "decide('deny')", "deny"),
        Binding("escape", "decide('deny')", "deny"),
    ]

    def __init__(self, asked: ApprovalAsked) -> None:
        super().__init__()
        self.asked = asked

    def compose(self) -> ComposeResult:
        asked = self.asked
        with Vertical():
            yield Static(f"[b]approval[/] · tool [b]{escape(asked.tool)}[/]", id="approval-tool")
            yield Static(escape(question(asked.tool, asked.action)), id="approval-question")
            if asked.rationale:
                yield Static(f"[dim]{escape(clip(asked.rationale))}[/]")
            yield Static("[b]1[/] once · [b]2[/] session · [b]3[/] always · [b]4[/]/Esc deny")

    def action_decide(self, value: str) -> None:
        self.dismiss(ApprovalDecision(value))


@dataclass(kw_only=True, slots=True)
class Status:
    connection: str = "connecting"
    session: str = ""
    run: str = "idle"
    queued: int = 0
    usage: str = ""
    model: str | None = None
    gauge: str = ""
    unread: int = 0


class StatusLine(Static):
    """connection · session · model · context gauge · run state · queue · usage."""

    DEFAULT_CSS = "StatusLine { height: 1; background: $panel; padding: 0 1; }"

    def show(self, status: Status) -> None:
        parts = [status.connection, status.session]
        if status.model:
            parts.append(status.model)
        if status.gauge:
            parts.append(status.gauge)
        parts.append(status.run)
        if status.queued:
            parts.append(f"queued {status.queued}")
        if status.usage:
            parts.append(status.usage)
        if status.unread:
            parts.append(f"{status.unread} unread elsewhere (Ctrl+X)")
        self.update(escape(" · ".join(parts)))
