"""``lemon chat`` and ``lemon sessions``: the composition root of the terminal client.

These commands boot the runtime in-process (or connect to the home's daemon) and hand its
session port (``SESSION_PORT``) to the client; the client itself (:mod:`lemon_cli._chat`)
speaks only the port. ``chat``'s body is :func:`lemon_cli._chat_command.run_chat` (no Typer
in it, so the console script's front can run it without Typer). Heavy imports are made inside
the commands, so ``lemon --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from lemon_cli._chat_command import (
    ChatArgs,
    approvals,
    booted_port,
    load_config_or_say,
    run_chat,
)
from lemon_cli._groups import command_group

if TYPE_CHECKING:
    from rich.console import Console

    from lemon_core.config import LoadedConfig
    from lemon_core.sessions import SessionPort

__all__ = ["chat", "sessions_app"]

sessions_app = command_group("Chat sessions kept in $LEMON_HOME.")


def _config_or_exit(console: Console) -> LoadedConfig:
    loaded = load_config_or_say(console)
    if loaded is None:
        raise typer.Exit(2)
    return loaded


def _approvals(values: list[str]) -> frozenset[str]:
    """The ``--approve`` names (:func:`lemon_cli._chat_command.approvals`); exit 2 on an
    unknown one."""
    names = approvals(values)
    if names is None:
        raise typer.Exit(2)
    return names


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
    # The body is Typer-free (the console script's front runs it without Typer for the plain
    # command lines: lemon_cli.main); keep the parameters above and ChatArgs in step.
    args = ChatArgs(
        message=message,
        session=session,
        new=new,
        model=model,
        approve=tuple(approve or ()),
        as_json=as_json,
        quiet=quiet,
        plain=plain,
        compact=compact,
    )
    raise typer.Exit(run_chat(args))


async def _with_port(loaded: LoadedConfig, console: Console, use: Any) -> Any:
    booted = await booted_port(loaded, console)
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
