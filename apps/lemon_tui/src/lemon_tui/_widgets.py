"""The pieces of the screen: transcript blocks, tool cards, the approval panel, the status line."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Self

from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Static

from lemon_core.events import ApprovalDecision
from lemon_core.sessions import ApprovalAsked, approval_arguments, approval_command

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
    from rich.measure import Measurement
    from rich.segment import Segment
    from textual.geometry import Region, Size
    from textual.strip import Strip

    from lemon_tui._transcript import Transcript

from lemon_tui._diff import diff_markup, diff_stat, tool_diff
from lemon_tui._tasks import TaskState
from lemon_tui._text import clip, escape
from lemon_tui._webcard import web_lines

_EXIT: Final = re.compile(r"\[exit code (-?\d+)\]\s*$")
_ONE_LINE: Final = 200
_OUTPUT_LINES: Final = 60
_PANEL_DIFF: Final = 200

__all__ = [
    "AnswerBlock",
    "AnswerEntry",
    "ApprovalPanel",
    "CardEntry",
    "Entry",
    "EntryView",
    "NoteEntry",
    "NoteLine",
    "StatusLine",
    "ToolCardView",
    "UserBlock",
    "UserEntry",
]


class Entry:
    """One message of the transcript: its state, kept whether a widget shows it or not (the
    transcript mounts widgets only near the view, ``_transcript``). ``view`` is the widget
    showing it now, if any; ``height`` its last measured height (lines, with its top margin)
    at width ``height_at``."""

    margin_top = 0

    def __init__(self) -> None:
        self.owner: Transcript | None = None
        self.view: EntryView | None = None
        self.height: int | None = None
        self.height_at = 0
        self._estimated: tuple[int, int] | None = None  # (width, estimate)

    def make_view(self) -> EntryView:
        raise NotImplementedError

    def lines(self, width: int) -> int:
        """An estimate of the content's height at ``width`` (until it is measured)."""
        raise NotImplementedError

    def drawn(self, options: ConsoleOptions, dark: bool) -> bool:
        """Whether a widget made now would find the entry drawn (only answers take long)."""
        return True

    def draw_ahead(self, console: Console, options: ConsoleOptions, dark: bool) -> int | None:
        """Draw what a widget made of the entry would draw (see ``AnswerEntry``); the height
        it will take (lines, with its top margin), if that is known from the drawing."""
        return None

    def estimate(self, width: int) -> int:
        """``lines`` plus the top margin, kept until the entry changes (or the width)."""
        if self._estimated is None or self._estimated[0] != width:
            self._estimated = (width, self.margin_top + max(1, self.lines(width)))
        return self._estimated[1]

    def changed(self) -> None:
        self._estimated = None
        view = self.view
        if view is not None:
            view.entry_changed()
        if self.owner is not None:
            self.owner.entry_changed(self)


