"""Error classes carry their kind and a retryable default."""

from __future__ import annotations

from lemon_ai import (
    AuthError,
    ContextOverflowError,
    ErrorKind,
    ProviderConnectionError,
    RateLimitError,
    ServerError,
)


def test_kinds_and_retryable_defaults() -> None:
    assert AuthError("x").kind is ErrorKind.AUTH
    assert not AuthError("x").retryable
    assert not ContextOverflowError("x").retryable
    assert RateLimitError("x", retry_after=2.0).retryable
    assert ServerError("x").retryable
    assert ProviderConnectionError("x").retryable
    assert not RateLimitError("quota", retryable=False).retryable
    assert "kind=rate_limit" in repr(RateLimitError("x"))
