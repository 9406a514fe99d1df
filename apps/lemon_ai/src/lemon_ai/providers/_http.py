"""What the HTTP providers share: the retry loop, error classification and SSE reading.

A call is retried only before its response began (an HTTP error status or a connection failure);
once a 200 event stream is flowing, a failure ends the stream with an ``ErrorEvent`` because output
may already be visible downstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AsyncExitStack
from typing import Any

import httpx
import msgspec

from lemon_ai._assembler import MessageAssembler
from lemon_ai.errors import (
    ERROR_CLASSES,
    ErrorKind,
    ProtocolError,
    ProviderConnectionError,
    ProviderError,
)
from lemon_ai.events import DoneEvent, ErrorEvent, StartEvent, StreamEvent
from lemon_ai.messages import Context
from lemon_ai.models import Api, Model
from lemon_ai.provider import StreamOptions
from lemon_ai.retry import RetryPolicy, parse_retry_after
from lemon_ai.sse import DEFAULT_MAX_EVENT_BYTES, ServerSentEvent, SSEDecoder, SSEError
from lemon_core.config import redact_text

DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=300.0, write=60.0, pool=60.0)
"""Connect 10 s; 300 s between two reads of a stream (a slow model may think that long)."""

_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "request_too_large",
    "exceeds the context",
)

_json_decoder = msgspec.json.Decoder()


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """One verifying TLS context for every provider client (loading CA roots costs ~0.1 s)."""
    return httpx.create_ssl_context()


def decode_json(data: str | bytes) -> Any:
    """Decode one JSON document; malformed JSON becomes a ProtocolError."""
    try:
        return _json_decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"provider sent malformed JSON in its event stream: {exc}") from exc


def _error_fields(body: Any) -> tuple[str, str, str]:
    """(message, code, type) from an OpenAI-style or Anthropic-style error body."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return (
                str(error.get("message") or ""),
                str(error.get("code") or ""),
                str(error.get("type") or ""),
            )
        if isinstance(error, str):
            return error, "", ""
        if isinstance(body.get("message"), str):
            return body["message"], "", str(body.get("type") or "")
    return "", "", ""


def kind_for(status: int | None, text: str, error_type: str = "") -> ErrorKind:
    """Classify a failure from its HTTP status and error text."""
    lowered = f"{text} {error_type}".lower()
    if status in (401, 403) or error_type in ("authentication_error", "permission_error"):
        return ErrorKind.AUTH
    if status == 413 or any(marker in lowered for marker in _OVERFLOW_MARKERS):
        return ErrorKind.CONTEXT_OVERFLOW
    if status == 429 or error_type == "rate_limit_error":
        return ErrorKind.RATE_LIMIT
    if status is not None and (status >= 500 or status == 408):
        return ErrorKind.SERVER
    if error_type in ("overloaded_error", "api_error", "server_error"):
        return ErrorKind.SERVER
    if status is not None and 400 <= status < 500:
        return ErrorKind.BAD_REQUEST
    if error_type == "invalid_request_error":
        return ErrorKind.BAD_REQUEST
    return ErrorKind.SERVER


_HINTS = {
    ErrorKind.AUTH: "check the API key configured for this provider",
    ErrorKind.CONTEXT_OVERFLOW: "the conversation is too long for the model; compact it or start "
    "a new session",
    ErrorKind.RATE_LIMIT: "the provider is rate limiting; wait or lower the request rate",
}


def classify_error(
    api: Api,
    status: int | None,
    body: Any,
    *,
    headers: Mapping[str, str] | None = None,
    raw: str = "",
    now: float | None = None,
) -> ProviderError:
    """Build the classified error for an HTTP error response or an error event."""
    message, code, error_type = _error_fields(body)
    if not message:
        message = raw.strip()[:500] or (f"HTTP {status}" if status else "provider error")
    kind = kind_for(status, f"{message} {code}", error_type)
    retryable: bool | None = None
    if kind is ErrorKind.RATE_LIMIT and code == "insufficient_quota":
        retryable = False  # a spent quota does not come back by waiting
    prefix = f"{api}: HTTP {status}: " if status else f"{api}: "
    hint = _HINTS.get(kind)
    text = f"{prefix}{message}" + (f" ({hint})" if hint else "")
    return ERROR_CLASSES[kind](
        text,
        provider=api,
        status=status,
        retryable=retryable,
        retry_after=parse_retry_after(headers, now=now) if headers is not None else None,
        code=code or error_type or None,
    )


