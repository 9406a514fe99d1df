"""lemon_acp's errors: a base, and the JSON-RPC error every refusal is answered with."""

from __future__ import annotations

from typing import Any, Final

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "AcpError",
    "RpcError",
]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603


class AcpError(Exception):
    """Base of this app's errors."""


class RpcError(AcpError):
    """A JSON-RPC error answer: ``code``, ``message`` and optional ``data``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def wire(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    @classmethod
    def bad_params(cls, field: str, message: str) -> RpcError:
        return cls(INVALID_PARAMS, f"{field}: {message}", {"field": field})
