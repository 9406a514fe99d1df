"""The JSON-RPC 2.0 wire of MCP, typed with msgspec: requests, notifications, responses.

One message per frame (a stdio line, an HTTP body or an SSE ``data`` event); batches are not
sent (MCP 2025-06-18 removed them) and a batch received is a protocol error.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from lemon_mcp.errors import McpProtocolError

__all__ = [
    "CLIENT_CAPABILITIES_META",
    "CLIENT_INFO_META",
    "LATEST_PROTOCOL",
    "MODERN_PROTOCOLS",
    "PROTOCOL_VERSION_META",
    "SERVER_INFO_META",
    "SUPPORTED_PROTOCOLS",
    "Incoming",
    "RpcError",
    "decode",
    "encode_error",
    "encode_notification",
    "encode_request",
    "encode_result",
]

#: The versions we speak, newest first (``initialize`` offers the first; the server may
#: answer any of these).
SUPPORTED_PROTOCOLS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST_PROTOCOL: Final = SUPPORTED_PROTOCOLS[0]

#: The stateless era (no ``initialize``, no session): ``server/discover`` tells the server's
#: versions and capabilities, and every request carries its protocol version, the client's
#: capabilities and info in ``params._meta`` (over HTTP also as headers: ``MCP-Protocol-Version``,
#: ``Mcp-Method``, and ``Mcp-Name`` for a named tool, prompt or resource).
MODERN_PROTOCOLS: Final = ("2026-07-28",)
PROTOCOL_VERSION_META: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO_META: Final = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES_META: Final = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_META: Final = "io.modelcontextprotocol/serverInfo"


class RpcError(msgspec.Struct, frozen=True, kw_only=True):
    code: int
    message: str = ""
    data: Any = None


class Incoming(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Any message from the server: a response (``id`` and ``result`` or ``error``), a request
    (``id`` and ``method``) or a notification (``method`` only)."""

    jsonrpc: str = "2.0"
    id: int | str | None = None
    method: str | None = None
    params: Any = None
    result: Any = msgspec.UNSET
    error: RpcError | None = None

    @property
    def is_response(self) -> bool:
        return self.method is None and self.id is not None


class _Request(msgspec.Struct, frozen=True, kw_only=True):
    jsonrpc: str = "2.0"
    id: int | str
    method: str
    params: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET


class _Notification(msgspec.Struct, frozen=True, kw_only=True):
    jsonrpc: str = "2.0"
    method: str
    params: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET


class _Result(msgspec.Struct, frozen=True, kw_only=True):
    jsonrpc: str = "2.0"
    id: int | str
    result: Any


class _Error(msgspec.Struct, frozen=True, kw_only=True):
    jsonrpc: str = "2.0"
    id: int | str | None
    error: RpcError


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(Incoming)


def encode_request(id: int | str, method: str, params: dict[str, Any] | None = None) -> bytes:
    return _encoder.encode(
        _Request(id=id, method=method, params=msgspec.UNSET if params is None else params)
    )


def encode_notification(method: str, params: dict[str, Any] | None = None) -> bytes:
    return _encoder.encode(
        _Notification(method=method, params=msgspec.UNSET if params is None else params)
    )


def encode_result(id: int | str, result: Any) -> bytes:
    return _encoder.encode(_Result(id=id, result=result))


def encode_error(id: int | str | None, code: int, message: str) -> bytes:
    return _encoder.encode(_Error(id=id, error=RpcError(code=code, message=message)))


def decode(frame: bytes) -> Incoming:
    """One message, or :class:`McpProtocolError` saying what is wrong with the frame."""
    try:
        message = _decoder.decode(frame)
    except msgspec.DecodeError as exc:
        raise McpProtocolError(f"not a JSON-RPC message: {exc}") from None
    if message.jsonrpc != "2.0":
        raise McpProtocolError(f"not JSON-RPC 2.0 (jsonrpc={message.jsonrpc!r})")
    return message