class HttpProvider:
    """Base of the HTTP providers: owns (or borrows) an ``httpx.AsyncClient``.

    ``max_event_bytes`` bounds one server-sent event (default 64 MiB: a tool call writing a big
    file arrives as one event); a bigger one fails the call with a ``protocol`` error.
    """

    api: Api

    def __init__(
        self,
        *,
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        retry: RetryPolicy | None = None,
        timeout: httpx.Timeout | None = None,
        headers: Mapping[str, str] | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self._api_key = api_key
        self._max_event_bytes = max_event_bytes
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(
            timeout=timeout or DEFAULT_TIMEOUT, verify=shared_ssl_context()
        )
        self._retry = retry or RetryPolicy()
        self._headers = dict(headers or {})

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it."""
        if self._owns_client:
            await self._client.aclose()

    # -- subclass hooks -------------------------------------------------------------------------

    def build_request(
        self, model: Model, context: Context, options: StreamOptions
    ) -> tuple[str, dict[str, str], dict[str, Any]]:
        raise NotImplementedError

    def translate(
        self, events: AsyncIterator[ServerSentEvent], assembler: MessageAssembler
    ) -> AsyncGenerator[StreamEvent, None]:
        raise NotImplementedError

    # -- the shared streaming template ----------------------------------------------------------

    async def stream(
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream one response (see :mod:`lemon_ai.events` for the contract)."""
        assembler = MessageAssembler(model)
        url, headers, body = self.build_request(model, context, options or StreamOptions())
        async with AsyncExitStack() as stack:
            try:
                response = await self._open(url, headers, msgspec.json.encode(body))
            except ProviderError as error:
                yield ErrorEvent(error=error, partial=assembler.message("error", str(error)))
                return
            stack.push_async_callback(response.aclose)
            sse = self._sse(response)
            stack.push_async_callback(sse.aclose)
            events = self.translate(sse, assembler)
            stack.push_async_callback(events.aclose)
            yield StartEvent(model=model.id, provider=model.provider)
            try:
                async for event in events:
                    if isinstance(event, DoneEvent):
                        await _drain(sse)
                    yield event
            except ProviderError as error:
                yield ErrorEvent(error=error, partial=assembler.message("error", str(error)))
            except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
                # A wire shape the translator did not expect (a field of another type): the
                # caller gets a classified error, never a traceback from inside the provider.
                unreadable = ProtocolError(
                    f"{self.api}: the provider sent an event this client cannot read "
                    f"({type(exc).__name__}: {exc})",
                    provider=self.api,
                )
                partial = assembler.message("error", str(unreadable))
                yield ErrorEvent(error=unreadable, partial=partial)

    async def _open(self, url: str, headers: dict[str, str], content: bytes) -> httpx.Response:
        policy = self._retry
        attempt = 1
        while True:
            error: ProviderError
            try:
                request = self._client.build_request("POST", url, headers=headers, content=content)
                response = await self._client.send(request, stream=True)
            except httpx.TimeoutException as exc:
                error = ProviderConnectionError(
                    redact_text(f"{self.api}: timed out reaching {url}: {exc!r}"),
                    provider=self.api,
                )
            except httpx.TransportError as exc:
                error = ProviderConnectionError(
                    redact_text(
                        f"{self.api}: cannot reach {url}: {exc!r} (is the server running and "
                        "the base_url right?)"
                    ),
                    provider=self.api,
                )
            else:
                if response.status_code == 200:
                    content_type = response.headers.get("content-type", "")
                    if "text/event-stream" in content_type:
                        return response
                    raw = (await response.aread())[:500].decode("utf-8", "replace")
                    await response.aclose()
                    raise ProtocolError(
                        redact_text(
                            f"{self.api}: expected an event stream from {url}, got "
                            f"{content_type!r}: {raw}"
                        ),
                        provider=self.api,
                    )
                raw_body = await response.aread()
                await response.aclose()
                text = raw_body.decode("utf-8", "replace")
                try:
                    parsed: Any = msgspec.json.decode(raw_body)
                except msgspec.DecodeError:
                    parsed = None
                error = classify_error(
                    self.api,
                    response.status_code,
                    parsed,
                    headers=response.headers,
                    raw=text,
                    now=policy.clock(),
                )
            if not error.retryable or attempt >= policy.max_attempts:
                raise error
            delay = policy.delay_for(attempt, error.retry_after)
            if delay is None:
                raise error
            await policy.sleep(delay)
            attempt += 1

    async def _sse(self, response: httpx.Response) -> AsyncGenerator[ServerSentEvent, None]:
        decoder = SSEDecoder(max_event_bytes=self._max_event_bytes)
        try:
            async for chunk in response.aiter_bytes():
                for event in decoder.feed(chunk):
                    yield event
            # The body ended cleanly: a last event that lacks its blank line is still taken
            # (servers that close right after it), unless it is torn (its JSON is incomplete).
            for event in decoder.close(dispatch_unterminated=True):
                if _complete(event):
                    yield event
        except httpx.TimeoutException as exc:
            raise ProviderConnectionError(
                f"{self.api}: the stream stalled (read timeout): {exc!r}", provider=self.api
            ) from exc
        except httpx.TransportError as exc:
            raise ProviderConnectionError(
                f"{self.api}: the connection broke mid-stream: {exc!r}", provider=self.api
            ) from exc
        except SSEError as exc:
            raise ProtocolError(f"{self.api}: {exc}", provider=self.api) from exc


def _complete(event: ServerSentEvent) -> bool:
    if event.data == "[DONE]":
        return True
    try:
        _json_decoder.decode(event.data)
    except msgspec.DecodeError:
        return False
    return True


_DRAIN_SECONDS = 0.5
_DRAIN_EVENTS = 16


async def _drain(sse: AsyncGenerator[ServerSentEvent, None]) -> None:
    """Read what follows the end marker so the keep-alive connection goes back to the pool.

    Closing a response whose body was not read to its end makes httpx drop the connection, and
    every later call then pays a new TCP (and TLS) handshake. Bounded in time and events: a
    server that keeps talking after its end marker just loses the connection.
    """
    with contextlib.suppress(TimeoutError, ProviderError):
        async with asyncio.timeout(_DRAIN_SECONDS):
            count = 0
            async for _ in sse:
                count += 1
                if count >= _DRAIN_EVENTS:
                    return


def truncated_stream_error(api: Api) -> ProviderConnectionError:
    """The error for a stream that ended before its end marker."""
    return ProviderConnectionError(
        f"{api}: the stream ended before the response was complete", provider=api
    )
