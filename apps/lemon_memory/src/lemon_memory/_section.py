"""``[memory]``: the memory store's config section (this app's README documents each key)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Final, Literal

import msgspec

from lemon_core.config import Section

__all__ = ["SECTIONS", "MemoryConfig"]


class MemoryConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[memory]``: on by default; the store is ``$LEMON_HOME/store/memory.sqlite3``."""

    enabled: bool = True
    backend: Literal["auto", "sqlite", "postgres", "memory"] = "auto"
    """Where memory lives: ``auto`` follows ``[store] backend`` (PostgreSQL full-text search
    in the shared store's schema when it is ``postgres``, else ``memory.sqlite3``);
    ``sqlite`` or ``postgres`` explicitly (``postgres`` needs ``[store] backend =
    "postgres"``); ``memory``: in this process only, nothing on disk (lost at exit)."""
    ingest_runs: bool = True
    """Write a ``run_summary`` document to the run's session and project scopes when a run
    finishes (cron and heartbeat runs excluded)."""
    ingest_interval_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 5.0
    """How often the run history is read for finished runs to ingest."""
    run_summary_days: Annotated[int, msgspec.Meta(ge=1, le=3650)] = 30
    max_docs_per_scope: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 500
    max_bytes_per_scope: Annotated[int, msgspec.Meta(ge=4096, le=1 << 34)] = 2 * 1024 * 1024
    max_docs: Annotated[int, msgspec.Meta(ge=1, le=100_000_000)] = 50_000
    max_bytes: Annotated[int, msgspec.Meta(ge=4096, le=1 << 40)] = 256 * 1024 * 1024
    sweep_interval_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 900.0
    sweep_batch: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 1000
    """At most this many expired documents are removed per sweep pass."""
    embeddings: Literal["auto", "off"] = "auto"
    """The embeddings lane (SQLite backend): ``auto`` turns it on when
    ``lemon_memory[embeddings]`` is installed (the model loads in the background; recall is
    lexical until then, and documents without a vector get one); ``off``: lexical only."""
    consolidate_interval_s: Annotated[float, msgspec.Meta(ge=0, le=30 * 86_400)] = 86_400.0
    """How often near-duplicates are merged (``lemon memory consolidate``'s pass); 0: never
    on a schedule."""


#: The config sections this app owns, by name (the ``lemon.config`` entry point names it).
SECTIONS: Final[Mapping[str, type[Section]]] = {"memory": MemoryConfig}
