"""``lemon store check|backup PATH|restore PATH``: the home's SQLite store, safely copied.

``backup`` uses SQLite's online backup API, so it runs while the daemon does (a consistent
snapshot of every committed run); the copy is checked before it is kept. ``restore`` refuses
while this home's daemon runs (stop it first: ``lemon daemon stop``), checks the backup
(``PRAGMA quick_check``, and that it is a Lemon store) before anything changes, and keeps the
store it replaces as ``<store>.before-restore-<UTC time>``. ``check`` runs ``quick_check`` on
the store. A PostgreSQL store is backed up with ``pg_dump`` and restored with ``pg_restore``;
the commands say so. Exit codes: 0 done, 2 anything refused (the message says why and what to
do), nothing changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lemon_cli._groups import command_group
from lemon_cli.errors import LemonCliError

if TYPE_CHECKING:  # imported when a command runs: `lemon --help` stays fast
    from lemon_core.config import LoadedConfig

__all__ = ["store_app"]

store_app = command_group("Check, back up and restore the home's store (SQLite).")


class _Refused(LemonCliError):
    """A store command that cannot be done: one line, exit 2."""


def _fail(message: str) -> typer.Exit:
    typer.echo(f"lemon store: {message}", err=True)
    return typer.Exit(2)


def _loaded() -> LoadedConfig:
    from lemon_core.config import ConfigError, load_config

    try:
        return load_config()
    except ConfigError as exc:
        raise _Refused("; ".join(issue.render() for issue in exc.issues)) from exc


def _sqlite_store(loaded: LoadedConfig, verb: str) -> Path:
    """The home's SQLite store file; refused for the other backends."""
    from lemon_runtime import store_path

    store = loaded.config.store
    if store.backend == "postgres":
        tool = "pg_dump" if verb == "backup" else "pg_restore"
        raise _Refused(
            f"the store is PostgreSQL (schema {store.schema}): {verb} it with {tool}, e.g. "
            f"`pg_dump --schema={store.schema} --format=custom --file=lemon.dump DSN` and "
            f"`pg_restore --clean --dbname=DSN lemon.dump`; lemon store {verb} works on the "
            "SQLite store"
        )
    if store.backend == "memory":
        raise _Refused("the store is the memory store: nothing outlives a process to copy")
    return store_path(loaded.home)


@store_app.command()
def check() -> None:
    """Run PRAGMA quick_check on the store (read only). Exit 2 when it is damaged."""
    from lemon_infra import check_store_file

    try:
        store = _sqlite_store(_loaded(), "check")
    except _Refused as exc:
        raise _fail(str(exc)) from None
    if not store.exists():
        typer.echo(f"lemon store: no store at {store} yet (it is created on first use)")
        return
    problem = check_store_file(store)
    if problem is not None:
        raise _fail(
            f"{store} is damaged: {problem}. Restore a backup with `lemon store restore "
            "BACKUP`, or move the file aside to start with an empty store"
        )
    typer.echo(f"lemon store: {store}: quick_check ok")


@store_app.command()
def backup(
    path: Annotated[Path, typer.Argument(help="The backup file to write (or a directory).")],
) -> None:
    """Copy the store to PATH (a new file; a directory gets lemon-store-<time>.sqlite3).
    Safe while the daemon runs: SQLite's online backup, checked before it is kept."""
    from lemon_core.store import StoreError
    from lemon_infra import backup_store

    try:
        store = _sqlite_store(_loaded(), "backup")
        report = backup_store(store, path.expanduser())
    except (_Refused, StoreError) as exc:
        raise _fail(str(exc)) from None
    except OSError as exc:
        raise _fail(f"cannot back up {path}: {exc}") from None
    typer.echo(
        f"lemon store: backed up {report.source} to {report.target} "
        f"({report.size_bytes} bytes, quick_check ok)"
    )


@store_app.command()
def restore(
    path: Annotated[Path, typer.Argument(help="The backup file to restore.")],
) -> None:
    """Replace the store by the backup PATH (checked first). The daemon must be stopped; the
    replaced store is kept as <store>.before-restore-<time>."""
    from lemon_cli._daemon import DaemonLock, read_state
    from lemon_core.store import StoreError
    from lemon_infra import restore_store

    try:
        loaded = _loaded()
        store = _sqlite_store(loaded, "restore")
    except _Refused as exc:
        raise _fail(str(exc)) from None
    lock = DaemonLock(loaded.home)
    try:
        held = lock.acquire()
    except OSError as exc:
        raise _fail(f"cannot take the daemon lock of {loaded.home}: {exc}") from None
    if not held:
        state = read_state(loaded.home)
        where = f" (pid {state.pid}, {state.url})" if state is not None else ""
        raise _fail(
            f"the daemon of {loaded.home} is running{where} and has the store open; stop it "
            "with `lemon daemon stop`, then restore"
        )
    try:  # held for the whole restore: no daemon starts on the store meanwhile
        report = restore_store(path.expanduser(), store)
    except StoreError as exc:
        raise _fail(str(exc)) from None
    except OSError as exc:
        raise _fail(f"cannot restore {path} into {store}: {exc}") from None
    finally:
        lock.release()
    kept = (
        f"; the replaced store is kept as {report.kept_aside}"
        if report.kept_aside is not None
        else ""
    )
    typer.echo(f"lemon store: restored {report.store} from {report.backup}{kept}")
