"""The one way a ``lemon`` command group is made (plain help text, no pretty tracebacks)."""

from __future__ import annotations

import typer

__all__ = ["command_group"]


def command_group(help: str) -> typer.Typer:  # Typer's own parameter name
    """A sub-command group: plain-text help (no Rich markup), errors without pretty tracebacks,
    and its help shown when it is called with no command."""
    return typer.Typer(
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        help=help,
        no_args_is_help=True,
    )
