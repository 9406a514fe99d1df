"""The terminal chat's live answer is parsed as Markdown when it is drawn, not once per delta
(re-parsing the growing answer on every delta is quadratic in its length)."""

from __future__ import annotations

import io
from typing import Any

import pytest
import rich.markdown
from rich.console import Console

from lemon_cli._chat import ChatClient, ChatOptions


def test_a_thousand_deltas_are_not_a_thousand_markdown_parses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parses: list[int] = []
    real = rich.markdown.Markdown

    def counting(*args: Any, **kwargs: Any) -> Any:
        parses.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(rich.markdown, "Markdown", counting)
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80)
    client = ChatClient(port=None, options=ChatOptions(markdown=True), console=console)  # type: ignore[arg-type]
    for i in range(1000):
        client._text(f"word{i} ")
    during = len(parses)
    client._pause()  # the answer is printed for good, once
    assert "word999" in out.getvalue()
    assert during < 50, during  # drawn at most a few times a second, not per delta
