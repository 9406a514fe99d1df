"""Errors of the session port (under :class:`~lemon_core.errors.LemonCoreError`).

::

    LemonCoreError
    └── SessionError
        ├── SessionStreamClosedError (RuntimeError)   the stream ended (closed or overflowed)
        └── InvalidSessionKeyError (UsageError)       a session key that does not parse
"""

from __future__ import annotations

from lemon_core.errors import LemonCoreError, UsageError

__all__ = ["InvalidSessionKeyError", "SessionError", "SessionStreamClosedError"]


class SessionError(LemonCoreError):
    """Base of the session port's errors."""


class SessionStreamClosedError(SessionError, RuntimeError):
    """The session stream has ended: closed, or overflowed (recover with a snapshot)."""


class InvalidSessionKeyError(SessionError, UsageError):
    """A session key does not follow the canonical grammar.

    ``key`` is the offending text and ``reason`` a short, human explanation of what is wrong.
    """

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(
            f"invalid session key {key!r}: {reason} (expected 'agent:<agent_id>:main' or "
            "'agent:<agent_id>:<channel>:<account>:<peer_kind>:<peer_id>"
            "[:thread:<thread_id>][:sub:<sub_id>]')"
        )
