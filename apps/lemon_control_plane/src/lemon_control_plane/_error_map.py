"""Exceptions as wire errors, mapped once, by class.

A method's handler raises; :func:`wire_error` walks the exception's MRO and answers with the
first class in :data:`HANDLERS` (as Starlette's exception handlers do), so the most specific
mapping wins (``PermissionEscalationError`` is ``FORBIDDEN`` although it is also an
``ExecutionContractError``). ``INVALID_PARAMS`` comes only from a refusal of the caller's input:
lemon_core's :class:`~lemon_core.errors.UsageError` (a session port's usage errors derive from
it: lemon_router's ``RouterUsageError`` does) and the execution contracts' own. Anything not in
the table (a plain ``ValueError`` included: a bug, not the client's fault) is
``INTERNAL_ERROR``: logged with its traceback on the server, and the frame carries only the
exception's class name and an id to find the log line by, never its message (it may hold a
secret) or a traceback.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Final

import msgspec

from lemon_control_plane._params import refusal
from lemon_control_plane.errors import WireError
from lemon_core.errors import UsageError
from lemon_core.execution import (
    CapabilityMissingError,
    ExecutionContractError,
    PermissionEscalationError,
    RouterUnavailableError,
)

__all__ = ["HANDLERS", "wire_error"]

_log = logging.getLogger("lemon_control_plane.server")

ErrorHandler = Callable[[BaseException, str], WireError]


def _itself(exc: BaseException, method: str) -> WireError:
    assert isinstance(exc, WireError)
    return exc


def _code(code: str) -> ErrorHandler:
    def handle(exc: BaseException, method: str) -> WireError:
        return WireError(code, str(exc))  # type: ignore[arg-type]  # one of the codes

    return handle


def _timeout(exc: BaseException, method: str) -> WireError:
    return WireError("TIMEOUT", f"{method} timed out")


def _refused(exc: BaseException, method: str) -> WireError:
    assert isinstance(exc, msgspec.ValidationError)
    return refusal(exc)


#: Exception class -> its wire error (looked up along the raised exception's MRO).
HANDLERS: Final[Mapping[type[BaseException], ErrorHandler]] = {
    WireError: _itself,
    msgspec.ValidationError: _refused,
    TimeoutError: _timeout,
    RouterUnavailableError: _code("UNAVAILABLE"),
    CapabilityMissingError: _code("UNAVAILABLE"),
    PermissionEscalationError: _code("FORBIDDEN"),
    ExecutionContractError: _code("INVALID_PARAMS"),
    UsageError: _code("INVALID_PARAMS"),
}


def wire_error(exc: BaseException, method: str) -> WireError:
    """The wire error for ``exc`` raised by ``method`` (see the module docstring)."""
    for cls in type(exc).__mro__:
        handler = HANDLERS.get(cls)
        if handler is not None:
            return handler(exc, method)
    error_id = uuid.uuid4().hex[:12]
    _log.error("method %s failed (error %s)", method, error_id, exc_info=exc)
    return WireError(
        "INTERNAL_ERROR",
        "Method execution failed",
        {"type": type(exc).__name__, "errorId": error_id},
    )
