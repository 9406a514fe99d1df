"""The Rich consoles of the commands: hard-wrapped at the terminal's width on a terminal, never
wrapped off one (a pipe, a file, a CI log), where Rich would otherwise cut every line at 80
columns mid-sentence."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


__all__ = ["make_console"]


def make_console(*, stderr: bool = False, **options: Any) -> Console:
    """A :class:`~rich.console.Console` (``emoji=False`` unless given) for standard output, or
    standard error with ``stderr=True``, that soft-wraps (lets lines run on) unless its stream
    is a terminal."""
    from rich.console import Console

    options.setdefault("emoji", False)
    console = Console(stderr=stderr, **options)
    if "soft_wrap" not in options:
        console.soft_wrap = not console.is_terminal
    return console
