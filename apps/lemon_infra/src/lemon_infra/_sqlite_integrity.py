"""The integrity of a SQLite store file: what is checked before a store is used.

Guarantees:

* A store that ``PRAGMA quick_check`` finds damaged, or that is not a SQLite database at all,
  is refused (:class:`~lemon_core.store.errors.StoreCorruptError`, naming the file and what to
  do) before anything reads or writes it. Nothing in it is changed.
* A store file that exists but holds zero bytes is refused too: :class:`SQLiteStore` never
  leaves one behind (a new store is built under a temporary name and linked into place whole),
  so an empty file means its content was lost (truncated by a tool, a full disk, a bad copy),
  not a store that was never written. Only a missing file is a new, empty store.

What it does not guarantee: ``quick_check`` verifies the b-tree structure of every page, not
that every value decodes (a bit flip inside a value's bytes may pass); and damage that happens
while the store is open is reported by the failing call, not here.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

from lemon_core.store.errors import StoreCorruptError

__all__ = ["check_store_file", "corrupt_store_error", "quick_check"]

#: The table every Lemon store has (see ``lemon_infra._sqlite_store``).
STORE_TABLE: Final = "lemon_kv"
_MAX_PROBLEMS: Final = 5
_CORRUPT_CODES: Final = frozenset({"SQLITE_CORRUPT", "SQLITE_NOTADB"})


def is_corruption(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says the file is damaged or not a database (not: locked, read-only...)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if any(name.startswith(code) for code in _CORRUPT_CODES):
        return True
    text = str(exc)
    return "malformed" in text or "not a database" in text


def quick_check(conn: sqlite3.Connection) -> str | None:
    """``PRAGMA quick_check`` on ``conn``: ``None`` when it answers ``ok``, else its first few
    findings (a damaged file may also raise :class:`sqlite3.DatabaseError`)."""
    rows = conn.execute(f"PRAGMA quick_check({_MAX_PROBLEMS})").fetchall()
    found = [
        line.strip()
        for row in rows
        for line in str(row[0]).splitlines()
        if line.strip() and not line.startswith("*** in database")
    ]
    if found == ["ok"]:
        return None
    shown = "; ".join(found[:3]) or "no answer"
    return shown + (f"; and {len(found) - 3} more" if len(found) > 3 else "")


def corrupt_store_error(path: Path, problem: str) -> StoreCorruptError:
    """The error for a damaged store at ``path``, saying what to do."""
    return StoreCorruptError(
        f"the store {path} is damaged ({problem}); it was not opened and nothing in it was "
        "changed. Restore a backup with `lemon store restore BACKUP` (the damaged file is kept "
        f"aside as {path.name}.before-restore-<time>), or move {path} and its -wal and -shm "
        "files aside to start with an empty store",
        path=path,
    )


def empty_store_error(path: Path) -> StoreCorruptError:
    """The error for a zero-length file where a store was."""
    return StoreCorruptError(
        f"the store {path} is empty (0 bytes): a store is never left empty, so its content was "
        "lost (truncated by a tool, a full disk or a bad copy); it was not opened. Restore a "
        "backup with `lemon store restore BACKUP`, or move the empty file aside to start with "
        "an empty store",
        path=path,
    )


def check_store_file(path: Path) -> str | None:
    """What is wrong with the store file at ``path`` (missing, empty, not a database, damaged,
    not a Lemon store), or ``None`` when it passes ``quick_check``. Read-only: opens the file
    with ``mode=ro`` and changes nothing. Blocking (run it off the event loop)."""
    if not path.exists():
        return f"{path} does not exist"
    if not path.is_file():
        return f"{path} is not a regular file"
    if path.stat().st_size == 0:
        return f"{path} is empty (0 bytes)"
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return f"{path} cannot be opened: {exc}"
    try:
        problem = quick_check(conn)
        if problem is not None:
            return f"PRAGMA quick_check: {problem}"
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (STORE_TABLE,)
        ).fetchone()
        if found is None:
            return f"{path} is a SQLite database but not a Lemon store (no {STORE_TABLE} table)"
    except sqlite3.Error as exc:
        if is_corruption(exc):
            return f"PRAGMA quick_check: {exc}"
        return f"{path} cannot be read: {exc}"
    finally:
        conn.close()
    return None
