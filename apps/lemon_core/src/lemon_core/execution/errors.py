"""Errors raised by the execution contracts.

The misuse errors (bad input to a contract) derive from :class:`ExecutionContractError`,
which is a :class:`ValueError` so callers that validate input generically still catch it.
:class:`RouterUnavailableError` is the one availability error: the router behind the
RouterBridge is not taking submissions. Both sit under
:class:`~lemon_core.errors.LemonCoreError`::

    LemonCoreError
    ├── ExecutionContractError (ValueError)
    │   ├── InvalidToolPolicyError          a tool policy with an unknown key or a bad value
    │   └── PermissionEscalationError       a child asked for more than its parent has
    └── RouterUnavailableError (RuntimeError)
"""

from __future__ import annotations

from lemon_core.errors import LemonCoreError

__all__ = [
    "ExecutionContractError",
    "InvalidToolPolicyError",
    "PermissionEscalationError",
    "RouterUnavailableError",
]


class ExecutionContractError(LemonCoreError, ValueError):
    """Base class: a value given to an execution contract is not valid."""


def require_text(owner: str, name: str, value: object, *, allow_empty: bool = False) -> None:
    """Raise :class:`ExecutionContractError` unless ``value`` is a (non-blank) string."""
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        kind = "string" if allow_empty else "non-blank string"
        raise ExecutionContractError(f"{owner}.{name} must be a {kind}, got {value!r}")


class InvalidToolPolicyError(ExecutionContractError):
    """A supplied tool policy has an unknown key or a value of the wrong shape."""


class PermissionEscalationError(ExecutionContractError):
    """A child execution context asked for authority its parent does not have."""


class RouterUnavailableError(LemonCoreError, RuntimeError):
    """The router behind the RouterBridge is not taking submissions (not started, stopping
    or stopped). :func:`~lemon_core.execution.submit_via_bridge` turns it into
    :class:`~lemon_core.execution.Unavailable`."""
