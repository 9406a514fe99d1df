"""The error hierarchy of lemon_ai.

Two branches: :class:`LemonAiUsageError` for misuse (unknown model, bad option) that a caller
fixes in code or configuration, and :class:`ProviderError` for failures of a model provider at
run time. Every provider translates foreign exceptions (httpx, JSON decoding) into a
``ProviderError`` at its edge, classified by :class:`ErrorKind`, so callers branch on the kind and
never on a transport library's exception types::

    LemonAiError
    ├── LemonAiUsageError                 misuse: fix the call or the configuration
    │   ├── UnknownModelError             a model reference naming no known model or provider
    │   └── InvalidImageError             an image a model cannot be sent (type, size, bytes)
    ├── ProviderError                     a provider call failed (``kind``: an ErrorKind)
    │   ├── AuthError                     auth
    │   ├── RateLimitError                rate_limit
    │   ├── ContextOverflowError          context_overflow
    │   ├── BadRequestError               bad_request
    │   ├── ServerError                   server
    │   ├── ProviderConnectionError       connection
    │   └── ProtocolError                 protocol
    └── SSEError                          lemon_ai.sse: a byte stream that is not an event stream

A test (``test_ai_error_tree.py``) keeps this drawing equal to the classes.
"""

from __future__ import annotations

import enum

__all__ = [
    "AuthError",
    "BadRequestError",
    "ContextOverflowError",
    "ErrorKind",
    "InvalidImageError",
    "LemonAiError",
    "LemonAiUsageError",
    "ProtocolError",
    "ProviderConnectionError",
    "ProviderError",
    "RateLimitError",
    "ServerError",
    "UnknownModelError",
]


class ErrorKind(enum.StrEnum):
    """What went wrong with a provider call, independent of the wire format."""

    AUTH = "auth"
    """The credential is missing, wrong or lacks permission (HTTP 401/403)."""
    RATE_LIMIT = "rate_limit"
    """The provider asked us to slow down (HTTP 429), or the quota is exhausted."""
    CONTEXT_OVERFLOW = "context_overflow"
    """The prompt does not fit the model's context window."""
    BAD_REQUEST = "bad_request"
    """The provider rejected the request as malformed (other 4xx)."""
    SERVER = "server"
    """The provider failed (5xx, Anthropic's 529 overloaded, an error event mid-stream)."""
    CONNECTION = "connection"
    """The connection could not be made, timed out, or broke mid-stream."""
    PROTOCOL = "protocol"
    """The provider answered something that does not follow its wire format."""


class LemonAiError(Exception):
    """Base class of every error raised by lemon_ai."""


class LemonAiUsageError(LemonAiError):
    """lemon_ai was used wrongly (bad model reference, invalid option); fix the call or config."""


class UnknownModelError(LemonAiUsageError):
    """A ``provider:model_id`` reference names no known model or provider."""


class InvalidImageError(LemonAiUsageError):
    """An attached image that cannot be sent to a model: an unsupported media type, data that
    is not base64 or not an image, or more bytes (or images) than the limits allow."""


class ProviderError(LemonAiError):
    """A model provider failed at run time.

    ``kind`` classifies the failure; ``retryable`` says whether trying again may help;
    ``retry_after`` is the delay in seconds the provider asked for, when it did; ``status`` is the
    HTTP status when there was one.
    """

    kind: ErrorKind = ErrorKind.SERVER

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = None,
        retryable: bool | None = None,
        retry_after: float | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.status = status
        self.retry_after = retry_after
        self.code = code
        self.retryable = (
            retryable
            if retryable is not None
            else self.kind in {ErrorKind.RATE_LIMIT, ErrorKind.SERVER, ErrorKind.CONNECTION}
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, kind={self.kind.value}, "
            f"status={self.status}, retryable={self.retryable})"
        )


class AuthError(ProviderError):
    """The credential is missing or rejected; configure a valid API key."""

    kind = ErrorKind.AUTH


class RateLimitError(ProviderError):
    """The provider rate-limited the call; see ``retry_after``."""

    kind = ErrorKind.RATE_LIMIT


class ContextOverflowError(ProviderError):
    """The conversation no longer fits the model's context window; compact or start fresh."""

    kind = ErrorKind.CONTEXT_OVERFLOW


class BadRequestError(ProviderError):
    """The provider rejected the request as invalid."""

    kind = ErrorKind.BAD_REQUEST


class ServerError(ProviderError):
    """The provider failed on its side."""

    kind = ErrorKind.SERVER


class ProviderConnectionError(ProviderError):
    """The provider could not be reached, timed out, or the stream broke."""

    kind = ErrorKind.CONNECTION


class ProtocolError(ProviderError):
    """The provider's answer did not follow its wire format."""

    kind = ErrorKind.PROTOCOL


ERROR_CLASSES: dict[ErrorKind, type[ProviderError]] = {
    ErrorKind.AUTH: AuthError,
    ErrorKind.RATE_LIMIT: RateLimitError,
    ErrorKind.CONTEXT_OVERFLOW: ContextOverflowError,
    ErrorKind.BAD_REQUEST: BadRequestError,
    ErrorKind.SERVER: ServerError,
    ErrorKind.CONNECTION: ProviderConnectionError,
    ErrorKind.PROTOCOL: ProtocolError,
}
