"""lemon_memory: durable memory documents, scoped recall a model cannot widen, retention.

:class:`MemoryStore` (SQLite FTS5 by default, :class:`SqliteMemoryStore`; PostgreSQL,
:class:`PostgresMemoryStore`; in this process, :class:`InMemoryMemoryStore`) holds
:class:`MemoryDocument` records in four scopes (session, project, agent, user) whose keys the
server fixes from the run (:class:`MemoryContext`). Every write is screened first
(:func:`prepare`): secrets are refused (``remember``) or redacted (run-summary ingest).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lemon_core.facade import lazy_exports

if TYPE_CHECKING:
    from lemon_memory._boot import MemoryApp, lemon_memory_app, open_store, store_bounds
    from lemon_memory._inmemory import InMemoryMemoryStore
    from lemon_memory._postgres import PostgresMemoryStore
    from lemon_memory._section import MemoryConfig
    from lemon_memory._sqlite import SqliteMemoryStore
    from lemon_memory.admin import Operator
    from lemon_memory.documents import (
        MemoryContext,
        MemoryDocument,
        MemoryStatistics,
        RecallHit,
        RecallResult,
    )
    from lemon_memory.errors import (
        MemoryInputError,
        MemoryStoreError,
        MemoryUnavailableError,
        ScopeError,
        ScopeFullError,
        SecretRefusedError,
    )
    from lemon_memory.goals import GOAL_STORE, GoalStore
    from lemon_memory.store import MEMORY_STORE, MemoryStore, Write, prepare

#: Where each facade name lives (loading the config imports the section module only).
_EXPORTS: Final[dict[str, tuple[str, str]]] = {
    "MemoryApp": ("lemon_memory._boot", "MemoryApp"),
    "lemon_memory_app": ("lemon_memory._boot", "lemon_memory_app"),
    "open_store": ("lemon_memory._boot", "open_store"),
    "store_bounds": ("lemon_memory._boot", "store_bounds"),
    "Operator": ("lemon_memory.admin", "Operator"),
    "MemoryConfig": ("lemon_memory._section", "MemoryConfig"),
    "InMemoryMemoryStore": ("lemon_memory._inmemory", "InMemoryMemoryStore"),
    "PostgresMemoryStore": ("lemon_memory._postgres", "PostgresMemoryStore"),
    "SqliteMemoryStore": ("lemon_memory._sqlite", "SqliteMemoryStore"),
    "MemoryContext": ("lemon_memory.documents", "MemoryContext"),
    "MemoryDocument": ("lemon_memory.documents", "MemoryDocument"),
    "MemoryStatistics": ("lemon_memory.documents", "MemoryStatistics"),
    "RecallHit": ("lemon_memory.documents", "RecallHit"),
    "RecallResult": ("lemon_memory.documents", "RecallResult"),
    "MemoryInputError": ("lemon_memory.errors", "MemoryInputError"),
    "MemoryStoreError": ("lemon_memory.errors", "MemoryStoreError"),
    "MemoryUnavailableError": ("lemon_memory.errors", "MemoryUnavailableError"),
    "ScopeError": ("lemon_memory.errors", "ScopeError"),
    "ScopeFullError": ("lemon_memory.errors", "ScopeFullError"),
    "SecretRefusedError": ("lemon_memory.errors", "SecretRefusedError"),
    "GOAL_STORE": ("lemon_memory.goals", "GOAL_STORE"),
    "GoalStore": ("lemon_memory.goals", "GoalStore"),
    "MEMORY_STORE": ("lemon_memory.store", "MEMORY_STORE"),
    "MemoryStore": ("lemon_memory.store", "MemoryStore"),
    "Write": ("lemon_memory.store", "Write"),
    "prepare": ("lemon_memory.store", "prepare"),
}

__all__ = [
    "GOAL_STORE",
    "MEMORY_STORE",
    "GoalStore",
    "InMemoryMemoryStore",
    "MemoryApp",
    "MemoryConfig",
    "MemoryContext",
    "MemoryDocument",
    "MemoryInputError",
    "MemoryStatistics",
    "MemoryStore",
    "MemoryStoreError",
    "MemoryUnavailableError",
    "Operator",
    "PostgresMemoryStore",
    "RecallHit",
    "RecallResult",
    "ScopeError",
    "ScopeFullError",
    "SecretRefusedError",
    "SqliteMemoryStore",
    "Write",
    "lemon_memory_app",
    "open_store",
    "prepare",
    "store_bounds",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
