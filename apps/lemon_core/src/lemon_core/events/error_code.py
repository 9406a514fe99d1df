"""``ErrorCode``: why a run failed, as a typed value every consumer branches on.

A failed :class:`~lemon_core.events.Completion` carries one; nobody parses ``error`` (the
human sentence) to find out what happened. ``retryable`` says whether running the *same*
request again may succeed; ``deterministic`` codes fail the same way every time.
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = ["NOT_RETRYABLE", "ErrorCode"]


class ErrorCode(enum.StrEnum):
    """Why a run ended without success."""

    CANCELLED = "cancelled"
    """Stopped on purpose (a user, an interrupt, a shutdown)."""
    TIMEOUT = "timeout"
    """A bound passed (the run watchdog, an approval deadline, a slot or lock wait)."""
    MAX_TURNS = "max_turns"
    """The agent reached its limit of model calls."""
    PROVIDER_AUTH = "provider_auth"
    """The model provider refused the credentials."""
    RATE_LIMITED = "rate_limited"
    """The model provider asked to slow down."""
    CONTEXT_OVERFLOW = "context_overflow"
    """The conversation no longer fits the model's context window."""
    BAD_REQUEST = "bad_request"
    """The provider rejected the request itself."""
    PROVIDER_ERROR = "provider_error"
    """The provider failed (a server error, a broken stream)."""
    CONNECTION = "connection"
    """The provider could not be reached."""
    STORE_FAILED = "store_failed"
    """A durable write the run depends on failed."""
    RESUME_UNSUPPORTED = "resume_unsupported"
    """The resume token is not native: only native sessions resume."""
    TRANSCRIPT_CORRUPT = "transcript_corrupt"
    """The session's transcript cannot be read back."""
    SESSION_NOT_FOUND = "session_not_found"
    """An explicitly resumed session does not exist."""
    CONFIG_INVALID = "config_invalid"
    """The configuration is wrong (the message says where)."""
    MODEL_UNAVAILABLE = "model_unavailable"
    """The model or its provider is not known or not set up."""
    ENGINE_UNAVAILABLE = "engine_unavailable"
    """No execution runtime took the run."""
    LAUNCH_FAILED = "launch_failed"
    """The executor could not start the run (after its bounded retries)."""
    VANISHED = "vanished"
    """The run disappeared without a completion (the runtime lost it)."""
    EXECUTOR_FAILED = "executor_failed"
    """The executor raised or returned an invalid result."""
    INTERNAL = "internal"
    """A defect inside Lemon (logged with its traceback)."""

    @property
    def retryable(self) -> bool:
        """Whether running the same request again may succeed."""
        return self not in NOT_RETRYABLE


#: Codes a retry cannot fix, or must not attempt (the run's side effects already happened, or
#: it was stopped on purpose).
NOT_RETRYABLE: Final = frozenset(
    {
        ErrorCode.CANCELLED,
        ErrorCode.MAX_TURNS,
        ErrorCode.PROVIDER_AUTH,
        ErrorCode.CONTEXT_OVERFLOW,
        ErrorCode.BAD_REQUEST,
        ErrorCode.STORE_FAILED,
        ErrorCode.RESUME_UNSUPPORTED,
        ErrorCode.TRANSCRIPT_CORRUPT,
        ErrorCode.SESSION_NOT_FOUND,
        ErrorCode.CONFIG_INVALID,
        ErrorCode.MODEL_UNAVAILABLE,
        ErrorCode.INTERNAL,
    }
)
