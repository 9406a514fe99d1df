"""lemon_browser's errors: one base; refusals (the guard, the content type, the size) apart
from failures (the network, the server)."""

from __future__ import annotations

__all__ = [
    "FetchFailed",
    "FetchRefused",
    "SearchError",
    "WebError",
    "WebUsageError",
]


class WebError(Exception):
    """Base of this app's errors; the message says what happened and what to do."""


class WebUsageError(WebError, ValueError):
    """A caller's mistake: a malformed URL, an unknown provider, a missing key variable."""


class FetchRefused(WebError):
    """The fetch was refused before or while reading: a guarded address, a scheme, a content
    type, a body over the bound. ``reason`` is a short code (``address``, ``scheme``,
    ``content_type``, ``too_large``, ``redirects``)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class FetchFailed(WebError):
    """The fetch failed: a connection error, a timeout, an HTTP error status."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class SearchError(WebError):
    """A search provider failed (``status``: the HTTP status, when there was one;
    ``retry_after_s``: what a 429 said)."""

    def __init__(
        self, message: str, *, status: int | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s
