"""Unified diffs of the file tools' calls, from their arguments (``edit``: ``old_text`` →
``new_text``; ``write``: the whole ``content`` as added lines), shown in tool cards and in the
approval panel. The lines are marked with ``+``/``-`` as well as coloured, so they read the
same with ``NO_COLOR``."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, Final

from lemon_tui._text import escape

__all__ = ["diff_markup", "diff_stat", "tool_diff"]

_MAX_LINES: Final = 400  # a diff longer than this is cut (the card says how much more)


def tool_diff(detail: Mapping[str, Any] | None) -> list[str] | None:
    """The unified diff lines of an ``edit`` / ``write`` call, else ``None``."""
    if not detail:
        return None
    tool = detail.get("tool")
    args = detail.get("arguments")
    if not isinstance(args, Mapping) or not isinstance(args.get("path"), str):
        return None
    path = args["path"]
    if tool == "edit":
        old, new = args.get("old_text"), args.get("new_text")
        if not isinstance(old, str) or not isinstance(new, str):
            return None
        return list(
            difflib.unified_diff(
                old.splitlines(), new.splitlines(), f"a/{path}", f"b/{path}", lineterm="", n=2
            )
        )
    if tool == "write":
        content = args.get("content")
        if not isinstance(content, str):
            return None
        lines = content.splitlines()
        return [f"+++ {path} (written whole)", f"@@ {len(lines)} lines @@"] + [
            f"+{line}" for line in lines
        ]
    return None


def diff_stat(lines: list[str]) -> str:
    """``+3 -1``: lines added and removed."""
    added = sum(1 for x in lines if x.startswith("+") and not x.startswith("+++"))
    removed = sum(1 for x in lines if x.startswith("-") and not x.startswith("---"))
    return f"+{added} -{removed}"


def diff_markup(lines: list[str], limit: int = _MAX_LINES) -> str:
    """The diff as markup: additions green, removals red, hunk headers dim."""
    shown = []
    for line in lines[:limit]:
        text = escape(line)
        if line.startswith(("+++", "---", "@@")):
            shown.append(f"[dim]{text}[/]")
        elif line.startswith("+"):
            shown.append(f"[green]{text}[/]")
        elif line.startswith("-"):
            shown.append(f"[red]{text}[/]")
        else:
            shown.append(text)
    if len(lines) > limit:
        shown.append(f"[dim]… {len(lines) - limit} more lines[/]")
    return "\n".join(shown)
