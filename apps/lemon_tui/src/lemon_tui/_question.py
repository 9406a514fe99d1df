"""A child task's question to the person, as its own prompt (issue 29).

A child's ``ask_parent`` reaches the person as an approval of the parent's run (tool
``ask_parent``, the question in its action). Where the daemon offers ``tasks.answer`` the TUI
shows it as a question instead of the approve/deny panel: opened with Tab like an approval
(never by keys typed for the editor), it shows the question (the child's words, escaped), then
either its options (1..n pick one) or a line to type a free-text answer (Enter sends). Tab or
Esc goes back to the editor with the question still waiting.
"""

from __future__ import annotations

from typing import Any, Final

from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from lemon_core.sessions import ApprovalAsked
from lemon_tui._text import clip, escape

__all__ = ["QuestionPanel", "is_question", "question_line"]

_QUESTION_CHARS: Final = 2000
_ANSWER_CHARS: Final = 4000


def is_question(asked: ApprovalAsked) -> bool:
    """Whether the approval is a child task's question (``ask_parent``) to the person."""
    action = asked.action
    return (
        asked.tool == "ask_parent"
        and isinstance(action, dict)
        and isinstance(action.get("question_id"), str)
    )


def _field(asked: ApprovalAsked, key: str) -> Any:
    return asked.action.get(key) if isinstance(asked.action, dict) else None


def options_of(asked: ApprovalAsked) -> list[str]:
    """The answers the question takes (none: a free-text answer)."""
    options = _field(asked, "options")
    return [o for o in options if isinstance(o, str)] if isinstance(options, list) else []


def question_line(asked: ApprovalAsked) -> str:
    """The line above the editor while the question waits (markup, the child's words escaped)."""
    task = _field(asked, "task_id")
    text = _field(asked, "question")
    return (
        f"[b]question from child task {escape(str(task or '?'))}[/] · "
        f"{escape(clip(str(text or ''), 120))} · [b]Tab[/] to answer "
        "(what you type stays in the editor)"
    )


class QuestionPanel(ModalScreen[str | None]):
    """The question and its answer: an option's number, or a typed line and Enter. Dismissed
    with the answer, with ``None`` for Tab / Esc (back to the editor, still waiting) or when
    the question ended elsewhere (:attr:`ended` set)."""

    DEFAULT_CSS = """
    QuestionPanel { align: center middle; }
    QuestionPanel > Vertical {
        width: 76; height: auto; max-height: 90%; padding: 1 2; border: thick $accent;
        background: $surface;
    }
    #question-answer { margin: 1 0 0 0; }
    #question-keys { margin: 1 0 0 0; }
    """

    def __init__(self, asked: ApprovalAsked) -> None:
        super().__init__()
        self.asked = asked
        self.question_id = str(_field(asked, "question_id"))
        self.options = options_of(asked)
        self.ended = False

    def compose(self) -> ComposeResult:
        task = _field(self.asked, "task_id")
        text = str(_field(self.asked, "question") or "")
        with Vertical():
            yield Static(
                f"[b]question[/] · child task [b]{escape(str(task or '?'))}[/] asks you",
                id="question-title",
            )
            yield Static(escape(clip(text, _QUESTION_CHARS)), id="question-text")
            if self.options:
                listed = "\n".join(
                    f"[b]{n}[/] {escape(clip(o, 200))}" for n, o in enumerate(self.options, 1)
                )
                yield Static(listed, id="question-options")
            else:
                yield Input(
                    placeholder="your answer",
                    max_length=_ANSWER_CHARS,
                    id="question-answer",
                )
            keys = (
                f"[b]1[/]-[b]{len(self.options)}[/] pick" if self.options else "[b]Enter[/] sends"
            )
            yield Static(
                f"{keys} · [b]Tab[/]/Esc back to the editor (still waiting); unanswered by its "
                "deadline, the child goes on without an answer",
                id="question-keys",
            )

    def on_mount(self) -> None:
        if not self.options:
            self.query_one("#question-answer", Input).focus()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        message.stop()
        value = message.value
        if value.strip():
            self.dismiss(value)

    def on_key(self, event: events.Key) -> None:
        key = event.key
        if key in ("tab", "escape"):
            event.stop()
            event.prevent_default()
            self.dismiss(None)
            return
        if self.options and key.isdigit() and 1 <= int(key) <= len(self.options):
            event.stop()
            event.prevent_default()
            self.dismiss(self.options[int(key) - 1])
