"""Server-sent events, bounded: the parser both HTTP transports read their streams with.

:func:`sse_events` yields each event of a ``text/event-stream`` body as an :class:`SseEvent`
(``event``, ``data`` with its lines joined by ``\\n``, ``id``, ``retry``); an event that only
sets an ``id`` or a ``retry`` (a priming event) is yielded too, with empty data. A line longer than
``max_bytes`` or an event whose data grows past it raises :class:`~lemon_mcp.McpProtocolError`
before more is buffered (the 16 MiB frame cap: a server cannot make us hold more).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec

from lemon_mcp.errors import McpProtocolError

__all__ = ["SseEvent", "sse_events"]


class SseEvent(msgspec.Struct, frozen=True, kw_only=True):
    event: str = "message"
    data: bytes = b""
    id: str | None = None
    retry_ms: int | None = None


async def sse_events(chunks: AsyncIterator[bytes], *, max_bytes: int) -> AsyncIterator[SseEvent]:
    """Each event of the stream (a trailing event without its blank line is dispatched too)."""
    buffer = bytearray()
    data: list[bytes] = []
    size = 0
    event, event_id, retry = "message", None, None
    marked = False  # this event set an id or a retry (a priming event may carry no data)
    async for chunk in chunks:
        buffer += chunk
        if len(buffer) > max_bytes and buffer.find(b"\n") < 0:
            raise McpProtocolError(f"an SSE line over {max_bytes} bytes")
        while (cut := buffer.find(b"\n")) >= 0:
            line = bytes(buffer[:cut]).rstrip(b"\r")
            del buffer[: cut + 1]
            if not line:
                if data or event != "message" or marked:
                    yield SseEvent(event=event, data=b"\n".join(data), id=event_id, retry_ms=retry)
                data, size, event, retry, marked = [], 0, "message", None, False
                continue
            if line.startswith(b":"):
                continue  # a comment (keep-alive)
            field, _, value = line.partition(b":")
            value = value.removeprefix(b" ")
            if field == b"data":
                size += len(value) + 1
                if size > max_bytes:
                    raise McpProtocolError(f"an SSE event over {max_bytes} bytes")
                data.append(value)
            elif field == b"event":
                event = value.decode("utf-8", "replace") or "message"
            elif field == b"id":
                event_id, marked = value.decode("utf-8", "replace"), True
            elif field == b"retry" and value.isdigit():
                retry, marked = int(value), True
        if len(buffer) > max_bytes:
            raise McpProtocolError(f"an SSE line over {max_bytes} bytes")
    if data:
        yield SseEvent(event=event, data=b"\n".join(data), id=event_id, retry_ms=retry)
