"""The ``lemon`` command: one Typer application, sub-commands delegate to their owning apps."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.console import Console

import lemon_quality

app = typer.Typer(
    name="lemon",
    help="Lemon: a local-first personal AI assistant and coding-agent platform.",
    no_args_is_help=False,
    add_completion=False,
)
architecture_app = typer.Typer(help="Architecture policy tools.", no_args_is_help=True)
app.add_typer(architecture_app, name="architecture")

_PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


def lemon_home() -> Path:
    """Where Lemon keeps its state: ``$LEMON_HOME`` or ``~/.lemon``."""
    env = os.environ.get("LEMON_HOME")
    return Path(env).expanduser() if env else Path.home() / ".lemon"


def _status(console: Console) -> None:
    home = lemon_home()
    config = home / "config.toml"
    console.print(f"[bold]home[/bold]    {home}" + ("" if home.is_dir() else "  (not created yet)"))
    if config.is_file():
        console.print(f"[bold]config[/bold]  {config}")
    else:
        console.print(f"[bold]config[/bold]  none found at {config} (the offline provider is used)")


@app.callback(invoke_without_command=True)
def _root(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        console = Console()
        console.print(ctx.get_help())
        console.print()
        _status(console)


@app.command(context_settings=_PASSTHROUGH)
def quality(ctx: typer.Context) -> None:
    """Run the architecture and quality gate (arguments go to ``python -m lemon_quality``)."""
    raise typer.Exit(lemon_quality.main(["check", *ctx.args]))


@architecture_app.command(context_settings=_PASSTHROUGH)
def docs(ctx: typer.Context) -> None:
    """Regenerate the policy table in docs/architecture_boundaries.md (--check: fail on drift)."""
    raise typer.Exit(lemon_quality.main(["docs", *ctx.args]))


@app.command()
def status() -> None:
    """Show where Lemon keeps its state and whether a config was found."""
    _status(Console())


def main() -> None:
    """Console-script entry point."""
    app()
