"""Backing up and restoring a SQLite store file (what ``lemon store backup|restore`` run).

Guarantees:

* :func:`backup_store` copies the store with SQLite's online backup API in one step: a
  consistent snapshot (every transaction committed before it, none after), taken while other
  connections (the daemon) keep reading and writing. The copy is written under a temporary name,
  passes ``PRAGMA quick_check`` and is then linked into place: a backup file is whole or absent.
  A damaged store is not backed up (its copy fails the check): the error says so.
* :func:`restore_store` checks the backup first (``quick_check``, and that it is a Lemon store);
  a bad one changes nothing. The store it replaces is kept aside, whole, as
  ``<store>.before-restore-<UTC time>`` (with its ``-wal`` and ``-shm`` files under the same
  name, so the copy opens with its last transactions); the new file is swapped in with one
  rename, so the store path always holds a store.

Not guaranteed here: that nothing has the store open during a restore (the caller holds the
home's daemon lock; a process still holding the old file keeps writing to the copy kept aside).
PostgreSQL stores are backed up with ``pg_dump`` (the CLI says so).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from lemon_core.store.errors import StoreBackupError, StoreCorruptError
from lemon_infra._sqlite_integrity import check_store_file, is_corruption

__all__ = ["BackupReport", "RestoreReport", "backup_store", "backup_target", "restore_store"]

_SIDE_FILES: Final = ("-wal", "-shm")


@dataclass(frozen=True, kw_only=True, slots=True)
class BackupReport:
    """A backup written: the store it copies, the file written and its size."""

    source: Path
    target: Path
    size_bytes: int


@dataclass(frozen=True, kw_only=True, slots=True)
class RestoreReport:
    """A restore done: the store now holding the backup's content, the backup it came from,
    and where the replaced store was kept (``None`` when there was none)."""

    store: Path
    backup: Path
    kept_aside: Path | None


def _stamp(now_s: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now_s))


def _copy(source: Path, target: Path) -> None:
    """SQLite's online backup of ``source`` into a new file ``target`` (all pages, one step:
    one consistent snapshot), synced to disk."""
    src = sqlite3.connect(source, timeout=30)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system syncs a directory
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _remove(path: Path) -> None:
    for leftover in (path, *(Path(f"{path}{suffix}") for suffix in _SIDE_FILES)):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()


def _damaged(source: Path, problem: str) -> StoreCorruptError:
    return StoreCorruptError(
        f"the store {source} is damaged ({problem}), so its backup would be too; no backup "
        "was written. Restore an earlier backup with `lemon store restore BACKUP`",
        path=source,
    )


def _aside_name(store: Path, now_s: float) -> Path:
    base = f"{store.name}.before-restore-{_stamp(now_s)}"
    aside, n = store.with_name(base), 1
    while aside.exists():
        n += 1
        aside = store.with_name(f"{base}-{n}")
    return aside


def backup_target(target: Path, *, now_s: float) -> Path:
    """The file a backup to ``target`` writes: ``target`` itself, or inside an existing
    directory ``lemon-store-<UTC time>.sqlite3``."""
    if target.is_dir():
        return target / f"lemon-store-{_stamp(now_s)}.sqlite3"
    return target


def backup_store(source: Path, target: Path, *, now_s: float | None = None) -> BackupReport:
    """Back ``source`` up into ``target`` (see the module docstring). Blocking.

    Raises :class:`StoreBackupError` for a missing store, a target that exists or whose
    directory does not, and :class:`StoreCorruptError` when the store is damaged."""
    now = time.time() if now_s is None else now_s
    if not source.is_file():
        raise StoreBackupError(f"there is no store at {source} yet: nothing to back up")
    out = backup_target(target, now_s=now)
    if not out.parent.is_dir():
        raise StoreBackupError(
            f"cannot write the backup {out}: the directory {out.parent} does not exist"
        )
    if out.exists():
        raise StoreBackupError(
            f"{out} already exists; choose a new file (a backup never overwrites one)"
        )
    with contextlib.suppress(OSError):
        if out.resolve() == source.resolve():
            raise StoreBackupError(f"{out} is the store itself; choose another file")
    partial = out.with_name(f".{out.name}.partial-{os.getpid()}")
    _remove(partial)
    try:
        try:
            _copy(source, partial)
        except sqlite3.Error as exc:
            if is_corruption(exc):
                raise _damaged(source, str(exc)) from exc
            raise StoreBackupError(f"backing up {source} failed: {exc}") from exc
        except OSError as exc:
            raise StoreBackupError(f"cannot write the backup {out}: {exc}") from exc
        problem = check_store_file(partial)
        if problem is not None:
            raise _damaged(source, problem)
        try:
            os.link(partial, out)
        except FileExistsError as exc:
            raise StoreBackupError(f"{out} appeared meanwhile; choose a new file") from exc
        except OSError as exc:
            raise StoreBackupError(f"cannot write the backup {out}: {exc}") from exc
    finally:
        _remove(partial)
    _sync_dir(out.parent)
    return BackupReport(source=source, target=out, size_bytes=out.stat().st_size)


def restore_store(backup: Path, store: Path, *, now_s: float | None = None) -> RestoreReport:
    """Replace ``store`` by the content of ``backup`` (see the module docstring). Blocking.

    Raises :class:`StoreBackupError` (nothing changed) for a backup that is missing, damaged,
    not a Lemon store, or the store itself."""
    now = time.time() if now_s is None else now_s
    if not backup.exists():
        raise StoreBackupError(f"the backup {backup} does not exist")
    with contextlib.suppress(OSError):
        if store.exists() and backup.resolve() == store.resolve():
            raise StoreBackupError(f"{backup} is the store itself; name a backup file")
    problem = check_store_file(backup)
    if problem is not None:
        raise StoreBackupError(
            f"the backup {backup} cannot be restored: {problem}; nothing was changed"
        )
    store.parent.mkdir(parents=True, exist_ok=True)
    incoming = store.with_name(f".{store.name}.restore-{os.getpid()}")
    _remove(incoming)
    try:
        try:
            _copy(backup, incoming)
        except (sqlite3.Error, OSError) as exc:
            raise StoreBackupError(f"copying {backup} failed: {exc}; nothing was changed") from exc
        problem = check_store_file(incoming)
        if problem is not None:
            raise StoreBackupError(f"the copy of {backup} fails its check: {problem}")
        aside: Path | None = None
        if store.exists():
            aside = _aside_name(store, now)
            # A hard link first: the store path never stops holding a store.
            os.link(store, aside)
            for suffix in _SIDE_FILES:  # the old WAL must never meet the new file
                side = Path(f"{store}{suffix}")
                if side.exists():
                    os.replace(side, Path(f"{aside}{suffix}"))
        os.replace(incoming, store)
    finally:
        _remove(incoming)
    _sync_dir(store.parent)
    return RestoreReport(store=store, backup=backup, kept_aside=aside)
