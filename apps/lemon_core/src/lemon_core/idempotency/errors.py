"""Errors of the idempotency store: misuse apart from backend failures.

::

    LemonCoreError
    └── IdempotencyError
        ├── InvalidIdempotencyKeyError (ValueError)   a missing, blank or non-text key
        └── IdempotencyStoreError                      the backend failed; nothing changed
"""

from __future__ import annotations

from lemon_core.errors import LemonCoreError

__all__ = ["IdempotencyError", "IdempotencyStoreError", "InvalidIdempotencyKeyError"]


class IdempotencyError(LemonCoreError):
    """Base class of the idempotency errors."""


class InvalidIdempotencyKeyError(IdempotencyError, ValueError):
    """The caller's idempotency key is unusable (the message says why)."""


class IdempotencyStoreError(IdempotencyError):
    """The store failed; the operation did not happen (callers fail closed)."""
