"""An incremental Server-Sent Events decoder (the WHATWG event-stream format).

:class:`SSEDecoder` is fed raw bytes as they arrive, in chunks of any size, and returns the
events completed so far. Any split of the same byte stream yields the same events (a multi-byte
UTF-8 character or a CRLF pair may straddle two chunks). Lines end with LF, CR or CRLF; lines
starting with ``:`` are comments; an event is dispatched at a blank line when it has data. A final
event without its blank line is discarded, as the specification says, unless :meth:`close` is
asked to dispatch it (servers that close the connection right after their last event).

``max_event_bytes`` (default 64 MiB) bounds both the one incomplete line the decoder buffers and
the data of one event; beyond it :class:`SSEError` says so, so a broken server cannot grow memory
without limit. A long line arriving in many chunks costs linear time: pieces are joined only once
its line ending arrives.
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


DEFAULT_MAX_EVENT_BYTES = 64 * 1024 * 1024
"""The default bound of one event (and of one line): 64 MiB."""


def _size(limit: int) -> str:
    mib = 1024 * 1024
    return f"{limit // mib} MiB" if limit % mib == 0 else f"{limit} characters"


class SSEDecoder:
    """Turns chunks of an event stream into :class:`ServerSentEvent` values."""

    def __init__(self, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._parts: list[str] = []
        self._pending_len = 0
        self._first = True
        self._max = max_event_bytes
        self._event = ""
        self._data: list[str] = []
        self._data_len = 0
        self._id: str | None = None
        self._last_id: str | None = None
        self._retry: int | None = None

    @property
    def max_event_bytes(self) -> int:
        """The bound of one event and of one line."""
        return self._max

    def _too_big(self) -> SSEError:
        return SSEError(
            f"an event-stream event is larger than {_size(self._max)}; the server sent a line or "
            "event too big to accept (raise max_event_bytes if this server needs it)"
        )

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode ``chunk`` and return the events it completed (possibly none)."""
        text = self._decoder.decode(chunk)
        if self._first and text:
            self._first = False
            text = text.removeprefix("\ufeff")
        if not text:
            return []
        held_cr = bool(self._parts) and self._parts[-1].endswith("\r")
        if "\n" not in text and "\r" not in text and not held_cr:
            # The line goes on: keep the piece, join once its line ending arrives.
            self._parts.append(text)
            self._pending_len += len(text)
            if self._pending_len > self._max:
                raise self._too_big()
            return []
        text = "".join(self._parts) + text
        lines = _LINE_BREAK.split(text)
        # The last piece has no line ending yet. A trailing CR might be the first half of CRLF,
        # so it is kept back until the next chunk (or the end) decides.
        rest = lines.pop()
        if text.endswith("\r"):
            # ``rest`` is the empty piece after that CR; hold back the line it ended instead.
            rest = lines.pop() + "\r"
        self._parts = [rest] if rest else []
        self._pending_len = len(rest)
        if self._pending_len > self._max:
            raise self._too_big()
        events: list[ServerSentEvent] = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def close(self, *, dispatch_unterminated: bool = False) -> list[ServerSentEvent]:
        """Finish the stream and flush a pending line.

        An event without its blank line is dropped (the specification), or dispatched when
        ``dispatch_unterminated`` is true, together with a last line that lacks its line ending.
        """
        tail = "".join(self._parts) + self._decoder.decode(b"", final=True)
        self._parts, self._pending_len = [], 0
        events: list[ServerSentEvent] = []
        lines = _LINE_BREAK.split(tail) if tail else []
        if lines and not dispatch_unterminated:
            lines.pop()  # the piece after the last line ending is not a complete line
        if dispatch_unterminated:
            lines = [line for line in lines if line] + [""]
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        self._event, self._data, self._data_len, self._id, self._retry = "", [], 0, None, None
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
            self._data_len += len(value) + 1
            if self._data_len > self._max:
                raise self._too_big()
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
        self._event, self._data, self._data_len, self._id, self._retry = "", [], 0, None, None
        return event
