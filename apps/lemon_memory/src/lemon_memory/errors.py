"""lemon_memory's errors: misuse (bad input, refused writes) apart from store failures."""

from __future__ import annotations

from lemon_core.errors import UsageError

__all__ = [
    "GoalNotFoundError",
    "MemoryInputError",
    "MemoryStoreError",
    "MemoryUnavailableError",
    "ScopeError",
    "ScopeFullError",
    "SecretRefusedError",
]


class MemoryStoreError(Exception):
    """Base of this app's errors."""


class MemoryInputError(MemoryStoreError, UsageError):
    """Bad input: an empty or oversized body, NUL bytes, invisible characters, an injection
    phrase, a bad TTL... The message says what is wrong and how to fix it; nothing is stored."""


class SecretRefusedError(MemoryInputError):
    """A write carried a secret: refused, nothing stored (the message never repeats it)."""

    def __init__(self, kinds: tuple[str, ...]) -> None:
        self.kinds = kinds
        super().__init__(
            f"refused: the text contains a secret ({', '.join(kinds)}); memory never stores "
            "secrets. Store where it lives instead, e.g. 'the staging token is in secrets.env "
            "as STAGING_TOKEN'"
        )


class ScopeError(MemoryInputError):
    """An unknown scope, a scope the run cannot see, or another scope's document."""


class ScopeFullError(MemoryInputError):
    """A scope (or the store) is at its budget and every document in it is pinned."""


class GoalNotFoundError(MemoryInputError):
    """A goal operation on a session that has no goal (the wire's ``not_found``)."""


class MemoryUnavailableError(MemoryStoreError):
    """The store cannot be read or written (a corrupt or missing file, a backend error)."""
