"""Errors of the control plane.

::

    ControlPlaneError
    ├── ControlPlaneConfigError (ValueError)   a configuration that must not start (misuse)
    └── WireError                              a request the wire refuses: a code, a message
        ├── FrameError                         (lemon_control_plane._frames) refused before dispatch
        └── WireUsageError (UsageError)        the daemon refused a client's params (client side)
"""

from __future__ import annotations

from typing import Final, Literal, get_args

from lemon_core.errors import UsageError

__all__ = [
    "ERROR_CODES",
    "ControlPlaneConfigError",
    "ControlPlaneError",
    "WireError",
    "WireErrorCode",
    "WireUsageError",
]

WireErrorCode = Literal[
    "INVALID_REQUEST",
    "INVALID_PARAMS",
    "METHOD_NOT_FOUND",
    "UNAUTHORIZED",
    "FORBIDDEN",
    "PERMISSION_DENIED",
    "NOT_FOUND",
    "CONFLICT",
    "RATE_LIMITED",
    "TIMEOUT",
    "INTERNAL_ERROR",
    "NOT_IMPLEMENTED",
    "HANDSHAKE_REQUIRED",
    "ALREADY_CONNECTED",
    "UNAVAILABLE",
]
#: The fifteen error codes of the wire (the terminal client knows exactly these).
ERROR_CODES: Final[frozenset[str]] = frozenset(get_args(WireErrorCode))

_NO_DETAILS: Final = object()


class ControlPlaneError(Exception):
    """Base of the control plane's errors."""


class ControlPlaneConfigError(ControlPlaneError, ValueError):
    """The control plane refuses to start with this configuration (the message says why)."""


class WireError(ControlPlaneError):
    """A request refused on the wire: ``code`` (one of :data:`ERROR_CODES`), ``message`` and
    optional ``details`` (sent as the ``res`` frame's ``error`` body)."""

    def __init__(self, code: WireErrorCode, message: str, details: object = _NO_DETAILS) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown wire error code {code!r}")
        super().__init__(f"{code}: {message}")
        self.code: WireErrorCode = code
        self.message = message
        self.details = details

    def body(self) -> dict[str, object]:
        """The wire's error body ``{code, message, details?}``."""
        out: dict[str, object] = {"code": self.code, "message": self.message}
        if self.details is not _NO_DETAILS:
            out["details"] = self.details
        return out


class WireUsageError(WireError, UsageError):
    """The daemon refused a request's params (``INVALID_PARAMS`` / ``INVALID_REQUEST``), as
    :class:`~lemon_control_plane.WebSocketSessionPort` raises it: lemon_core's ``UsageError``
    (a ``ValueError``), like the in-process port's usage errors, so a caller catches the same
    class whichever port it holds."""
