"""lemon_mcp's errors: one base, the protocol and transport failures under it."""

from __future__ import annotations

from lemon_core.errors import LemonCoreError

__all__ = [
    "McpAuthError",
    "McpConnectionError",
    "McpError",
    "McpHttpStatusError",
    "McpProtocolError",
    "McpRemoteError",
    "McpTimeoutError",
]


class McpError(LemonCoreError):
    """Base of every lemon_mcp error."""


class McpConnectionError(McpError):
    """The server could not be started or reached, or its connection ended (with the reason)."""


class McpHttpStatusError(McpConnectionError):
    """The HTTP server answered an error status (``status``: 401 needs a login, 400/404/405
    on ``initialize`` means an older transport). When the answer's body is a JSON-RPC error
    (the SDK's server answers an unknown method with HTTP 404 and -32601), ``rpc_code`` and
    ``rpc_message`` keep it, and the message says it; else both are None."""

    def __init__(
        self, status: int, message: str, *, rpc_code: int | None = None,
        rpc_message: str | None = None,
    ) -> None:  # fmt: skip
        if rpc_code is not None:
            message = f"{message}: {rpc_message} (JSON-RPC error {rpc_code})"
        super().__init__(message)
        self.status = status
        self.rpc_code = rpc_code
        self.rpc_message = rpc_message


class McpAuthError(McpConnectionError):
    """OAuth failed or is needed (``lemon mcp login NAME``); never carries a token."""


class McpProtocolError(McpConnectionError):
    """The server broke the protocol (garbage, an oversized frame, an unknown response id):
    its connection is ended."""


class McpTimeoutError(McpError, TimeoutError):
    """The server did not answer in time (start-up or a call)."""


class McpRemoteError(McpError):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{message} (JSON-RPC error {code})")
        self.code = code
        self.remote_message = message
