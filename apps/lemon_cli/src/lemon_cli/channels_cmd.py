"""``lemon channels status | pair list | pair approve CODE``: the daemon's chat channels.

Reads and writes ``$LEMON_HOME/store/lemon.sqlite3`` directly (lemon_channels' status record,
outbox and pairing tables), so it works whether or not the daemon runs: the daemon records each
channel's state when it starts and stops it and when its polling fails persistently or
recovers, and checks pairings on every message, so an approved code works at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from lemon_cli._groups import command_group
from lemon_cli._output import make_console
from lemon_cli.errors import LemonCliError

if TYPE_CHECKING:
    from lemon_core.config import Config
    from lemon_core.store import Store

__all__ = ["channel_check_lines", "channels_app"]

T = TypeVar("T")

channels_app = command_group("The daemon's chat channels (Telegram): status and pairing.")
pair_app = command_group("Let a person who got a pairing code talk to the agent.")
channels_app.add_typer(pair_app, name="pair")


class _ChannelsFailure(LemonCliError):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def _config() -> tuple[Config, Path]:
    from lemon_core.config import ConfigError, load_config

    try:
        loaded = load_config()
    except ConfigError as exc:
        raise _ChannelsFailure(
            "the configuration is invalid: " + "; ".join(i.render() for i in exc.issues)
        ) from None
    return loaded.config, loaded.home


async def _with_store(home: Path, work: Callable[[Store], Awaitable[T]]) -> T:
    import sqlite3

    from lemon_core.store import StoreError
    from lemon_infra import SQLiteStore
    from lemon_runtime import store_path

    path = store_path(home)
    if not path.exists():
        raise _ChannelsFailure(
            f"no store at {path} yet: start the daemon once (`lemon daemon start`)"
        )
    try:
        store = await SQLiteStore.open(path)
    except (StoreError, OSError, sqlite3.Error) as exc:
        raise _ChannelsFailure(f"cannot open the store {path}: {exc}") from None
    try:
        return await work(store)
    except (StoreError, OSError, sqlite3.Error) as exc:
        raise _ChannelsFailure(f"the store {path} failed: {exc}") from None
    finally:
        await store.close()


def _run(coro: Awaitable[T]) -> T:
    import asyncio

    from rich.markup import escape

    try:
        return asyncio.run(coro)  # type: ignore[arg-type]  # every caller passes a coroutine
    except _ChannelsFailure as exc:
        make_console(emoji=False, stderr=True, highlight=False).print(f"lemon: {escape(str(exc))}")
        raise typer.Exit(exc.code) from None


def _when(ms: object) -> str:
    import datetime as dt

    if not isinstance(ms, int):
        return "never"
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


async def _rows(config: Config, home: Path) -> list[dict[str, Any]]:
    from lemon_channels import ChannelsConfig, channel_statuses
    from lemon_runtime import store_path

    telegram = config.section(ChannelsConfig).telegram
    if telegram is None:
        return []
    if not store_path(home).exists():
        return [
            {
                "channel": "telegram",
                "state": "never started",
                "detail": "the daemon has not run yet",
                "mode": telegram.mode,
                "pending": 0,
                "updated_ms": None,
            }
        ]
    return await _with_store(home, lambda store: channel_statuses(config, store))


@channels_app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Each configured channel: its state (running, failed and why, ...) and its backlog."""
    import json

    from rich.markup import escape

    config, home = _config()
    rows = _run(_rows(config, home))
    if as_json:
        print(json.dumps({"version": 1, "channels": rows}, indent=2))
        return
    console = make_console(emoji=False, highlight=False)
    if not rows:
        console.print(
            "No channel is configured. Add [channels.telegram] to $LEMON_HOME/config.toml "
            '(token_env = "TELEGRAM_BOT_TOKEN", allowed_users = [<your Telegram user id>]).',
            markup=False,
        )
        return
    for row in rows:
        console.print(
            f"{row['channel']:<9} {row['state']:<13} {row.get('mode') or '':<8} "
            f"pending {row.get('pending', 0):<4} since {_when(row.get('updated_ms'))}  "
            f"{escape(str(row.get('detail', '')))}"
        )


@pair_app.command("list")
def pair_list() -> None:
    """The pairing codes waiting for approval, and the people already paired."""
    from rich.markup import escape

    from lemon_channels import PairingStore

    _, home = _config()

    async def work(store: Store) -> tuple[list[Any], list[Any]]:
        pairing = PairingStore(store)
        return await pairing.pending(), await pairing.paired()

    pending, paired = _run(_with_store(home, work))
    console = make_console(emoji=False, highlight=False)
    if not pending and not paired:
        console.print("No pairing codes and nobody paired.")
    for request in pending:
        console.print(
            f"waiting  {request.code}  {request.channel_id} user {request.user_id} "
            f"({escape(request.user_name or 'no name')}) since {_when(request.created_ms)}"
        )
    for user in paired:
        console.print(
            f"paired   {user.channel_id} user {user.user_id} "
            f"({escape(user.user_name or 'no name')}) since {_when(user.approved_ms)}"
        )


@pair_app.command("approve")
def pair_approve(code: Annotated[str, typer.Argument(help="the code the person received")]) -> None:
    """Let the person holding CODE talk to the agent (a code works once, for an hour)."""
    from rich.markup import escape

    from lemon_channels import PairingStore

    _, home = _config()
    if not code.strip().isalnum():
        make_console(emoji=False, stderr=True).print(
            f"lemon: {escape(code)!r} is not a pairing code (8 letters and digits)"
        )
        raise typer.Exit(2)
    paired = _run(_with_store(home, lambda store: PairingStore(store).approve(code)))
    if paired is None:
        make_console(emoji=False, stderr=True, highlight=False).print(
            f"lemon: no pairing code {escape(code.upper())} is waiting (it may have expired "
            "after an hour, or been used); ask the person to write to the bot again"
        )
        raise typer.Exit(1)
    make_console(emoji=False, highlight=False).print(
        f"Paired {paired.channel_id} user {paired.user_id} "
        f"({escape(paired.user_name or 'no name')}): they can talk to the agent now."
    )


async def channel_check_lines(config: Config, home: Path) -> list[tuple[str, str]]:
    """``lemon doctor``'s channel lines: (status ok|warn|fail, detail) per configured channel."""
    import os

    from lemon_channels import ChannelsConfig
    from lemon_core.config import read_secrets

    telegram = config.section(ChannelsConfig).telegram
    if telegram is None:
        return []
    if not telegram.enabled:
        return [("ok", "telegram: disabled")]
    if not (os.environ.get(telegram.token_env) or read_secrets(home).get(telegram.token_env)):
        return [
            (
                "fail",
                f"telegram: no bot token: set {telegram.token_env} (environment or "
                "$LEMON_HOME/secrets.env)",
            )
        ]
    try:
        rows = await _rows(config, home)
    except _ChannelsFailure as exc:
        return [("warn", f"telegram: {exc}")]
    lines: list[tuple[str, str]] = []
    for row in rows:
        state = row["state"]
        level = {"running": "ok", "failed": "fail"}.get(state, "warn")
        lines.append((level, f"{row['channel']}: {state}: {row.get('detail', '')}"))
    return lines
