"""The default Store: SQLite (WAL) under ``$LEMON_HOME/store/lemon.sqlite3``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lemon_core.home import Home
from lemon_infra._sqlite_store import SQLiteStore

__all__ = ["default_store_path", "open_default_store"]


def default_store_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$LEMON_HOME/store/lemon.sqlite3`` (``LEMON_HOME`` defaults to ``~/.lemon``)."""
    return Home.from_env(environ).store


async def open_default_store(
    path: str | Path | None = None, *, environ: Mapping[str, str] | None = None, **options: Any
) -> SQLiteStore:
    """Open the default SQLite store (creating its directory and schema)."""
    return await SQLiteStore.open(default_store_path(environ) if path is None else path, **options)
