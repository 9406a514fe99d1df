"""The gateway's error hierarchy.

Misuse (a bad submission) is apart from runtime conditions (not running, full, executor not
ready). Nothing here is raised for a run's own failure: a run that fails *completes* with
``ok=False`` and an error, it is never rejected after acceptance::

    GatewayError
    ├── InvalidSubmissionError (TypeError)         not an ExecutionCommand
    ├── MissingConversationKeyError (ValueError)   no router-owned conversation key
    ├── DuplicateRunError (ValueError)             a run id that is still live
    ├── GatewayConfigError (ValueError)            an unknown key or a wrong type
    ├── GatewayNotRunningError                     used outside its ``async with``
    ├── GatewayOverloadedError                     a full bound
    ├── ExecutorNotReadyError                      the executor is not ready (with the reason)
    ├── WrongThreadError (RuntimeError)            a loop-only call from another thread
    ├── BoundExpiredError (TimeoutError)           lemon_gateway._bound: an await ran past its bound
    └── LockTimeoutError (TimeoutError)            lemon_gateway._lock: EngineLock not granted

A test (``test_gateway_error_tree.py``) keeps this drawing equal to the classes.
"""

from __future__ import annotations

__all__ = [
    "DuplicateRunError",
    "ExecutorNotReadyError",
    "GatewayConfigError",
    "GatewayError",
    "GatewayNotRunningError",
    "GatewayOverloadedError",
    "InvalidSubmissionError",
    "MissingConversationKeyError",
    "WrongThreadError",
]


class GatewayError(Exception):
    """Base class of every gateway error."""


class InvalidSubmissionError(GatewayError, TypeError):
    """Misuse: ``submit_execution`` was given something that is not an ExecutionCommand."""


class MissingConversationKeyError(GatewayError, ValueError):
    """Misuse: the command has no router-owned conversation key."""


class DuplicateRunError(GatewayError, ValueError):
    """Misuse: a run with the same run_id is still queued or running."""


class GatewayConfigError(GatewayError, ValueError):
    """Misuse: a gateway setting is invalid (the message names the key and the fix)."""


class GatewayNotRunningError(GatewayError):
    """The gateway is not started (or is stopping); nothing was accepted."""


class GatewayOverloadedError(GatewayError):
    """A pending-run bound was reached; nothing was accepted, retry later."""


class ExecutorNotReadyError(GatewayError):
    """The configured executor is missing or invalid; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"executor not ready: {reason}")
        self.reason = reason


class WrongThreadError(GatewayError, RuntimeError):
    """Misuse: a loop-only method was called from another thread (the message names the
    thread-safe twin to use instead, e.g. ``cancel_threadsafe``)."""
