"""What the scripted provider server answers: turns (streams) and errors, in wire-neutral form."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal

__all__ = [
    "Gate",
    "RecordedRequest",
    "RecordedStream",
    "ScriptItem",
    "ScriptedError",
    "ScriptedToolCall",
    "ScriptedTurn",
]


class Gate:
    """A one-shot barrier between a test and the server thread.

    The server pauses a stream at the gate (``ScriptedTurn.pause``); the test learns the server
    got there with :meth:`wait_reached` and lets it continue with :meth:`open`. Thread-safe in
    both directions; no polling.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._opened = threading.Event()
        self._reached = threading.Event()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    @property
    def is_open(self) -> bool:
        return self._opened.is_set()

    def open(self) -> None:
        """Let every paused stream continue (idempotent, from any thread)."""
        with self._lock:
            self._opened.set()
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            loop.call_soon_threadsafe(event.set)

    def wait_reached(self, timeout: float = 10.0) -> bool:
        """Block until a stream paused at this gate; return False on timeout."""
        return self._reached.wait(timeout)

    async def wait_reached_async(self, limit: float = 10.0) -> bool:
        """:meth:`wait_reached` for async tests (waits in a worker thread)."""
        return await asyncio.to_thread(self._reached.wait, limit)

    async def _pause(self) -> None:
        """Server side: mark the gate reached and wait until it is opened."""
        event = asyncio.Event()
        with self._lock:
            self._reached.set()
            if self._opened.is_set():
                return
            self._waiters.append((asyncio.get_running_loop(), event))
        await event.wait()


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptedToolCall:
    """A tool call the scripted model makes; ``arguments`` as a dict, or raw text (may be bad)."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def raw_arguments(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), separators=(",", ":"))


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptedTurn:
    """One successful streamed response, rendered in whichever wire format was requested.

    ``chunk_size`` is the characters per text/thinking/argument delta; every SSE frame is written
    separately. ``delay`` sleeps between frames (a slow stream). ``pause`` holds the stream at a
    :class:`Gate` after ``pause_after`` frames. ``disconnect_after`` cuts the connection after
    that many frames, without the end of the response (a mid-stream failure); ``error`` ends it
    with the wire format's in-stream error event instead.
    """

    text: str = ""
    thinking: str = ""
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    stop_reason: Literal["stop", "length"] = "stop"
    input_tokens: int = 12
    output_tokens: int = 7
    cached_tokens: int = 0
    chunk_size: int = 8
    delay: float = 0.0
    pause: Gate | None = None
    pause_after: int = 2
    disconnect_after: int | None = None
    error: ScriptedError | None = None
    """Send this as an in-stream error event after ``error_after`` frames, then end the stream."""
    error_after: int = 2


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptedError:
    """An HTTP error answer, with the body each wire format uses."""

    status: int
    message: str
    openai_code: str | None = None
    anthropic_type: str | None = None
    retry_after: float | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def rate_limited(cls, retry_after: float | None = 1.0) -> ScriptedError:
        """429 with ``retry-after`` (seconds) when given."""
        return cls(
            status=429,
            message="Rate limit reached for requests",
            openai_code="rate_limit_exceeded",
            anthropic_type="rate_limit_error",
            retry_after=retry_after,
        )

    @classmethod
    def server_error(cls, status: int = 500) -> ScriptedError:
        return cls(
            status=status,
            message="The server had an error while processing your request",
            openai_code="server_error",
            anthropic_type="overloaded_error" if status == 529 else "api_error",
        )

    @classmethod
    def unauthorized(cls) -> ScriptedError:
        return cls(
            status=401,
            message="Incorrect API key provided",
            openai_code="invalid_api_key",
            anthropic_type="authentication_error",
        )

    @classmethod
    def context_overflow(cls) -> ScriptedError:
        return cls(
            status=400,
            message=(
                "This model's maximum context length is 128000 tokens. However, your messages "
                "resulted in 130512 tokens (prompt is too long: 130512 tokens > 128000 maximum)."
            ),
            openai_code="context_length_exceeded",
            anthropic_type="invalid_request_error",
        )

    @classmethod
    def bad_request(cls, message: str = "Invalid request") -> ScriptedError:
        return cls(
            status=400,
            message=message,
            openai_code="invalid_request_error",
            anthropic_type="invalid_request_error",
        )


_PACKAGE = "lemon_platform_test.providers"


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordedStream:
    """A response replayed byte for byte: ``body`` exactly as a real server sent it.

    ``chunk_size`` splits the body into writes of at most that many bytes (``None``: one write),
    so a test can check that any chunking gives the same result. :meth:`load` reads one of the
    recorded-stream fixtures shipped with this package (``recordings/<name>.sse``; see
    :func:`recording_names`).
    """

    body: bytes
    chunk_size: int | None = None
    status: int = 200
    content_type: str = "text/event-stream"
    name: str = ""

    @classmethod
    def load(cls, name: str, *, chunk_size: int | None = None) -> RecordedStream:
        """The recorded-stream fixture ``name`` (file ``recordings/<name>.sse``)."""
        path = resources.files(_PACKAGE).joinpath("recordings", f"{name}.sse")
        if not path.is_file():
            known = ", ".join(recording_names())
            raise LookupError(f"no recorded stream named {name!r}; known: {known}")
        return cls(body=path.read_bytes(), chunk_size=chunk_size, name=name)

    def chunks(self) -> list[bytes]:
        """The writes the server makes for this body."""
        if self.chunk_size is None or self.chunk_size <= 0:
            return [self.body]
        size = self.chunk_size
        return [self.body[i : i + size] for i in range(0, len(self.body), size)]


def recording_names() -> list[str]:
    """The names of the recorded-stream fixtures shipped with this package, sorted."""
    folder = resources.files(_PACKAGE).joinpath("recordings")
    return sorted(
        entry.name.removesuffix(".sse") for entry in folder.iterdir() if entry.name.endswith(".sse")
    )


ScriptItem = ScriptedTurn | ScriptedError | RecordedStream


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordedRequest:
    """A request the server received (headers lower-cased, body parsed as JSON when it was)."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
