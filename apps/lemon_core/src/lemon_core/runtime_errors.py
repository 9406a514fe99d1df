"""Errors of the runtime boot (under :class:`~lemon_core.errors.LemonCoreError`).

::

    LemonCoreError
    ├── RuntimeBootError (RuntimeError)     the runtime could not be booted
    │   └── AppHookError                    an app's start or stop hook raised
    └── RuntimeUsageError (ValueError)      the runtime was used wrongly
"""

from __future__ import annotations

from lemon_core.errors import LemonCoreError

__all__ = ["AppHookError", "RuntimeBootError", "RuntimeUsageError"]


class RuntimeBootError(LemonCoreError, RuntimeError):
    """The runtime could not be booted (bad profile, unknown or cyclic app requirements)."""


class AppHookError(RuntimeBootError):
    """An app's start or stop hook raised; ``app`` and ``hook`` say which one.

    When a start hook fails, the apps already started were stopped (in reverse order) before
    this error was raised; failures of those stop hooks are listed in ``stop_errors``.
    """

    def __init__(
        self,
        message: str,
        *,
        app: str,
        hook: str,
        stop_errors: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.app = app
        self.hook = hook
        self.stop_errors = stop_errors


class RuntimeUsageError(LemonCoreError, ValueError):
    """The runtime was used wrongly (started twice, stopped from another task...)."""
