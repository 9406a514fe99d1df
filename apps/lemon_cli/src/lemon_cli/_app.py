"""The ``lemon`` command's Typer application: sub-commands delegate to their owning apps.

The console script enters through :mod:`lemon_cli.main`, which answers ``lemon --help`` and
``lemon chat ...`` without this module (without Typer) and hands every other command line
here."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer
import typer.main
from typer._coercion import RuntimeParam, build_runtime_param
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandInfo, TyperInfo

from lemon_cli._groups import command_group
from lemon_cli._output import make_console
from lemon_cli.acp_cmd import acp
from lemon_cli.agents_cmd import agents_app
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


@dataclass(frozen=True)
class _Text(RuntimeParam):
    """A ``str`` parameter's coercion. Typer coerces each value through a pydantic
    ``TypeAdapter`` it builds on first use, and importing pydantic is a tenth of a second of
    every command; for a ``str`` (all the command line gives) that adapter returns the very
    string, so a ``str`` is taken as it is and anything else still goes to Typer's adapter."""

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str):
            return value
        return build_runtime_param(param.type_descriptor)._coerce_value(value, param, ctx)


@dataclass(frozen=True)
class _TextList(RuntimeParam):
    """A ``list[str]`` parameter's coercion, as :class:`_Text`: Typer's adapter makes a list of
    the strings (one value: a list of it)."""

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        items = value if isinstance(value, (list, tuple)) else [value]
        if all(isinstance(item, str) for item in items):
            return list(items)
        return build_runtime_param(param.type_descriptor)._coerce_value(value, param, ctx)


@dataclass(frozen=True)
class _Flag(RuntimeParam):
    """A ``bool`` flag's coercion (``--help`` included), as :class:`_Text`: a ``bool`` as it is."""

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, bool):
            return value
        return build_runtime_param(param.type_descriptor)._coerce_value(value, param, ctx)


def _text_params(command: Any) -> Any:
    """Give ``command``'s (and its sub-commands') plain ``str``, ``list[str]`` and ``bool``
    parameters and its ``--help`` :class:`_Text`, :class:`_TextList` and :class:`_Flag`."""
    help_option = command.get_help_option(typer.Context(command))  # made once, then kept
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        descriptor = getattr(param, "type_descriptor", None)
        if (
            descriptor is None
            or descriptor.parameter_info.parser is not None
            or descriptor.file_annotation is not None
            or getattr(param, "_runtime_param", None) is not None
        ):
            continue
        if descriptor.annotation is str:
            param._runtime_param = _Text(parameter_info=descriptor.parameter_info, annotation=str)
        elif descriptor.annotation is bool:
            param._runtime_param = _Flag(parameter_info=descriptor.parameter_info, annotation=bool)
        elif descriptor.annotation == list[str]:
            param._runtime_param = _TextList(
                parameter_info=descriptor.parameter_info, annotation=descriptor.annotation
            )
    for sub in getattr(command, "commands", {}).values():
        _text_params(sub)
    return command


class _Deferred(MutableMapping[str, Any]):
    """The root group's sub-commands: each is made into its click command (its parameters read
    from its signature, which is most of a start-up's cost) the first time it is looked up, by
    Typer's own functions, so it is the command eager registration makes."""

    def __init__(self, made: MutableMapping[str, Any], entries: typer.Typer) -> None:
        self._made: dict[str, Any] = dict(made)
        self._infos: dict[str, CommandInfo | TyperInfo] = {}
        for command in entries.registered_commands:
            assert command.callback is not None
            self._infos[command.name or typer.main.get_command_name(command.callback.__name__)] = (
                command
            )
        for group in entries.registered_groups:
            assert isinstance(group.name, str)
            self._infos[group.name] = group

    def __getitem__(self, name: str) -> Any:
        if name not in self._made:
            info = self._infos[name]
            if isinstance(info, CommandInfo):
                made = typer.main.get_command_from_info(
                    info,
                    pretty_exceptions_short=app.pretty_exceptions_short,
                    rich_markup_mode=app.rich_markup_mode,
                )
            else:
                made = typer.main.get_group_from_info(
                    info,
                    pretty_exceptions_short=app.pretty_exceptions_short,
                    rich_markup_mode=app.rich_markup_mode,
                    suggest_commands=app.suggest_commands,
                )
            self._made[name] = _text_params(made)
        return self._made[name]

    def stand_in(self, name: str) -> Any:
        """The command if it was made, else a command that only carries its help line (and
        whether it is hidden or deprecated), for the listing in ``--help``."""
        if name in self._made or name not in self._infos:
            return self._made.get(name)
        info = self._infos[name]
        if isinstance(info, CommandInfo):
            assert info.callback is not None
            doc = info.help if info.help is not None else inspect.getdoc(info.callback)
            return TyperCommand(
                name=name,
                help=inspect.cleandoc(doc) if doc else doc,
                short_help=info.short_help,
                hidden=info.hidden,
                deprecated=info.deprecated,
            )
        solved = typer.main.solve_typer_info_defaults(info)
        return TyperCommand(
            name=name,
            help=solved.help,
            short_help=solved.short_help,
            hidden=solved.hidden,
            deprecated=solved.deprecated,
        )

    def __setitem__(self, name: str, command: Any) -> None:
        self._made[name] = command

    def __delitem__(self, name: str) -> None:
        self._made.pop(name, None)
        self._infos.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        yield from self._infos
        yield from (name for name in self._made if name not in self._infos)

    def __len__(self) -> int:
        return len(set(self._infos) | set(self._made))


class _LazyRoot(TyperGroup):
    """``lemon``: its sub-commands are registered on ``_entries`` and made when one is asked
    for; ``lemon --help`` lists them from their help lines without making any."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        _text_params(self)
        self.commands = _Deferred(self.commands, _entries)
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names only: ``commands.items()`` would make them all

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if self._listing and isinstance(self.commands, _Deferred):
            return self.commands.stand_in(cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False


_entries = typer.Typer(rich_markup_mode=None, pretty_exceptions_enable=False)
app = typer.Typer(
    cls=_LazyRoot,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    name="lemon",
    help="Lemon: a local-first personal AI assistant and coding-agent platform.",
    no_args_is_help=False,
    add_completion=False,
)
architecture_app = command_group("Architecture policy tools.")
_entries.add_typer(architecture_app, name="architecture")
_entries.add_typer(agents_app, name="agents")
_entries.add_typer(approvals_app, name="approvals")
_entries.add_typer(channels_app, name="channels")
_entries.add_typer(config_app, name="config")
_entries.add_typer(cron_app, name="cron")
_entries.add_typer(heartbeat_app, name="heartbeat")
_entries.add_typer(daemon_app, name="daemon")
events_app = command_group("Typed bus events.")
_entries.add_typer(events_app, name="events")
_entries.add_typer(sessions_app, name="sessions")
_entries.add_typer(store_app, name="store")
_entries.add_typer(tokens_app, name="tokens")
_entries.add_typer(webhooks_app, name="webhooks")
_entries.add_typer(skills_app, name="skills")
_entries.add_typer(mcp_app, name="mcp")
_entries.add_typer(goal_app, name="goal")
_entries.add_typer(memory_app, name="memory")
_entries.add_typer(runs_app, name="runs")
_entries.command()(acp)
_entries.command()(chat)
_entries.command()(doctor)
_entries.command()(serve)
_entries.command()(setup)
_entries.command()(tui)
_entries.command()(web)


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


@_entries.command(cls=_Passthrough)
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


@_entries.command()
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
    """Run the Typer application on ``sys.argv`` (what :func:`lemon_cli.main.main` hands on)."""
    app()
