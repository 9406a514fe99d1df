"""``lemon chat`` and ``lemon sessions``: the terminal entry points of the in-process runtime."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from coding_agent import CodingAgentError, CodingExecutor
from lemon_ai import AssistantMessage, UserMessage
from lemon_cli._chat import DEFAULT_SESSION, ChatClient, ChatOptions, list_sessions
from lemon_cli._executor import TRANSCRIPTS_TABLE
from lemon_core.config import ConfigError, LoadedConfig, load_config
from lemon_core.runtime import AppHookError, Runtime, RuntimeBootError, store_path
from lemon_core.store import ChatStateStore, RunStore, SQLiteStore, Store

__all__ = ["chat", "sessions_app"]

sessions_app = typer.Typer(help="Chat sessions kept in $LEMON_HOME.", no_args_is_help=True)


def _config_or_exit(console: Console) -> LoadedConfig:
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
    console = Console(emoji=False, highlight=False, soft_wrap=True)
    loaded = _config_or_exit(console)
    tty = sys.stdin.isatty()
    options = ChatOptions(
        session=session,
        model=model,
        approve=_approvals(approve or []),
        interactive=tty,
    )
    if message is None and not tty:
        console.print("lemon chat: no terminal to talk in; pass a MESSAGE for a one-shot answer")
        raise typer.Exit(2)
    code = asyncio.run(_run_chat(loaded, options, message, console))
    raise typer.Exit(code)


async def _run_chat(
    loaded: LoadedConfig, options: ChatOptions, message: str | None, console: Console
) -> int:
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    try:
        runtime = Runtime(profile="full", config=loaded)
        await runtime.start()
    except (RuntimeBootError, AppHookError) as exc:
        console.print(f"[red]lemon: the runtime did not start:[/] {escape(str(exc))}")
        return 2
    try:
        async with ChatClient(runtime, options, console) as client:
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


@sessions_app.command("list")
def sessions_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Sessions with finished runs, most recent first."""
    console = Console(emoji=False, highlight=False, soft_wrap=True)
    loaded = _config_or_exit(console)

    async def run() -> list[dict[str, Any]]:
        path = store_path(loaded.home)
        if not path.exists():
            return []
        async with await SQLiteStore.open(path) as store:
            return await list_sessions(store)

    rows = asyncio.run(run())
    if as_json:
        console.print_json(json.dumps(rows))
        return
    if not rows:
        console.print("no sessions yet (start one with `lemon chat`)")
    for row in rows:
        answer = str(row.get("last_answer", "")).replace("\n", " ")[:60]
        console.print(
            f"{escape(str(row['session_key']))}  {row['runs']} runs  [dim]{escape(answer)}[/]"
        )


@sessions_app.command("show")
def sessions_show(
    key: Annotated[str, typer.Argument(help="The session key.")] = DEFAULT_SESSION,
) -> None:
    """The transcript of a session (or its run history when no transcript is kept)."""
    console = Console(emoji=False, highlight=False, soft_wrap=True)
    loaded = _config_or_exit(console)

    async def run() -> tuple[list[dict[str, str]], list[str]]:
        path = store_path(loaded.home)
        if not path.exists():
            return [], []
        async with await SQLiteStore.open(path) as store:
            token = await ChatStateStore(store).resume_token(key)
            transcript: list[dict[str, str]] = []
            if token is not None:
                transcript = await _transcript(loaded, store, token.value)
            history = await RunStore(store).history(key, limit=50)
            return transcript, [
                f"{'ok' if h.ok else 'failed'}  {h.run_id}  {h.answer[:80]!r}" for h in history
            ]

    transcript, history = asyncio.run(run())
    if not transcript and not history:
        console.print(f"no session {escape(key)} (see `lemon sessions list`)")
        raise typer.Exit(1)
    for entry in transcript:
        who = "[bold]you[/]" if entry.get("role") == "user" else "[bold]lemon[/]"
        console.print(f"{who}: {escape(entry.get('text', ''))}")
    if not transcript:
        for line in history:
            console.print(escape(line))


async def _transcript(loaded: LoadedConfig, store: Store, session_id: str) -> list[dict[str, str]]:
    """User and assistant text of a native session: the coding executor's JSONL transcript,
    else the built-in executor's store table."""
    entries: list[dict[str, str]] = []
    try:
        _, messages = await CodingExecutor(home=loaded.home).sessions().load(session_id)
    except (CodingAgentError, OSError, ValueError):
        messages = []
    for message in messages:
        if isinstance(message, UserMessage):
            entries.append({"role": "user", "text": message.content})
        elif isinstance(message, AssistantMessage) and message.text:
            entries.append({"role": "assistant", "text": message.text})
    if entries:
        return entries
    return list(await store.get(TRANSCRIPTS_TABLE, session_id) or [])
