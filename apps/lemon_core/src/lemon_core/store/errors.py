"""The Store's error hierarchy: misuse apart from runtime failures.

::

    LemonCoreError
    └── StoreError
        ├── InvalidStoreKeyError (ValueError)    misuse: a bad table name or key
        ├── StoreValueError (ValueError)         misuse: a value that cannot be stored
        │   └── IllegalTaskTransitionError       misuse: a terminal task asked to change
        ├── StoreClosedError                     the store was closed
        ├── StoreUnavailableError                the backend failed; the write did not happen
        ├── StoreCorruptError                    a store file is damaged; it was not opened
        ├── StoreBackupError                     a backup or restore cannot be done as asked
        └── StaleLeaseError                      a fenced write's lease was lost; not written
"""

from __future__ import annotations

from pathlib import Path

from lemon_core.errors import LemonCoreError

__all__ = [
    "IllegalTaskTransitionError",
    "InvalidStoreKeyError",
    "StaleLeaseError",
    "StoreBackupError",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreUnavailableError",
    "StoreValueError",
]


class StoreError(LemonCoreError):
    """Base class of every Store error."""


class InvalidStoreKeyError(StoreError, ValueError):
    """Misuse: a table name or key is not valid (see the message for the rule)."""


class StoreValueError(StoreError, ValueError):
    """Misuse: a value cannot be stored (not JSON-compatible, or too large)."""


class IllegalTaskTransitionError(StoreValueError):
    """Misuse: a run graph task asked to leave a terminal status (or to take a status that
    does not exist)."""


class StoreClosedError(StoreError):
    """The store was closed; open a new one."""


class StoreUnavailableError(StoreError):
    """The backend failed (disk full, I/O error, locked database...); the write did not happen."""


class StoreCorruptError(StoreError):
    """A store file is damaged (``PRAGMA quick_check`` failed, it is not a database, or it is
    empty where a store existed): it was not opened and nothing in it was changed. ``path`` is
    the file; the message says what to do (restore a backup, or move the file aside)."""

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(message)
        self.path = path


class StoreBackupError(StoreError):
    """A backup or restore cannot be done as asked (a bad path, a missing store, a backup
    that is damaged or not a Lemon store); nothing was written."""


class StaleLeaseError(StoreError):
    """A fenced write carried a lease token that no longer holds its lease (another owner took
    over after it expired, or it was released); nothing was written."""
