"""``lemon chat`` and ``lemon sessions``: the composition root of the terminal client.

These commands boot the runtime in-process and hand its session port (``SESSION_PORT``) to the
client; the client itself (:mod:`lemon_cli._chat`) speaks only the port. Heavy imports are made
inside the commands, so ``lemon --help`` stays fast.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lemon_cli._output import make_console
from lemon_cli.errors import LemonCliError

if TYPE_CHECKING:
    from rich.console import Console

    from lemon_cli._chat import ChatOptions
    from lemon_core.config import LoadedConfig
    from lemon_core.sessions import SessionPort

#: The session a chat talks in unless told otherwise (also in lemon_cli._chat).
DEFAULT_SESSION = "agent:default:main"

__all__ = ["chat", "sessions_app"]

sessions_app = typer.Typer(
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Chat sessions kept in $LEMON_HOME.",
    no_args_is_help=True,
)


def _config_or_exit(console: Console) -> LoadedConfig:
    from rich.markup import escape

    from lemon_core.config import ConfigError, load_config

    try:
        return load_config()
    except ConfigError as exc:
        for issue in exc.issues:
            console.print(f"[red]error[/red] {escape(issue.render())}", highlight=False)
        console.print("fix the config (see `lemon config validate`) and try again")
        raise typer.Exit(2) from None


def _approvals(values: list[str]) -> frozenset[str]:
    """The ``--approve`` names; an unknown one (a typo such as ``bsh``) is a usage error
    (exit 2) naming the known tools, never silently ignored. MCP tools (``mcp_<server>_<tool>``,
    or a glob such as ``mcp_fs_*``) are taken as given: their servers start only when a run
    needs them."""
    import re

    from lemon_cli._chat import KNOWN_TOOLS

    names = frozenset(n.strip() for v in values for n in v.split(",") if n.strip())
    mcp = {n for n in names if re.fullmatch(r"mcp_[A-Za-z0-9_*?-]+", n)}
    unknown = sorted(names - KNOWN_TOOLS - {"all"} - mcp)
    if unknown:
        typer.echo(
            f"lemon chat: --approve: unknown tool {', '.join(map(repr, unknown))}; the tools "
            f"are {', '.join(sorted(KNOWN_TOOLS))} (comma separated), an MCP tool "
            "mcp_<server>_<tool> (globs allowed: mcp_fs_*), or all",
            err=True,
        )
        raise typer.Exit(2)
    return names


def _stdin_text(message: str | None) -> str | None:
    """What standard input adds to the message when it is not a terminal: all of it when no
    MESSAGE was given; with a MESSAGE, only input that is already there (a pipe or a file),
    so a script whose standard input is an idle pipe does not hang."""
    import select

    stdin = sys.stdin
    if stdin is None or stdin.isatty():
        return None
    if message is not None:
        try:
            ready, _, _ = select.select([stdin], [], [], 0.05)
        except (OSError, ValueError):
            return None
        if not ready:
            return None
    try:
        return stdin.read()
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def chat(
    message: Annotated[
        str | None,
        typer.Argument(
            help="Send this one message, print the answer and exit (text piped on standard "
            "input is the message, or is added after it)."
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(help="Session key to talk in (default: this directory's own session)."),
    ] = None,
    new: Annotated[bool, typer.Option("--new", help="Start a fresh session.")] = False,
    model: Annotated[
        str | None, typer.Option(help="Model for this chat, as provider:model.")
    ] = None,
    approve: Annotated[
        list[str] | None,
        typer.Option(help="Tools that run without asking (comma separated, or 'all')."),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="With MESSAGE: print one JSON document (answer, tool calls, usage, cost, "
            "run id, session key, error code) and nothing else.",
        ),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Do not show usage and cost after answers.")
    ] = False,
    plain: Annotated[
        bool,
        typer.Option(
            "--plain", help="Plain text even on a terminal, no Markdown (or set LEMON_PLAIN=1)."
        ),
    ] = False,
    compact: Annotated[
        bool,
        typer.Option(
            "--compact",
            help="Summarise the session's older history first (then send MESSAGE, if any).",
        ),
    ] = False,
) -> None:
    """Chat with the agent: one message with MESSAGE (or piped in), else the full-screen
    terminal UI (on this home's daemon when one runs, else hosting the runtime here).

    Exit codes: 0 the answer completed; 1 the run failed; 2 a usage or configuration error;
    130 cancelled (Ctrl-C).
    """
    import asyncio
    import json
    import os
    import secrets

    from rich.console import Console

    from lemon_cli._chat import ChatOptions, preapproved_for, session_for
    from lemon_cli._models import model_problem
    from lemon_core.cwd import resolve_cwd

    console = Console(emoji=False, highlight=False, soft_wrap=True)
    loaded = _config_or_exit(console)
    tty = sys.stdin.isatty()
    piped = _stdin_text(message)
    if piped is not None and piped.strip():
        message = piped.strip() if message is None else f"{message}\n\n{piped.rstrip()}"
    if message is not None and not message.strip():
        typer.echo("lemon chat: the message is empty; say something (or omit it to chat)", err=True)
        raise typer.Exit(2)
    if message is None and not tty and not compact:
        console.print(
            "lemon chat: no terminal to talk in and nothing on standard input; pass a MESSAGE "
            "(or pipe one in) for a one-shot answer"
        )
        raise typer.Exit(2)
    if as_json and message is None:
        console.print("lemon chat: --json needs a MESSAGE (or text on standard input)")
        raise typer.Exit(2)
    if new and session is not None:
        console.print("lemon chat: give --session or --new, not both")
        raise typer.Exit(2)
    if model and (problem := model_problem(loaded.config, model, loaded.home)):
        if as_json:
            print(json.dumps({"ok": False, "error": problem[1], "error_code": problem[0]}))
        typer.echo(f"lemon chat: --model {model}: {problem[1]}", err=True)
        raise typer.Exit(2)
    cwd = resolve_cwd(None)  # lemon_core's one rule: the real current directory
    key = session or session_for(cwd)
    if new:
        key = f"{DEFAULT_SESSION}:sub:{secrets.token_hex(6)}"
    options = ChatOptions(
        session=key,
        model=model,
        approve=_approvals(approve or []),
        interactive=tty,
        cwd=cwd,
        default_model=loaded.config.defaults.model,
        markdown=sys.stdout.isatty()
        and not plain
        and not as_json
        and not os.environ.get("LEMON_PLAIN"),
        json_output=as_json,
        quiet=quiet,
    )
    if message is None and tty:
        # A terminal and no message: the full-screen UI (after compacting, if asked).
        if not sys.stdout.isatty():
            console.print(
                "lemon chat: the full-screen chat needs a terminal on standard output too; pass "
                "a MESSAGE for a one-shot answer"
            )
            raise typer.Exit(2)
        if compact:
            code = asyncio.run(_run_chat(loaded, options, None, console, compact=True))
            if code:
                raise typer.Exit(code)
        from lemon_cli.tui_cmd import open_tui

        err = make_console(emoji=False, stderr=True, highlight=False)
        raise typer.Exit(
            open_tui(
                err,
                url=None,
                session=key,
                cwd=cwd,
                model=model,
                preapproved=preapproved_for(options.approve),
                host_if_needed=True,
            )
        )
    code = asyncio.run(_run_chat(loaded, options, message, console, compact=compact))
    raise typer.Exit(code)


class _Remote:
    """A running daemon's session port over its WebSocket (what ``stop`` closes)."""

    via = "daemon"

    def __init__(self, port: Any) -> None:
        self.port = port

    async def stop(self) -> None:
        await self.port.__aexit__(None, None, None)


class _DaemonRefused(LemonCliError):
    """This home's daemon runs but did not accept the connection (said, never worked around:
    a second runtime on the same home would race the daemon for its store)."""


async def _daemon_port(loaded: LoadedConfig) -> _Remote | None:
    """The session port of this home's running daemon, or None (none runs, or
    ``LEMON_DAEMON=0`` asks for an in-process runtime). :class:`_DaemonRefused` when one runs
    and does not accept the connection."""
    from lemon_cli._daemon import client_ssl, running_daemon, ws_url_of
    from lemon_control_plane.client import WebSocketSessionPort
    from lemon_control_plane.config import TOKEN_ENV
    from lemon_control_plane.local_token import client_token, local_token_path

    state = running_daemon(loaded.home)
    if state is None:
        return None
    port = WebSocketSessionPort(
        ws_url_of(state.url), token=client_token(loaded.home), ssl=client_ssl(state)
    )
    try:
        await port.__aenter__()
    except Exception as exc:
        raise _DaemonRefused(
            f"lemon: the daemon of {loaded.home} (pid {state.pid}, {state.url}) did not accept "
            f"the connection: {exc}. It takes this home's local token "
            f"({local_token_path(loaded.home)}, readable by its owner only) or the token in "
            f"{TOKEN_ENV}; else stop it with `lemon daemon stop`, or run without it with "
            "LEMON_DAEMON=0"
        ) from exc
    return _Remote(port)


async def _booted(loaded: LoadedConfig, console: Console) -> tuple[Any, SessionPort] | None:
    """The session port to talk to and what to stop afterwards: the running daemon of this
    home when there is one, else a runtime (full profile) hosted in this process for the length
    of the command; None after saying why neither works."""
    from lemon_cli._home import home_error, home_problem

    problem = home_problem(loaded.home, create=True)
    if problem is not None:
        console.print(home_error(loaded.home, problem), markup=False)
        return None
    try:
        remote = await _daemon_port(loaded)
    except _DaemonRefused as exc:
        console.print(str(exc), markup=False)
        return None
    if remote is not None:
        return remote, remote.port
    # No daemon: the runtime is imported (and booted) only now, so a client of one never pays.
    import sqlite3

    from rich.markup import escape

    from lemon_core.runtime_errors import AppHookError, RuntimeBootError
    from lemon_core.sessions import SESSION_PORT
    from lemon_core.store import StoreError
    from lemon_runtime import Runtime, store_path

    try:
        runtime = Runtime(profile="full", config=loaded)
        await runtime.start()
    except (RuntimeBootError, AppHookError) as exc:
        console.print(f"[red]lemon: the runtime did not start:[/] {escape(str(exc))}")
        return None
    except (StoreError, OSError, sqlite3.Error) as exc:
        console.print(
            f"lemon: cannot open the store {store_path(loaded.home)}: {exc}. Move that path "
            "aside, or set LEMON_HOME to a directory you can write to.",
            markup=False,
        )
        return None
    port = runtime.context.capabilities.get(SESSION_PORT)
    if port is None:
        await runtime.stop()
        console.print("[red]lemon: the runtime has no session port (is lemon_router installed?)[/]")
        return None
    return runtime, port


async def booted_port(loaded: LoadedConfig, console: Console) -> tuple[Any, SessionPort] | None:
    """:func:`_booted` for another command of this CLI (``lemon acp``): the daemon's port, or
    an in-process runtime's; what to ``stop()`` afterwards."""
    return await _booted(loaded, console)


async def _run_chat(
    loaded: LoadedConfig,
    options: ChatOptions,
    message: str | None,
    console: Console,
    *,
    compact: bool = False,
) -> int:
    import json
    import logging

    from lemon_cli._chat import ChatClient
    from lemon_cli._models import used_model_note

    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    booted = await _booted(loaded, console)
    if booted is None:
        return 2
    runtime, port = booted
    try:
        async with ChatClient(port, options, console) as client:
            remove = client.install_sigint()
            try:
                if compact and not await client.compact():
                    return 1
                if options.interactive:
                    client.start_reader()
                if message is not None:
                    code = await client.run_once(message)
                    usage = client.ended.usage if client.ended else None
                    used = usage.model if usage is not None else None
                    note = used_model_note(used, loaded.config, options.model)
                    if note:
                        print(note, file=sys.stderr, flush=True)
                    if options.json_output:
                        document = client.result_document()
                        document["via"] = getattr(runtime, "via", "in-process")
                        print(json.dumps(document, indent=2))
                    return code
                return 0  # only --compact without a message gets here
            finally:
                remove()
    finally:
        await runtime.stop()


async def _with_port(loaded: LoadedConfig, console: Console, use: Any) -> Any:
    booted = await _booted(loaded, console)
    if booted is None:
        raise typer.Exit(2)
    runtime, port = booted
    try:
        return await use(port)
    finally:
        await runtime.stop()


@sessions_app.command("list")
def sessions_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Sessions with finished runs, most recent first."""
    import asyncio
    import json

    import msgspec
    from rich.console import Console
    from rich.markup import escape

    console = Console(emoji=False, highlight=False, soft_wrap=True)
    loaded = _config_or_exit(console)

    async def use(port: SessionPort) -> list[Any]:
        return await port.sessions(limit=50)

    rows = asyncio.run(_with_port(loaded, console, use))
    if as_json:
        print(json.dumps(msgspec.to_builtins(rows), indent=2))
        return
    if not rows:
        console.print("no sessions yet (start one with `lemon chat`)")
    for row in rows:
        answer = row.last_answer_preview.replace("\n", " ")[:60]
        console.print(f"{escape(row.session_key)}  {row.runs} runs  [dim]{escape(answer)}[/]")


@sessions_app.command("show")
def sessions_show(
    key: Annotated[
        str | None,
        typer.Argument(help="The session key (default: this directory's session)."),
    ] = None,
    limit: Annotated[int, typer.Option(help="How many messages, newest last.")] = 50,
) -> None:
    """The transcript of a session, after the workspace its runs start in."""
    import asyncio

    from rich.console import Console
    from rich.markup import escape

    from lemon_cli._chat import session_for
    from lemon_core.cwd import resolve_cwd

    if key is None:
        key = session_for(resolve_cwd(None))
    console = Console(emoji=False, highlight=False, soft_wrap=True)
    loaded = _config_or_exit(console)

    async def use(port: SessionPort) -> Any:
        known = any(s.session_key == key for s in await port.sessions(limit=1000))
        settings = await port.settings(key)
        return known, settings, await port.transcript(key, limit=max(1, limit))

    known, settings, page = asyncio.run(_with_port(loaded, console, use))
    if not known and not page.entries and settings.workspace is None:
        console.print(f"no session {escape(key)} (see `lemon sessions list`)")
        raise typer.Exit(1)
    if settings.workspace is not None:  # set with sessions.patch (an admin token)
        console.print(f"workspace: {escape(settings.workspace)}")
    else:
        console.print("workspace: the daemon's (lemon serve --cwd)")
    if page.notice:
        console.print(f"[dim]{escape(page.notice)}[/]")
    if page.more:
        console.print(f"[dim]… older messages not shown (--limit {limit})[/]")
    for entry in page.entries:
        if entry.role == "tool":
            continue
        who = "[bold]you[/]" if entry.role == "user" else "[bold]lemon[/]"
        console.print(f"{who}: {escape(entry.text)}")
