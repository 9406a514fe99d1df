"""The ``lemon`` command: one Typer application, sub-commands delegate to their owning apps."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer
from typer.core import TyperCommand

from lemon_cli._output import make_console
from lemon_cli.acp_cmd import acp
from lemon_cli.approvals_cmd import approvals_app
from lemon_cli.channels_cmd import channels_app
from lemon_cli.chat_cmd import chat, sessions_app
from lemon_cli.config_cmd import config_app, print_status
from lemon_cli.cron_cmd import cron_app, heartbeat_app
from lemon_cli.daemon_cmd import daemon_app
from lemon_cli.doctor_cmd import doctor
from lemon_cli.goal_cmd import goal_app
from lemon_cli.mcp_cmd import mcp_app
from lemon_cli.memory_cmd import memory_app
from lemon_cli.runs_cmd import runs_app
from lemon_cli.serve_cmd import serve
from lemon_cli.setup_cmd import setup
from lemon_cli.skills_cmd import skills_app
from lemon_cli.store_cmd import store_app
from lemon_cli.tokens_cmd import tokens_app
from lemon_cli.tui_cmd import tui
from lemon_cli.web_cmd import web
from lemon_cli.webhooks_cmd import webhooks_app

if TYPE_CHECKING:
    from rich.console import Console

app = typer.Typer(
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    name="lemon",
    help="Lemon: a local-first personal AI assistant and coding-agent platform.",
    no_args_is_help=False,
    add_completion=False,
)
architecture_app = typer.Typer(
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Architecture policy tools.",
    no_args_is_help=True,
)
app.add_typer(architecture_app, name="architecture")
app.add_typer(approvals_app, name="approvals")
app.add_typer(channels_app, name="channels")
app.add_typer(config_app, name="config")
app.add_typer(cron_app, name="cron")
app.add_typer(heartbeat_app, name="heartbeat")
app.add_typer(daemon_app, name="daemon")
events_app = typer.Typer(
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Typed bus events.",
    no_args_is_help=True,
)
app.add_typer(events_app, name="events")
app.add_typer(sessions_app, name="sessions")
app.add_typer(store_app, name="store")
app.add_typer(tokens_app, name="tokens")
app.add_typer(webhooks_app, name="webhooks")
app.add_typer(skills_app, name="skills")
app.add_typer(mcp_app, name="mcp")
app.add_typer(goal_app, name="goal")
app.add_typer(memory_app, name="memory")
app.add_typer(runs_app, name="runs")
app.command()(acp)
app.command()(chat)
app.command()(doctor)
app.command()(serve)
app.command()(setup)
app.command()(tui)
app.command()(web)


class _Passthrough(TyperCommand):
    """A command whose unknown options and extra arguments go to the tool it wraps."""

    allow_extra_args = True
    ignore_unknown_options = True


@app.callback(invoke_without_command=True)
def _root(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        if sys.stdin.isatty() and sys.stdout.isatty():
            ensure_daemon(ctx)
            ctx.invoke(chat)
            return
        console = make_console(emoji=False)
        console.print(ctx.get_help())
        console.print()
        print_status(console)
        _print_daemon(console)


def ensure_daemon(ctx: typer.Context) -> None:
    """Bare ``lemon`` on a terminal: start this home's daemon in the background unless one
    runs (or ``LEMON_DAEMON=0``), so the chat that opens next is its client. A daemon that
    cannot start (the port is taken, say) is reported and the chat hosts the runtime itself."""
    from lemon_cli._daemon import daemon_enabled, read_state

    if not daemon_enabled():
        return
    from lemon_cli._home import home_problem
    from lemon_cli.daemon_cmd import start
    from lemon_core.config import lemon_home

    home = lemon_home()
    if home_problem(home, create=True) is not None:
        return  # the chat says what is wrong with the home
    state = read_state(home)
    if state is not None and state.alive:
        return
    try:
        ctx.invoke(start)
    except typer.Exit:
        make_console(emoji=False, stderr=True).print(
            "lemon: the daemon did not start (see `lemon daemon logs`); chatting in this process"
        )


@app.command(cls=_Passthrough)
def quality(ctx: typer.Context) -> None:
    """Run the architecture and quality gate (extra arguments go to its check command)."""
    import lemon_quality

    raise typer.Exit(lemon_quality.main(["check", *ctx.args]))


@architecture_app.command(cls=_Passthrough)
def docs(ctx: typer.Context) -> None:
    """Regenerate the policy table in docs/architecture_boundaries.md (--check: fail on drift)."""
    import lemon_quality

    raise typer.Exit(lemon_quality.main(["docs", *ctx.args]))


@events_app.command("docs", cls=_Passthrough)
def events_docs(ctx: typer.Context) -> None:
    """Regenerate the registered-types tables in docs/bus_events.md (--check: fail on drift)."""
    from lemon_core.events import catalog

    raise typer.Exit(catalog.main(list(ctx.args)))


@app.command()
def status() -> None:
    """Show where Lemon keeps its state, whether a config was found and whether this home's
    daemon runs (pid, url, uptime)."""
    console = make_console(emoji=False)
    print_status(console)
    _print_daemon(console)


def _print_daemon(console: Console) -> None:
    from rich.markup import escape

    from lemon_cli._daemon import daemon_summary
    from lemon_core.config import lemon_home

    console.print(f"[bold]daemon[/bold]  {escape(daemon_summary(lemon_home()))}", highlight=False)


def main() -> None:
    """Console-script entry point."""
    app()
