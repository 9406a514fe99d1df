"""An incremental Server-Sent Events decoder (the WHATWG event-stream format).

:class:`SSEDecoder` is fed raw bytes as they arrive, in chunks of any size, and returns the
events completed so far. Any split of the same byte stream yields the same events (a multi-byte
UTF-8 character or a CRLF pair may straddle two chunks). Lines end with LF, CR or CRLF; lines
starting with ``:`` are comments; an event is dispatched at a blank line when it has data; a final
event without its blank line is discarded, as the specification says.

The decoder buffers at most one incomplete line; ``max_line_bytes`` bounds it (a longer line
raises :class:`SSEError`) so a broken server cannot grow memory without limit.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from lemon_ai.errors import LemonAiError

__all__ = ["SSEDecoder", "SSEError", "ServerSentEvent"]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class SSEError(LemonAiError):
    """The byte stream is not a valid event stream (for example, a line over the bound)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerSentEvent:
    """One dispatched event."""

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Turns chunks of an event stream into :class:`ServerSentEvent` values."""

    def __init__(self, *, max_line_bytes: int = 4 * 1024 * 1024) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._first = True
        self._max_line = max_line_bytes
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._last_id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode ``chunk`` and return the events it completed (possibly none)."""
        text = self._decoder.decode(chunk)
        if self._first and text:
            self._first = False
            text = text.removeprefix("\ufeff")
        if not text:
            return []
        text = self._pending + text
        lines = _LINE_BREAK.split(text)
        # The last piece has no line ending yet. A trailing CR might be the first half of CRLF,
        # so it is kept back until the next chunk (or the end) decides.
        rest = lines.pop()
        if text.endswith("\r"):
            # ``rest`` is the empty piece after that CR; hold back the line it ended instead.
            rest = lines.pop() + "\r"
        self._pending = rest
        if len(self._pending) > self._max_line:
            raise SSEError(
                f"event-stream line longer than {self._max_line} characters; the server is not "
                "sending a valid event stream"
            )
        events: list[ServerSentEvent] = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def close(self) -> list[ServerSentEvent]:
        """Finish the stream: flush a pending line; an event without its blank line is dropped."""
        tail = self._pending + self._decoder.decode(b"", final=True)
        self._pending = ""
        events: list[ServerSentEvent] = []
        for line in _LINE_BREAK.split(tail)[:-1] if tail else []:
            event = self._line(line)
            if event is not None:
                events.append(event)
        self._event, self._data, self._id, self._retry = "", [], None, None
        return events

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line[0] == ":":
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        if self._id is not None:
            self._last_id = self._id
        if not self._data:
            self._event, self._id, self._retry = "", None, None
            return None
        event = ServerSentEvent(
            event=self._event or "message",
            data="\n".join(self._data),
            id=self._last_id,
            retry=self._retry,
        )
        self._event, self._data, self._id, self._retry = "", [], None, None
        return event
