"""The lemon_router error hierarchy.

``RouterError`` is the base. ``RouterUsageError`` covers misuse (bad input: an invalid session
key, an unknown queue mode, an explicit non-native resume token); ``RouterRuntimeError`` covers
failures while running (the router is not started, the engine runtime refused a command).
Session keys are parsed by lemon_core (:class:`lemon_core.sessions.InvalidSessionKeyError`, a
``ValueError``), re-exported here. ``RouterUsageError`` is lemon_core's ``UsageError`` (a
``ValueError``), the port contract's refusal of bad input, so a wire answers it as the caller's
mistake and anything else as an internal failure. ``RouterNotRunningError`` is also lemon_core's
``RouterUnavailableError``, the contract the RouterBridge speaks::

    RouterError
    ├── RouterUsageError (UsageError)                         misuse: bad input
    │   ├── InvalidRunRequestError                            a RunRequest field (``field``)
    │   └── ResumeError                                       an explicit non-native resume token
    └── RouterRuntimeError (RuntimeError)                     failures while running
        └── RouterNotRunningError (RouterUnavailableError)    outside its ``async with``

A test (``test_router_error_tree.py``) keeps this drawing equal to the classes.
"""

from __future__ import annotations

from lemon_core.errors import UsageError
from lemon_core.execution import RouterUnavailableError


class RouterError(Exception):
    """Base of every error raised by lemon_router."""


class RouterUsageError(RouterError, UsageError):
    """The caller passed something the router cannot accept; the message says how to fix it."""


class InvalidRunRequestError(RouterUsageError):
    """A RunRequest field is invalid (``field`` names it)."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"invalid run request: {field}: {reason}")


class ResumeError(RouterUsageError):
    """An explicit resume token cannot be used (e.g. it is not a native ``lemon`` token)."""


class RouterRuntimeError(RouterError, RuntimeError):
    """The router failed while running."""


class RouterNotRunningError(RouterRuntimeError, RouterUnavailableError):
    """The router was used outside its ``async with`` lifetime (``submit_via_bridge`` turns it
    into ``Unavailable``)."""
