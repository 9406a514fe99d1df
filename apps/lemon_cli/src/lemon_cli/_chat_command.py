"""``lemon chat``'s body, without Typer: the composition root of the terminal client.

It boots the runtime in-process (or connects to this home's running daemon) and hands its
session port (``SESSION_PORT``) to the client; the client itself (:mod:`lemon_cli._chat`)
speaks only the port. Both ways in call :func:`run_chat`: the Typer command
(:func:`lemon_cli.chat_cmd.chat`) and the console script's front (:mod:`lemon_cli.main`),
which parses the command lines of :func:`parse_chat_args` itself so a one-shot does not import
Typer (a fifth of a one-shot's start-up). Every failure it expects is a line and an exit code;
nothing here raises Typer's ``Exit``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lemon_cli.errors import LemonCliError

if TYPE_CHECKING:
    from rich.console import Console

    from lemon_cli._chat import ChatOptions
    from lemon_core.config import LoadedConfig
    from lemon_core.sessions import SessionPort

__all__ = [
    "ChatArgs",
    "approvals",
    "booted_port",
    "load_config_or_say",
    "parse_chat_args",
    "run_chat",
]

#: The session a chat talks in unless told otherwise (also in lemon_cli._chat).
DEFAULT_SESSION = "agent:default:main"


@dataclass(frozen=True, kw_only=True, slots=True)
class ChatArgs:
    """``lemon chat``'s command line, as the Typer command receives it."""

    message: str | None = None
    session: str | None = None
    new: bool = False
    model: str | None = None
    approve: tuple[str, ...] = ()
    as_json: bool = False
    quiet: bool = False
    plain: bool = False
    compact: bool = False


_FLAGS = {
    "--new": "new",
    "--json": "as_json",
    "--quiet": "quiet",
    "-q": "quiet",
    "--plain": "plain",
    "--compact": "compact",
}
_VALUES = {"--session": "session", "--model": "model", "--approve": "approve"}


def parse_chat_args(argv: list[str]) -> ChatArgs | None:
    """The arguments after ``chat`` when they are of the plain forms (the known options, each
    value a separate word or after ``=``, at most one MESSAGE), read as Click reads them (the
    last value of an option wins, ``--approve`` collects); ``None`` for anything else
    (``--help``, ``--``, an unknown or abbreviated option, a value that looks like an option,
    a second argument), which the Typer command then parses with its own messages."""
    values: dict[str, Any] = {}
    approve: list[str] = []
    message: str | None = None
    seen_message = False
    words = iter(argv)
    for word in words:
        if word.startswith("-") and word != "-":
            name, eq, value = word.partition("=")
            if name in _FLAGS and not eq:
                values[_FLAGS[name]] = True
                continue
            if name not in _VALUES:
                return None
            if not eq:
                value = next(words, "-")
                if value.startswith("-"):
                    return None
            if _VALUES[name] == "approve":
                approve.append(value)
            else:
                values[_VALUES[name]] = value
        elif seen_message:
            return None
        else:
            message, seen_message = word, True
    return ChatArgs(message=message, approve=tuple(approve), **values)


def load_config_or_say(console: Console) -> LoadedConfig | None:
    """The home's configuration, or ``None`` after printing each of its issues."""
    from rich.markup import escape

    from lemon_core.config import ConfigError, load_config

    try:
        return load_config()
    except ConfigError as exc:
        for issue in exc.issues:
            console.print(f"[red]error[/red] {escape(issue.render())}", highlight=False)
        console.print("fix the config (see `lemon config validate`) and try again")
        return None


def approvals(values: list[str] | tuple[str, ...]) -> frozenset[str] | None:
    """The ``--approve`` names; an unknown one (a typo such as ``bsh``) is a usage error
    (``None`` after naming the known tools on standard error), never silently ignored. MCP
    tools (``mcp_<server>_<tool>``, or a glob such as ``mcp_fs_*``) are taken as given: their
    servers start only when a run needs them."""
    import re

    from lemon_cli._chat import KNOWN_TOOLS

    names = frozenset(n.strip() for v in values for n in v.split(",") if n.strip())
    mcp = {n for n in names if re.fullmatch(r"mcp_[A-Za-z0-9_*?-]+", n)}
    unknown = sorted(names - KNOWN_TOOLS - {"all"} - mcp)
    if unknown:
        print(
            f"lemon chat: --approve: unknown tool {', '.join(map(repr, unknown))}; the tools "
            f"are {', '.join(sorted(KNOWN_TOOLS))} (comma separated), an MCP tool "
            "mcp_<server>_<tool> (globs allowed: mcp_fs_*), or all",
            file=sys.stderr,
            flush=True,
        )
        return None
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


