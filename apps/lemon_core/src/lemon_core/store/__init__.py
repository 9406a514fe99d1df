"""The Store: one async key-value interface (the Protocol), its errors, and the typed
wrappers domains use (RunStore, ChatStateStore, ApprovalGrantStore, OutboxStore,
SessionIndexStore, SessionSettingsStore, RunGraphStore: the delegated tasks), never raw tables.

The implementations (SQLite, the default; PostgreSQL; in memory), the SQLite file check,
backup and restore live in lemon_infra. :mod:`lemon_core.store.protocol` holds the key,
value and TTL checks every implementation shares.
"""

from __future__ import annotations

from lemon_core.store._grants import (
    DEFAULT_MAX_APPROVAL_GRANTS,
    PERSISTED_GRANT_SCOPES,
    ApprovalGrant,
    ApprovalGrantStore,
)
from lemon_core.store._outbox import DEFAULT_OUTBOX_DEDUPE_TTL_MS, OutboxEntry, OutboxStore
from lemon_core.store._run_graph import (
    TERMINAL_TASK_STATUSES,
    RunGraphStore,
    TaskNode,
    TaskStatus,
)
from lemon_core.store._wrappers import (
    DEFAULT_CHAT_STATE_TTL_MS,
    ChatState,
    ChatStateStore,
    RunStore,
    RunSummary,
    SessionIndexEntry,
    SessionIndexStore,
    SessionSettingsRecord,
    SessionSettingsStore,
)
from lemon_core.store.errors import (
    IllegalTaskTransitionError,
    InvalidStoreKeyError,
    StaleLeaseError,
    StoreBackupError,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreUnavailableError,
    StoreValueError,
)
from lemon_core.store.protocol import DEFAULT_MAX_VALUE_BYTES, PutEntry, Store, system_clock_ms

__all__ = [
    "DEFAULT_CHAT_STATE_TTL_MS",
    "DEFAULT_MAX_APPROVAL_GRANTS",
    "DEFAULT_MAX_VALUE_BYTES",
    "DEFAULT_OUTBOX_DEDUPE_TTL_MS",
    "PERSISTED_GRANT_SCOPES",
    "TERMINAL_TASK_STATUSES",
    "ApprovalGrant",
    "ApprovalGrantStore",
    "ChatState",
    "ChatStateStore",
    "IllegalTaskTransitionError",
    "InvalidStoreKeyError",
    "OutboxEntry",
    "OutboxStore",
    "PutEntry",
    "RunGraphStore",
    "RunStore",
    "RunSummary",
    "SessionIndexEntry",
    "SessionIndexStore",
    "SessionSettingsRecord",
    "SessionSettingsStore",
    "StaleLeaseError",
    "Store",
    "StoreBackupError",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreUnavailableError",
    "StoreValueError",
    "TaskNode",
    "TaskStatus",
    "system_clock_ms",
]