def _wrapped(text: str, width: int) -> int:
    width = max(1, width)
    return sum(max(1, -(-len(line) // width)) for line in text.splitlines() or [""])


class EntryView(Widget):
    """A widget showing an entry (the base of the transcript's widgets below)."""

    entry: Entry

    def entry_changed(self) -> None:
        raise NotImplementedError

    def bind(self, entry: Entry) -> None:
        """Show ``entry`` instead (one of the same kind: the transcript gives the widget of
        an entry leaving the window to one coming into it)."""
        self.entry = entry
        self.entry_changed()


class UserEntry(Entry):
    margin_top = 1

    def __init__(self, text: str, note: str = "") -> None:
        super().__init__()
        self.text = text
        self.note = note

    def set_note(self, note: str) -> None:
        self.note = note
        self.changed()

    def markup(self) -> str:
        note = self.note
        return escape(self.text) + (f" [dim]({escape(note)})[/]" if note else "")

    def lines(self, width: int) -> int:
        return _wrapped(self.text + f" ({self.note})" * bool(self.note), width - 3)

    def make_view(self) -> UserBlock:
        return UserBlock(entry=self)


class UserBlock(Static, EntryView):
    """What the person typed."""

    DEFAULT_CSS = """
    UserBlock { margin: 1 0 0 0; padding: 0 1; border-left: thick $accent; }
    """

    def __init__(self, text: str = "", *, note: str = "", entry: UserEntry | None = None) -> None:
        self.entry: UserEntry = entry if entry is not None else UserEntry(text, note)
        super().__init__(self.entry.markup())

    @property
    def text(self) -> str:
        return self.entry.text

    @property
    def note(self) -> str:
        return self.entry.note

    def set_note(self, note: str) -> None:
        """Say what became of the message (queued, steering, interrupting)."""
        self.entry.set_note(note)

    def entry_changed(self) -> None:
        self.update(self.entry.markup())


class NoteEntry(Entry):
    def __init__(self, markup: str) -> None:
        super().__init__()
        self.markup = markup

    def lines(self, width: int) -> int:
        return _wrapped(self.markup, width - 2)

    def make_view(self) -> NoteLine:
        return NoteLine(entry=self)


class NoteLine(Static, EntryView):
    """A dim line from the client (a command's answer, a warning)."""

    DEFAULT_CSS = "NoteLine { color: $text-muted; padding: 0 1; }"

    def __init__(self, markup: str = "", *, entry: NoteEntry | None = None) -> None:
        self.entry: NoteEntry = entry if entry is not None else NoteEntry(markup)
        super().__init__(self.entry.markup)

    def entry_changed(self) -> None:
        self.update(self.entry.markup)


_LEXER: list[object] = []
_DRAWN_KEPT: Final = 64  # answers whose drawn lines are kept (the most recently drawn)
_DRAWN: dict[AnswerEntry, None] = {}


def _text_lexer() -> object:
    """Pygments' plain-text lexer, made once: Rich's Markdown looks its name up again for
    every inline code span (``get_lexer_by_name``, a quarter of an answer's drawing); Rich's
    ``Syntax`` takes a lexer as well as a name, with the same result (it is the lexer
    ``Syntax`` makes for the name)."""
    if not _LEXER:
        from rich.syntax import Syntax

        _LEXER.append(Syntax("", "text").lexer)  # the lexer Rich makes for the name
    return _LEXER[0]


class _Drawn:
    """A Rich renderable drawn once per width: Textual renders an answer to measure its
    height, then again to paint it, and a widget made again for an answer shown before (the
    virtual transcript) draws the lines it drew, without rendering the Markdown again."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable
        self._key: tuple[object, ...] | None = None
        self._lines: list[list[Segment]] = []

    def drawn(self, options: ConsoleOptions) -> bool:
        """Whether the lines for ``options`` are drawn (kept from the last draw)."""
        return self._key == (options.max_width, options.justify, options.overflow, options.no_wrap)

    def draw(self, console: Console, options: ConsoleOptions) -> list[list[Segment]]:
        """The lines at ``options`` (drawn now if they are not kept)."""
        key = (options.max_width, options.justify, options.overflow, options.no_wrap)
        if key != self._key:
            self._lines = console.render_lines(
                self.renderable, options.update(height=None), pad=False, new_lines=False
            )
            self._key = key
        return self._lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.segment import Segment

        self.draw(console, options)
        new_line = Segment.line()
        for line in self._lines:
            yield from line
            yield new_line

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        from rich.measure import Measurement

        return Measurement.get(console, options, self.renderable)


class AnswerEntry(Entry):
    """One assistant answer: its Markdown text and how it ended (``sealed``)."""

    margin_top = 1

    def __init__(self, text: str = "") -> None:
        super().__init__()
        self.text = text
        self._sealed: str | None = None
        self._drawn: tuple[str, str | None, bool] | None = None
        self._renderable: RenderableType = ""
        # What a widget made of it drew last (kept while the entry is among the answers
        # drawn last, so a widget made again for it draws nothing): its content height at a
        # width, and its lines (Textual strips) at a size and style.
        self._height: tuple[tuple[object, ...], int] | None = None
        self._strips: tuple[tuple[object, ...], list[Strip]] | None = None

    @property
    def sealed(self) -> str | None:
        return self._sealed

    @sealed.setter
    def sealed(self, state: str | None) -> None:
        self._sealed = state
        self.changed()

    def append_text(self, piece: str) -> None:
        self.text += piece
        self.changed()

    def replace_text(self, text: str) -> None:
        self.text = text
        self.changed()

    def lines(self, width: int) -> int:
        extra = 1 if self._sealed not in (None, "ok") else 0
        return _wrapped(self.text, width - 2) + extra

    def renderable(self, dark: bool) -> RenderableType:
        """Rich's Markdown of the text, parsed again only when the text (or shade) changed."""
        key = (self.text, self._sealed, dark)
        if key != self._drawn:
            from rich.console import Group
            from rich.markdown import Markdown
            from rich.text import Text

            theme = "monokai" if dark else "friendly"  # code blocks and inline code alike
            body = Markdown(
                self.text,
                code_theme=theme,
                inline_code_lexer=_text_lexer(),  # type: ignore[arg-type]  # Syntax takes one
                inline_code_theme=theme,
            )
            if self._sealed not in (None, "ok"):
                self._renderable = _Drawn(
                    Group(body, Text(f"({self._sealed})", style="dim italic"))
                )
            else:
                self._renderable = _Drawn(body)
            self._drawn = key
        _DRAWN.pop(self, None)
        _DRAWN[self] = None
        while len(_DRAWN) > _DRAWN_KEPT:
            oldest = next(iter(_DRAWN))
            del _DRAWN[oldest]
            if oldest.view is None:  # drawn again if it comes back into view
                oldest._drawn, oldest._renderable = None, ""
                oldest._height = oldest._strips = None
        return self._renderable

    def drawn(self, options: ConsoleOptions, dark: bool) -> bool:
        """Whether a widget made now would find this answer drawn at ``options``."""
        drawn = self._renderable
        return (
            self._drawn == (self.text, self._sealed, dark)
            and isinstance(drawn, _Drawn)
            and drawn.drawn(options)
        )

    def draw_ahead(self, console: Console, options: ConsoleOptions, dark: bool) -> int | None:
        """Draw the answer now (parse its Markdown, render its lines at ``options``), before
        it comes into view: the transcript does it while idle, after a frame, so that the
        frame bringing it into view does not wait for it. Its widget is as tall as its lines
        (``AnswerBlock`` has no vertical padding or border), below its top margin."""
        drawn = self.renderable(dark)
        if isinstance(drawn, _Drawn):
            return self.margin_top + len(drawn.draw(console, options))
        return None

    def make_view(self) -> AnswerBlock:
        return AnswerBlock(entry=self)


class AnswerBlock(EntryView):
    """One assistant answer, rendered as Markdown (code highlighted) while it streams; sealed
    at the run's end, with a word when it did not end well (cancelled, interrupted...).

    One widget per answer, drawn from Rich's Markdown renderable: parsed when a frame is
    drawn, not on every delta (a burst of deltas costs one parse per frame), and cheap to keep
    by the hundred in a long transcript (Textual's Markdown widget is a tree of widgets per
    answer: 400 of them took 45 s to mount here). The state is the ``AnswerEntry``'s."""

    DEFAULT_CSS = "AnswerBlock { margin: 1 0 0 0; padding: 0 1; height: auto; }"

    def __init__(self, *, entry: AnswerEntry | None = None) -> None:
        self._lines: tuple[Size, list[Strip]] | None = None
        super().__init__()
        self.entry: AnswerEntry = entry if entry is not None else AnswerEntry()

    @property
    def text(self) -> str:
        return self.entry.text

    @property
    def sealed(self) -> str | None:
        """None while streaming; else "ok", "cancelled", "failed", "interrupted"..."""
        return self.entry.sealed

    @sealed.setter
    def sealed(self, state: str | None) -> None:
        self.entry.sealed = state

    def append_text(self, piece: str) -> None:
        self.entry.append_text(piece)

    def replace_text(self, text: str) -> None:
        """The authority's text (a snapshot): what was shown is replaced, never extended."""
        self.entry.replace_text(text)

    def entry_changed(self) -> None:
        self.refresh(layout=True)

    def render(self) -> RenderableType:
        return self.entry.renderable(self._dark())

    def _dark(self) -> bool:
        return self.app.current_theme.dark if self.is_attached else True

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """Textual's height of the content (its renderable drawn at ``width``), kept on the
        entry: a widget made again for an answer drawn before does not draw it to measure."""
        entry = self.entry
        key = (entry.text, entry.sealed, self._dark(), width)
        if entry._height is not None and entry._height[0] == key:
            return entry._height[1]
        height = super().get_content_height(container, viewport, width)
        entry._height = (key, height)
        return height

    def refresh(
        self,
        *regions: Region,
        repaint: bool = True,
        layout: bool = False,
        recompose: bool = False,
    ) -> Self:
        """Whatever makes Textual draw the widget again (its entry, its size, a style, the
        theme, a selection) comes through here: the lines it holds are looked up again."""
        self._lines = None
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def render_line(self, y: int) -> Strip:
        """The Line API: the lines Textual draws for this answer (``Visual.to_strips``, the
        same call its default ``render_line`` makes), kept on the entry per size and style,
        and held here until the next ``refresh`` (one lookup per frame, not per line)."""
        from textual.strip import Strip

        size = self.size
        if self._lines is None or self._lines[0] != size:
            self._lines = (size, self._strips(size))
        strips = self._lines[1]
        if y < len(strips):
            return strips[y]
        return Strip.blank(size.width, self.visual_style.rich_style)

    def _strips(self, size: Size) -> list[Strip]:
        from textual.visual import Visual

        entry = self.entry
        width, height = size
        style = self.visual_style
        key = (entry.text, entry.sealed, self._dark(), width, height, style)
        if self.text_selection is not None:  # a selection is drawn over: not kept
            return Visual.to_strips(self, self._render(), width, height, style)
        if entry._strips is not None and entry._strips[0] == key:
            return entry._strips[1]
        strips = Visual.to_strips(self, self._render(), width, height, style)
        entry._strips = (key, strips)
        return strips


def _mcp_server(detail: Mapping[str, Any] | None) -> str:
    """The MCP server a tool card's ``detail["mcp"]`` names (empty for a built-in tool)."""
    origin = (detail or {}).get("mcp")
    server = origin.get("server") if isinstance(origin, Mapping) else None
    return server if isinstance(server, str) else ""


class CardEntry(Entry):
    """A tool call keyed by its action id: started → (updated) → completed."""

    def __init__(self, action_id: str, title: str, detail: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.action_id = action_id
        self.title = title
        self.state = "running"  # running / ok / failed / cancelled / ...
        self.message = ""
        self.progress = ""
        self.diff = tool_diff(detail)
        self.expanded = False
        self.web: list[str] = []  # the web tools' lines (URL, status, size, time; screenshot)
        self.mcp_server = _mcp_server(detail)  # the MCP server the tool came from, if any
        self.run_id = ""  # the run that called the tool (live cards; history cards: none)
        self.task: TaskState | None = None  # a `task` card's child, once it is known

    @property
    def exit_code(self) -> int | None:
        """The exit code a command's output ends with (``[exit code N]``), if any."""
        found = _EXIT.search(self.message[-80:]) if self.message else None
        return int(found.group(1)) if found else None

    @property
    def foldable(self) -> bool:
        if self.task is not None:
            return True  # unfolded: the child's session and how to open its transcript
        return bool(self.diff) or "\n" in self.message.strip() or len(self.message) > _ONE_LINE

    @property
    def is_task(self) -> bool:
        """A call of the ``task`` tool (its child's status is shown under the title)."""
        return self.title == "task" or self.title.startswith("task ")

    def show_task(self, task: TaskState) -> None:
        """Show ``task``'s live status (it changed, or it is this card's from now on)."""
        self.task = task
        self.changed()

    def updated(self, message: str | None) -> None:
        if self.state == "running" and message:
            self.progress = message
            self.changed()

    def complete(
        self, ok: bool | None, message: str | None, detail: Mapping[str, Any] | None = None
    ) -> None:
        self.state = "ok" if ok else "failed"
        self.message = message or ""
        self.web = web_lines(detail, _ONE_LINE)
        self.progress = ""
        self.changed()

    def seal(self, state: str) -> None:
        """The run ended with this card open: it is shown as ``state``, never spinning."""
        if self.state == "running":
            self.state = state
            self.progress = ""
            self.changed()

    def toggle(self) -> None:
        self.expanded = not self.expanded
        self.changed()

    def lines(self, width: int) -> int:
        task = 1 if self.task is not None else 0
        if not self.expanded:
            return 3 + task + (1 if self.progress or self.message else 0) + len(self.web)
        return 2 + self.markup().count("\n") + 1

    def markup(self) -> str:
        mark = {
            "running": "[yellow]…[/]",
            "ok": "[green]✓[/]",
            "failed": "[red]✗[/]",
            "denied": "[yellow]⊘[/]",  # did not run
            "expired": "[yellow]⊘[/]",
        }.get(self.state, "[red]✗[/]")
        label = "" if self.state in ("running", "ok", "failed") else f" [dim]{self.state}[/]"
        if self.mcp_server:
            label += f" [dim]MCP {escape(self.mcp_server)}[/]"
        code = self.exit_code
        if code is not None:
            label += f" [dim]exit {code}[/]"
        if self.diff:
            label += f" [dim]{diff_stat(self.diff)}[/]"
        fold = ""
        if self.foldable:
            fold = " [dim]▾[/]" if self.expanded else " [dim]▸[/]"
        lines = [f"{mark} [b]{escape(clip(self.title, _ONE_LINE))}[/]{label}{fold}"]
        lines += self.web
        task = self.task
        if task is not None:
            lines.append(f"[b]{escape(clip(task.line(), _ONE_LINE))}[/]")
        if self.expanded and task is not None:
            if task.description:
                lines.append(f"[dim]{escape(task.description)}[/]")
            if task.session_key:
                lines.append(f"[dim]session {escape(task.session_key)}[/]")
            lines.append(f"[dim]/tasks open {escape(task.task_id)} shows its transcript[/]")
        if self.expanded:
            if self.diff:
                lines.append(diff_markup(self.diff))
            if self.message:
                body = self.message.rstrip().splitlines()
                shown = body[:_OUTPUT_LINES]
                lines += [f"[dim]{escape(x)}[/]" for x in shown]
                if len(body) > len(shown):
                    lines.append(f"[dim]… {len(body) - len(shown)} more lines[/]")
        elif self.progress:
            lines.append(f"[dim]{escape(clip(self.progress, _ONE_LINE))}[/]")
        elif self.message:
            lines.append(f"[dim]{escape(clip(self.message, _ONE_LINE))}[/]")
        return "\n".join(lines)

    def make_view(self) -> ToolCardView:
        return ToolCardView(entry=self)


class ToolCardView(Static, EntryView):
    """A tool call keyed by its action id: started → (updated) → completed, with ✓ / ✗, the
    exit code of a command and, folded, its output; ``edit``/``write`` carry a unified diff
    of their arguments. Click it (or Ctrl+T for the newest) to unfold or fold it. The state
    is the ``CardEntry``'s."""

    DEFAULT_CSS = """
    ToolCardView { margin: 0 0 0 2; padding: 0 1; border: round $secondary; height: auto; }
    ToolCardView.-open { border: round $accent; }
    """

    def __init__(
        self,
        action_id: str = "",
        title: str = "",
        detail: Mapping[str, Any] | None = None,
        *,
        entry: CardEntry | None = None,
    ) -> None:
        self.entry: CardEntry = entry if entry is not None else CardEntry(action_id, title, detail)
        super().__init__(self.entry.markup(), classes="card")
        self.set_class(self.entry.expanded, "-open")

    action_id = property(lambda self: self.entry.action_id)
    title = property(lambda self: self.entry.title)
    state = property(lambda self: self.entry.state)
    message = property(lambda self: self.entry.message)
    progress = property(lambda self: self.entry.progress)
    diff = property(lambda self: self.entry.diff)
    expanded = property(lambda self: self.entry.expanded)

    @property
    def exit_code(self) -> int | None:
        return self.entry.exit_code

    @property
    def foldable(self) -> bool:
        return self.entry.foldable

    def updated(self, message: str | None) -> None:
        self.entry.updated(message)

    def complete(
        self, ok: bool | None, message: str | None, detail: Mapping[str, Any] | None = None
    ) -> None:
        self.entry.complete(ok, message, detail)

    def seal(self, state: str) -> None:
        self.entry.seal(state)

    def toggle(self) -> None:
        self.entry.toggle()

    def on_click(self) -> None:
        if self.foldable:
            self.toggle()

    def entry_changed(self) -> None:
        self.set_class(self.entry.expanded, "-open")
        self.update(self.entry.markup())


def question(tool: str, action: dict[str, Any] | None) -> str:
    """The approval question in one line: the command for bash, the path for write/edit."""
    args = approval_arguments(action)
    if tool == "bash":
        command = approval_command(args)
        if command:
            return f"Allow bash: {clip(command)} ?"
    if tool in ("write", "edit") and isinstance(args.get("path"), str):
        return f"Allow {tool} to {clip(args['path'])} ?"
    compact = " ".join(f"{k}={v!r}" for k, v in args.items())
    return f"Allow {tool} {clip(compact)}?" if compact else f"Allow {tool}?"


def grant_covers(tool: str, action: dict[str, Any] | None) -> str:
    """What a session or "always" grant of this approval will cover, in words.

    A grant is bound to the tool and the approval's action (``action_hash``): for bash the
    command (its words, or its exact text when quoting matters), for write/edit the path
    (any content), for any other tool these arguments."""
    args = approval_arguments(action)
    if tool == "bash":
        return f"bash `{clip(approval_command(args))}` exactly"
    if tool in ("write", "edit") and isinstance(args.get("path"), str):
        return f"{tool} to `{clip(args['path'])}` (any content)"
    return f"{tool} with these arguments exactly"


@dataclass(frozen=True, kw_only=True, slots=True)
class Back:
    """The panel's answer to Tab: back to the editor, the approval still waiting."""


class ApprovalPanel(ModalScreen[ApprovalDecision | Back | None]):
    """Opened only by Tab from the editor (never by keys typed for it); 1 once, 2 session,
    3 always (3 again, or y, confirms; any other key takes it back), 4 or Esc deny, Tab back to
    the editor (still waiting). Dismissed with ``None`` when the approval ended elsewhere."""

    DEFAULT_CSS = """
    ApprovalPanel { align: center middle; }
    ApprovalPanel > Vertical {
        width: 76; height: auto; max-height: 90%; padding: 1 2; border: thick $warning;
        background: $surface;
    }
    #approval-diff { height: auto; max-height: 12; margin: 1 0; }
    #approval-keys { margin: 1 0 0 0; }
    """

    def __init__(self, asked: ApprovalAsked, diff: list[str] | None = None) -> None:
        super().__init__()
        self.asked = asked
        self.diff = diff
        self.covers = grant_covers(asked.tool, asked.action)
        self.confirming = False

    def compose(self) -> ComposeResult:
        asked = self.asked
        with Vertical():
            yield Static(f"[b]approval[/] · tool [b]{escape(asked.tool)}[/]", id="approval-tool")
            yield Static(escape(question(asked.tool, asked.action)), id="approval-question")
            if asked.rationale:
                yield Static(f"[dim]{escape(clip(asked.rationale))}[/]")
            if self.diff:
                with VerticalScroll(id="approval-diff"):
                    yield Static(diff_markup(self.diff, limit=_PANEL_DIFF))
            yield Static(self._keys(), id="approval-keys")

    def _keys(self) -> str:
        covers = escape(self.covers)
        if self.confirming:
            return (
                f"[b]always[/]: {covers}, in every session, until revoked.\n"
                "[b]press 3 again[/] (or y) to grant it; any other key takes it back"
            )
        return (
            "[b]1[/] once: this call only\n"
            f"[b]2[/] this session: {covers}\n"
            f"[b]3[/] always: {covers}, in every session\n"
            "[b]4[/]/Esc deny · [b]Tab[/] back to the editor (still waiting)"
        )

    def on_key(self, event: events.Key) -> None:
        event.stop()
        event.prevent_default()
        key = event.key
        if self.confirming:
            if key in ("3", "y"):
                self.dismiss(ApprovalDecision.APPROVE_GLOBAL)
                return
            self.confirming = False  # anything else takes the "always" back
        elif key == "1":
            self.dismiss(ApprovalDecision.APPROVE_ONCE)
            return
        elif key == "2":
            self.dismiss(ApprovalDecision.APPROVE_SESSION)
            return
        elif key == "3":
            self.confirming = True
        elif key in ("4", "escape"):
            self.dismiss(ApprovalDecision.DENY)
            return
        elif key == "tab":
            self.dismiss(Back())
            return
        self.query_one("#approval-keys", Static).update(self._keys())


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
        # Most telling first: at 80 columns the tail (usage, unread) is what gets cut.
        parts = [status.connection, status.run]
        if status.queued:
            parts.append(f"queued {status.queued}")
        parts.append(status.session)
        if status.model:
            parts.append(clip(status.model.split(":", 1)[-1], 28))
        if status.gauge:
            parts.append(f"ctx {status.gauge}")
        if status.unread:
            parts.append(f"{status.unread} unread (Ctrl+X)")
        if status.usage:
            parts.append(status.usage)
        self.update(escape(" · ".join(parts)))
