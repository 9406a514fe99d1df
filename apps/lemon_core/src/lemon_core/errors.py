"""The error hierarchy of lemon_core.

``LemonCoreError`` is the base of every error lemon_core raises on purpose, wherever it is
defined (the module is named on the right). Misuse (a bad argument, a payload that does not fit
its record) is kept apart from runtime failures (a closed bus or handle). The stdlib class in
parentheses is a mixin, so a caller that catches ``ValueError`` (or ``RuntimeError``...) keeps
working::

    LemonCoreError
    ├── UsageError (ValueError)                     lemon_core.errors
    │   └── UsageTypeError (TypeError)
    ├── LifecycleError (RuntimeError)               lemon_core.errors
    ├── EventPayloadError (ValueError)              lemon_core.errors
    ├── BusError                                    lemon_core.errors
    │   ├── BusBackendUnavailableError (RuntimeError)
    │   ├── BusClosedError (RuntimeError)
    │   ├── DeliveryClosedError (RuntimeError)
    │   └── UnencodableItemError (TypeError)
    ├── StoreError                                  lemon_core.store.errors
    │   ├── InvalidStoreKeyError (ValueError)
    │   ├── StoreValueError (ValueError)
    │   │   └── IllegalTaskTransitionError
    │   ├── StoreClosedError
    │   ├── StoreUnavailableError
    │   ├── StoreCorruptError
    │   ├── StoreBackupError
    │   └── StaleLeaseError
    ├── ConfigError (ValueError)                    lemon_core.config
    ├── ExecutionContractError (ValueError)         lemon_core.execution.errors
    │   ├── InvalidToolPolicyError
    │   └── PermissionEscalationError
    ├── RouterUnavailableError (RuntimeError)       lemon_core.execution.errors
    ├── CapabilityMissingError (LookupError)        lemon_core.execution
    ├── CapabilityConflictError (RuntimeError)      lemon_core.execution
    ├── EditorCallError (RuntimeError)              lemon_core.execution
    ├── RuntimeBootError (RuntimeError)             lemon_core.runtime_errors
    │   └── AppHookError
    ├── RuntimeUsageError (ValueError)              lemon_core.runtime_errors
    ├── SessionError                                lemon_core.sessions.errors
    │   ├── SessionStreamClosedError (RuntimeError)
    │   └── InvalidSessionKeyError (UsageError)
    ├── SupervisorClosedError (RuntimeError)        lemon_core.tasks
    ├── BackoffUsageError (ValueError)              lemon_core.backoff
    ├── CwdError (ValueError)                       lemon_core.cwd
    ├── IdempotencyError                            lemon_core.idempotency.errors
    │   ├── InvalidIdempotencyKeyError (ValueError)
    │   └── IdempotencyStoreError
    └── ApprovalError                               lemon_core.approvals
        ├── ApprovalCapacityError
        ├── ApprovalUsageError (UsageError)
        └── UnknownApprovalError

``UsageError`` is the refusal of a caller's input (a bad argument, an unknown name); its
message says what to pass instead. A session port's implementation derives its own usage
errors from it (lemon_router's ``RouterUsageError`` does), so a wire maps the whole family to
its "invalid params" answer by class, and anything else that escapes (a plain ``ValueError``
included) reads as an internal failure. ``LifecycleError`` is an object used outside its
lifecycle (a backend given to a second bus, a second waiting consumer).

A test (``test_core_error_tree.py``) keeps this drawing equal to the classes.
"""

from __future__ import annotations

__all__ = [
    "BusBackendUnavailableError",
    "BusClosedError",
    "BusError",
    "DeliveryClosedError",
    "EventPayloadError",
    "LemonCoreError",
    "LifecycleError",
    "UnencodableItemError",
    "UsageError",
    "UsageTypeError",
]


class LemonCoreError(Exception):
    """Base of every error lemon_core raises on purpose."""


class UsageError(LemonCoreError, ValueError):
    """The caller passed a value lemon_core (or a session port) cannot accept; the message
    says what to pass instead."""


class UsageTypeError(UsageError, TypeError):
    """The caller passed a value of the wrong type (still a ``TypeError``)."""


class LifecycleError(LemonCoreError, RuntimeError):
    """An object used outside its lifecycle (shared where it serves one owner, a call that
    needs a running task, a second waiter where one is allowed)."""


class EventPayloadError(LemonCoreError, ValueError):
    """A payload does not fit its registered record (unknown, missing or mistyped fields)."""


class BusError(LemonCoreError):
    """Base of the Bus and delivery errors."""


class BusBackendUnavailableError(BusError, RuntimeError):
    """A networked bus backend (Redis) cannot be reached; the message names the server
    (password redacted) and the cause."""


class BusClosedError(BusError, RuntimeError):
    """The bus was closed: it accepts no more publications or subscriptions."""


class DeliveryClosedError(BusError, RuntimeError):
    """The delivery handle was closed (or replaced) and has nothing more to give."""


class UnencodableItemError(BusError, TypeError):
    """A published item cannot be measured because it is not JSON-encodable."""
