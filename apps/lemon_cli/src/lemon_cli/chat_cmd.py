"""``lemon chat`` and ``lemon sessions``: the composition root of the terminal client.

These commands boot the runtime in-process and hand its session port (``SESSION_PORT``) to the
client; the client itself (:mod:`lemon_cli._chat`) speaks only the port. Heavy imports are made
inside the commands, so ``lemon --help`` stays fast.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
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
    from lemon_core.config import ConfigError, load_config

    try:
        return load_config()
    except ConfigError as exc:
        for issue in exc.issues:
            console.print(f"[red]error[/red] {escape(issue.render())}", highlight=False)
        console.print("fix the config (see `lemon config validate`) and try again")
        raise typer.Exit(2) from None


def _approvals(values: list[str]) -> frozenset[str]:
    return frozenset(n.strip() for v in values for n in v.split(",") if n.strip())


def chat(
    message: Annotated[
        str | None, typer.Argument(help="Send this one message, print the answer and exit.")
    ] = None,
    session: Annotated[str, typer.Option(help="Session key to talk in.")] = DEFAULT_SESSION,
    model: Annotated[
        str | None, typer.Option(help="Model for this chat, as provider:model.")
    ] = None,
    approve: Annotated[
        list[str] | None,
        typer.Option(help="Tools that run without asking (comma separated, or 'all')."),
    ] = None,
) -> None:
    """Chat with the agent in this terminal (one message with MESSAGE, else interactive)."""
    from lemon_cli._chat import ChatOptions

    console = Console(emoji=False, highlight=False, soft_wrap=True)
    loaded = _config_or_exit(console)
    tty = sys.stdin.isatty()
    options = ChatOptions(
        session=session,
        model=model,
        approve=_approvals(approve or []),
        interactive=tty,
        default_model=loaded.config.defaults.model,
    )
    if message is None and not tty:
        console.print("lemon chat: no terminal to talk in; pass a MESSAGE for a one-shot answer")
        raise typer.Exit(2)
    code = asyncio.run(_run_chat(loaded, options, message, console))
    raise typer.Exit(code)


async def _booted(loaded: LoadedConfig, console: Console) -> tuple[Any, SessionPort] | None:
    """The runtime (full profile) and its session port, or None after saying why not."""
    import sqlite3

    from lemon_cli._home import home_error, home_problem
    from lemon_core.runtime import AppHookError, Runtime, RuntimeBootError, store_path
    from lemon_core.sessions import SESSION_PORT
    from lemon_core.store import StoreError

    problem = home_problem(loaded.home, create=True)
    if problem is not None:
        console.print(home_error(loaded.home, problem), markup=False)
        return None
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


async def _run_chat(
    loaded: LoadedConfig, options: ChatOptions, message: str | None, console: Console
) -> int:
    from lemon_cli._chat import ChatClient

    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    booted = await _booted(loaded, console)
    if booted is None:
        return 2
    runtime, port = booted
    try:
        async with ChatClient(port, options, console) as client:
            remove = client.install_sigint()
            try:
                if options.interactive:
                    client.start_reader()
                if message is not None:
                    return await client.run_once(message)
                return await client.run_interactive()
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
    import msgspec

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
    key: Annotated[str, typer.Argument(help="The session key.")] = DEFAULT_SESSION,
    limit: Annotated[int, typer.Option(help="How many messages, newest last.")] = 50,
) -> None:
    """The transcript of a session."""
    console = Console(emoji=False, highlight=False, soft_wrap=True)
    loaded = _config_or_exit(console)

    async def use(port: SessionPort) -> Any:
        known = any(s.session_key == key for s in await port.sessions(limit=1000))
        return known, await port.transcript(key, limit=max(1, limit))

    known, page = asyncio.run(_with_port(loaded, console, use))
    if not known and not page.entries:
        console.print(f"no session {escape(key)} (see `lemon sessions list`)")
        raise typer.Exit(1)
    if page.notice:
        console.print(f"[dim]{escape(page.notice)}[/]")
    if page.more:
        console.print(f"[dim]… older messages not shown (--limit {limit})[/]")
    for entry in page.entries:
        if entry.role == "tool":
            continue
        who = "[bold]you[/]" if entry.role == "user" else "[bold]lemon[/]"
        console.print(f"{who}: {escape(entry.text)}")
