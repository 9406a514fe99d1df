"""The Store: one async key-value interface, SQLite (WAL) by default, in-memory for tests.

Domains use the typed wrappers (RunStore, ChatStateStore, ApprovalGrantStore, OutboxStore),
never raw tables. A SQLite store is checked when it opens (``check_store_file``, see
``_integrity``); ``backup_store`` / ``restore_store`` copy one safely (see ``_backup``).
"""

from __future__ import annotations

from lemon_core.store._backup import BackupReport, RestoreReport, backup_store, restore_store
from lemon_core.store._default import default_store_path, open_default_store
from lemon_core.store._grants import (
    DEFAULT_MAX_APPROVAL_GRANTS,
    PERSISTED_GRANT_SCOPES,
    ApprovalGrant,
    ApprovalGrantStore,
)
from lemon_core.store._integrity import check_store_file
from lemon_core.store._memory import MemoryStore
from lemon_core.store._outbox import DEFAULT_OUTBOX_DEDUPE_TTL_MS, OutboxEntry, OutboxStore
from lemon_core.store._protocol import (
    DEFAULT_MAX_VALUE_BYTES,
    PutEntry,
    Store,
    system_clock_ms,
)
from lemon_core.store._sqlite import SQLiteStore
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
    InvalidStoreKeyError,
    StaleLeaseError,
    StoreBackupError,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreUnavailableError,
    StoreValueError,
)

__all__ = [
    "DEFAULT_CHAT_STATE_TTL_MS",
    "DEFAULT_MAX_APPROVAL_GRANTS",
    "DEFAULT_MAX_VALUE_BYTES",
    "DEFAULT_OUTBOX_DEDUPE_TTL_MS",
    "PERSISTED_GRANT_SCOPES",
    "ApprovalGrant",
    "ApprovalGrantStore",
    "BackupReport",
    "ChatState",
    "ChatStateStore",
    "InvalidStoreKeyError",
    "MemoryStore",
    "OutboxEntry",
    "OutboxStore",
    "PutEntry",
    "RestoreReport",
    "RunStore",
    "RunSummary",
    "SQLiteStore",
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
    "backup_store",
    "check_store_file",
    "default_store_path",
    "open_default_store",
    "restore_store",
    "system_clock_ms",
]