def _usage(text: str) -> int:
    print(text, file=sys.stderr, flush=True)
    return 2


def run_chat(args: ChatArgs) -> int:
    """``lemon chat``: one message with MESSAGE (or piped in), else the full-screen UI; the
    exit code (0 the answer completed; 1 the run failed; 2 a usage or configuration error;
    130 cancelled)."""
    import asyncio
    import json
    import os
    import secrets

    from rich.console import Console

    from lemon_cli._chat import ChatOptions, preapproved_for, session_for
    from lemon_cli._models import model_problem
    from lemon_core.cwd import resolve_cwd

    message, model, compact = args.message, args.model, args.compact
    console = Console(emoji=False, highlight=False, soft_wrap=True)
    loaded = load_config_or_say(console)
    if loaded is None:
        return 2
    tty = sys.stdin.isatty()
    piped = _stdin_text(message)
    if piped is not None and piped.strip():
        message = piped.strip() if message is None else f"{message}\n\n{piped.rstrip()}"
    if message is not None and not message.strip():
        return _usage("lemon chat: the message is empty; say something (or omit it to chat)")
    if message is None and not tty and not compact:
        console.print(
            "lemon chat: no terminal to talk in and nothing on standard input; pass a MESSAGE "
            "(or pipe one in) for a one-shot answer"
        )
        return 2
    if args.as_json and message is None:
        console.print("lemon chat: --json needs a MESSAGE (or text on standard input)")
        return 2
    if args.new and args.session is not None:
        console.print("lemon chat: give --session or --new, not both")
        return 2
    if model and (problem := model_problem(loaded.config, model, loaded.home)):
        if args.as_json:
            print(json.dumps({"ok": False, "error": problem[1], "error_code": problem[0]}))
        return _usage(f"lemon chat: --model {model}: {problem[1]}")
    cwd = resolve_cwd(None)  # lemon_core's one rule: the real current directory
    key = args.session or session_for(cwd)
    if args.new:
        key = f"{DEFAULT_SESSION}:sub:{secrets.token_hex(6)}"
    approve = approvals(args.approve)
    if approve is None:
        return 2
    options = ChatOptions(
        session=key,
        model=model,
        approve=approve,
        interactive=tty,
        cwd=cwd,
        default_model=loaded.config.defaults.model,
        markdown=sys.stdout.isatty()
        and not args.plain
        and not args.as_json
        and not os.environ.get("LEMON_PLAIN"),
        json_output=args.as_json,
        quiet=args.quiet,
    )
    if message is None and tty:
        # A terminal and no message: the full-screen UI (after compacting, if asked).
        if not sys.stdout.isatty():
            console.print(
                "lemon chat: the full-screen chat needs a terminal on standard output too; pass "
                "a MESSAGE for a one-shot answer"
            )
            return 2
        if compact:
            code = asyncio.run(_run_chat(loaded, options, None, console, compact=True))
            if code:
                return code
        from lemon_cli._output import make_console
        from lemon_cli.tui_cmd import open_tui

        err = make_console(emoji=False, stderr=True, highlight=False)
        return open_tui(
            err,
            url=None,
            session=key,
            cwd=cwd,
            model=model,
            preapproved=preapproved_for(options.approve),
            host_if_needed=True,
        )
    return asyncio.run(_run_chat(loaded, options, message, console, compact=compact))


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

    state = running_daemon(loaded.home)
    if state is None:
        return None
    from lemon_control_plane.client import WebSocketSessionPort
    from lemon_control_plane.config import TOKEN_ENV
    from lemon_control_plane.local_token import client_token, local_token_path

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
