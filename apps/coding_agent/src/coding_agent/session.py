"""Coding sessions persisted as append-only JSONL transcripts.

One file per session id, ``<sessions_dir>/<session_id>.jsonl`` (by default
``$LEMON_HOME/agent/sessions``). Line 1 is the header, every later line one entry; entries form a
chain through ``parent_id`` (the previous entry's id)::

    {"type":"session","version":1,"id":"<session id>","timestamp":<ms>,"cwd":"/path"}
    {"type":"message","id":"1a2b3c4d","parent_id":null,"timestamp":<ms>,"message":{"role":"user","content":"hi"}}
    {"type":"message","id":"5e6f7a8b","parent_id":"1a2b3c4d","timestamp":<ms>,"message":{"role":"assistant",...}}

Message roles: ``user`` (content), ``assistant`` (content blocks ``text`` / ``thinking`` /
``tool_call``, stop_reason, usage, cost, model, provider, error_message) and ``tool_result``
(tool_call_id, tool_name, content, is_error). A compaction appends a ``compaction`` entry (the
summary that replaces everything before it, see :mod:`coding_agent.compaction`) followed by copies
of the messages it kept; loading starts the conversation again at the latest one, so the original
lines stay on disk. Writes only ever append whole lines and are
flushed and fsynced (in a worker thread) before :meth:`Transcript.append` returns, so anything
acknowledged survives a crash. Loading validates every line and raises
:class:`~coding_agent.errors.CorruptTranscriptError` naming the first bad line.

**Torn lines.** A crash in the middle of an append leaves a last line cut short (no newline,
not JSON). Loading recovers instead of refusing: every complete record is kept, the lines that
are not JSON at all (the torn tail, or a torn line later buried by another append) are moved to
a side file next to the transcript (``<session_id>.jsonl.torn``, appended to, never
overwritten), the transcript is rewritten without them (a temporary file fsynced, then renamed
over it), and :attr:`Transcript.notice` says so in plain words. Tool results whose call was in
a lost line are left out of the conversation (they stay on disk). A line that *is* JSON but not
a valid record (a wrong field, an unknown role) is not a torn write but damage or a newer
format: it still fails the load, naming the line, and the file is left untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, NoReturn

import msgspec

from coding_agent.errors import CorruptTranscriptError, SessionNotFoundError
from coding_agent.transcript_mirror import TranscriptMirror
from lemon_ai import (
    AssistantMessage,
    Cost,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__all__ = [
    "SUMMARY_PREFIX",
    "TRANSCRIPT_VERSION",
    "SessionStore",
    "Transcript",
    "summary_message",
    "valid_session_id",
]

TRANSCRIPT_VERSION: Final = 1
_SESSION_ID_RE: Final = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


def valid_session_id(value: str) -> bool:
    """True for a usable session id (1-128 letters, digits, ``_`` or ``-``; no paths)."""
    return bool(_SESSION_ID_RE.match(value))


# -- wire records --------------------------------------------------------------------------


class _Text(msgspec.Struct, tag_field="type", tag="text", forbid_unknown_fields=True):
    text: str


class _Thinking(msgspec.Struct, tag_field="type", tag="thinking", forbid_unknown_fields=True):
    thinking: str
    signature: str = ""


class _ToolCall(msgspec.Struct, tag_field="type", tag="tool_call", forbid_unknown_fields=True):
    id: str
    name: str
    arguments: dict[str, Any] = {}
    raw_arguments: str = ""
    parse_error: str | None = None


class _Usage(msgspec.Struct, forbid_unknown_fields=True):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class _Cost(msgspec.Struct, forbid_unknown_fields=True):
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


class _ImageRef(msgspec.Struct, forbid_unknown_fields=True):
    """An image the user attached, kept as a reference: type, size and hash, never the bytes
    (a transcript line stays small; the model is told on resume that the image is gone)."""

    mime_type: str
    size: int = 0
    sha256: str = ""


class _User(
    msgspec.Struct, tag_field="role", tag="user", forbid_unknown_fields=True, omit_defaults=True
):
    content: str
    images: list[_ImageRef] = []


class _Assistant(msgspec.Struct, tag_field="role", tag="assistant", forbid_unknown_fields=True):
    content: list[_Text | _Thinking | _ToolCall] = []
    stop_reason: Literal["stop", "length", "tool_use", "error", "aborted"] = "stop"
    usage: _Usage = msgspec.field(default_factory=_Usage)
    cost: _Cost = msgspec.field(default_factory=_Cost)
    model: str = ""
    provider: str = ""
    error_message: str | None = None


class _ToolResult(
    msgspec.Struct,
    tag_field="role",
    tag="tool_result",
    forbid_unknown_fields=True,
    omit_defaults=True,
):
    tool_call_id: str
    tool_name: str
    content: str
    is_error: bool = False
    images: list[_ImageRef] = []
    """A tool's images (a screenshot) as references, like a user's: never the bytes."""


class _Header(msgspec.Struct, tag_field="type", tag="session", forbid_unknown_fields=True):
    version: int
    id: str
    timestamp: int
    cwd: str = ""


class _Entry(msgspec.Struct, tag_field="type", tag="message", forbid_unknown_fields=True):
    id: str
    parent_id: str | None
    timestamp: int
    message: _User | _Assistant | _ToolResult


class _Compaction(msgspec.Struct, tag_field="type", tag="compaction", forbid_unknown_fields=True):
    """The summary that replaces every message before it; the kept messages follow as copies."""

    id: str
    parent_id: str | None
    timestamp: int
    summary: str
    reason: Literal["threshold", "overflow", "manual"]
    summarised: int
    """Messages of the conversation the summary replaced."""
    tokens_before: int
    """The estimated prompt tokens before compacting."""


_encoder = msgspec.json.Encoder()
_header_decoder = msgspec.json.Decoder(_Header)
_entry_decoder = msgspec.json.Decoder(_Entry | _Compaction)

SUMMARY_PREFIX: Final = (
    "[Summary of the earlier conversation, written when it was compacted to fit the model's "
    "context window]\n\n"
)


def summary_message(summary: str) -> UserMessage:
    """The user message a compaction summary stands in the conversation as."""
    return UserMessage(content=SUMMARY_PREFIX + summary)


def _to_wire(message: Message) -> _User | _Assistant | _ToolResult:
    if isinstance(message, UserMessage):
        return _User(
            content=message.content,
            images=[
                _ImageRef(mime_type=i.mime_type, size=i.size, sha256=i.sha256)
                for i in message.images
            ],
        )
    if isinstance(message, ToolResultMessage):
        return _ToolResult(
            tool_call_id=message.tool_call_id,
            tool_name=message.tool_name,
            content=message.content,
            is_error=message.is_error,
            images=[
                _ImageRef(mime_type=i.mime_type, size=i.size, sha256=i.sha256)
                for i in message.images
            ],
        )
    blocks: list[_Text | _Thinking | _ToolCall] = []
    for block in message.content:
        if isinstance(block, TextContent):
            blocks.append(_Text(text=block.text))
        elif isinstance(block, ThinkingContent):
            blocks.append(_Thinking(thinking=block.thinking, signature=block.signature))
        else:
            blocks.append(
                _ToolCall(
                    id=block.id,
                    name=block.name,
                    arguments=dict(block.arguments),
                    raw_arguments=block.raw_arguments,
                    parse_error=block.parse_error,
                )
            )
    u, c = message.usage, message.cost
    return _Assistant(
        content=blocks,
        stop_reason=message.stop_reason,
        usage=_Usage(
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            cache_read_tokens=u.cache_read_tokens,
            cache_write_tokens=u.cache_write_tokens,
        ),
        cost=_Cost(
            input=c.input, output=c.output, cache_read=c.cache_read, cache_write=c.cache_write
        ),
        model=message.model,
        provider=message.provider,
        error_message=message.error_message,
    )


def _from_wire(record: _User | _Assistant | _ToolResult) -> Message:
    if isinstance(record, _User):
        return UserMessage(
            content=record.content,
            images=tuple(
                ImageContent(mime_type=i.mime_type, size=i.size, sha256=i.sha256)
                for i in record.images
            ),
        )
    if isinstance(record, _ToolResult):
        return ToolResultMessage(
            tool_call_id=record.tool_call_id,
            tool_name=record.tool_name,
            content=record.content,
            is_error=record.is_error,
            images=tuple(
                ImageContent(mime_type=i.mime_type, size=i.size, sha256=i.sha256)
                for i in record.images
            ),
        )
    content: list[TextContent | ThinkingContent | ToolCall] = []
    for block in record.content:
        if isinstance(block, _Text):
            content.append(TextContent(text=block.text))
        elif isinstance(block, _Thinking):
            content.append(ThinkingContent(thinking=block.thinking, signature=block.signature))
        else:
            content.append(
                ToolCall(
                    id=block.id,
                    name=block.name,
                    arguments=block.arguments,
                    raw_arguments=block.raw_arguments,
                    parse_error=block.parse_error,
                )
            )
    u, c = record.usage, record.cost
    return AssistantMessage(
        content=tuple(content),
        stop_reason=record.stop_reason,
        usage=Usage(
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            cache_read_tokens=u.cache_read_tokens,
            cache_write_tokens=u.cache_write_tokens,
        ),
        cost=Cost(
            input=c.input, output=c.output, cache_read=c.cache_read, cache_write=c.cache_write
        ),
        model=record.model,
        provider=record.provider,
        error_message=record.error_message,
    )


def _repair(messages: list[Message], *, drop_orphans: bool = False) -> tuple[list[Message], int]:
    """The conversation made valid for the model, and how many orphaned results were dropped.

    Tool calls left without results (a run that ended mid-tool) are closed with error results.
    With ``drop_orphans`` (lines were torn away), tool results whose call is not in the
    assistant message just before them are left out, since a provider refuses a result without
    its call."""
    out: list[Message] = []
    dropped = 0
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if drop_orphans and isinstance(message, ToolResultMessage):
            dropped += 1  # not right after its assistant message: its call is gone
            continue
        out.append(message)
        if not isinstance(message, AssistantMessage) or not message.tool_calls:
            continue
        calls = {call.id for call in message.tool_calls}
        answered: set[str] = set()
        while index < len(messages) and isinstance(messages[index], ToolResultMessage):
            result = messages[index]
            assert isinstance(result, ToolResultMessage)
            index += 1
            if drop_orphans and (
                result.tool_call_id not in calls or result.tool_call_id in answered
            ):
                dropped += 1
                continue
            answered.add(result.tool_call_id)
            out.append(result)
        out.extend(
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content="The run ended before this tool call finished; it has no result.",
                is_error=True,
            )
            for call in message.tool_calls
            if call.id not in answered
        )
    return out, dropped


# -- the transcript ------------------------------------------------------------------------


@dataclass(slots=True)
class Transcript:
    """An open session transcript: append messages durably. Holds no messages in memory."""

    session_id: str
    path: Path
    last_entry_id: str | None
    entries: int
    notice: str | None = None
    """Set when loading recovered from torn lines: what was kept and where the rest went."""
    mirror: TranscriptMirror | None = None
    """With a shared store: every durable write is mirrored there (see transcript_mirror)."""

    async def _write(self, data: bytes) -> None:
        offset = await asyncio.to_thread(_append_durably, self.path, data)
        if self.mirror is not None:
            await self.mirror.wrote(self.session_id, offset, data)

    async def append(self, messages: Sequence[Message]) -> None:
        """Append ``messages`` as entries; returns once they are flushed and fsynced."""
        if not messages:
            return
        lines: list[bytes] = []
        parent = self.last_entry_id
        now = int(time.time() * 1000)
        for message in messages:
            entry_id = uuid.uuid4().hex[:8]
            entry = _Entry(id=entry_id, parent_id=parent, timestamp=now, message=_to_wire(message))
            lines.append(_encoder.encode(entry) + b"\n")
            parent = entry_id
        await self._write(b"".join(lines))
        self.last_entry_id = parent
        self.entries += len(messages)

    async def append_compaction(
        self,
        summary: str,
        kept: Sequence[Message],
        *,
        reason: Literal["threshold", "overflow", "manual"],
        summarised: int,
        tokens_before: int,
    ) -> None:
        """Append a compaction entry and copies of the ``kept`` messages in one durable write
        (a crash keeps both or neither); a later load starts at this entry."""
        parent = self.last_entry_id
        now = int(time.time() * 1000)
        entry_id = uuid.uuid4().hex[:8]
        record = _Compaction(
            id=entry_id, parent_id=parent, timestamp=now, summary=summary, reason=reason,
            summarised=summarised, tokens_before=tokens_before,
        )  # fmt: skip
        lines = [_encoder.encode(record) + b"\n"]
        parent = entry_id
        for message in kept:
            entry_id = uuid.uuid4().hex[:8]
            entry = _Entry(id=entry_id, parent_id=parent, timestamp=now, message=_to_wire(message))
            lines.append(_encoder.encode(entry) + b"\n")
            parent = entry_id
        await self._write(b"".join(lines))
        self.last_entry_id = parent
        self.entries += 1 + len(kept)


def _append_durably(path: Path, data: bytes) -> int:
    """Append ``data`` and fsync, under an exclusive lock on the file; returns the offset it
    was written at.

    The lock keeps an append and a repair (:func:`_rewrite`, which replaces the file) apart: a
    repair never mistakes an append in flight for a torn line, and an append that opened the
    file just before a repair replaced it notices (another inode) and reopens."""
    while True:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_ino != os.stat(path).st_ino:
                continue  # replaced by a repair since we opened it: append to the new file
            offset = os.fstat(fd).st_size
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
            return offset
        finally:
            os.close(fd)


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[bytes | None]:
    """Hold the transcript's lock; yield its current bytes (None: replaced meanwhile)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_ino != os.stat(path).st_ino:
            yield None
            return
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        yield b"".join(chunks)
    finally:
        os.close(fd)


_ENTRY_START: Final = b'{"type":"message",'


def _salvage(tail: bytes) -> _Entry | _Compaction | None:
    try:
        return _entry_decoder.decode(tail)
    except msgspec.DecodeError:
        return None


def _is_torn(line: bytes) -> bool:
    """A line that is not JSON at all: what a write cut short leaves behind."""
    try:
        msgspec.json.decode(line)
    except msgspec.DecodeError:
        return True
    return False


def _rewrite(path: Path, kept: Sequence[bytes], torn: Sequence[tuple[int, bytes]]) -> Path:
    """Move the ``torn`` lines to the side file (durably, first), then replace ``path`` by its
    ``kept`` lines: a temporary file fsynced and renamed over it, so a crash at any point leaves
    either the old or the new transcript, and the torn bytes are on disk before they leave it."""
    side = path.with_name(path.name + ".torn")
    if torn:
        _append_durably(side, b"".join(line + b"\n" for _, line in torn))
    temporary = path.with_name(path.name + ".repair")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        data = memoryview(b"".join(line + b"\n" for line in kept))
        while data:
            data = data[os.write(fd, data) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return side


def _torn_notice(
    session_id: str,
    torn: Sequence[tuple[int, bytes]],
    total_lines: int,
    kept: int,
    dropped: int,
    side: Path,
) -> str:
    numbers = ", ".join(str(n) for n, _ in torn)
    size = sum(len(line) for _, line in torn)
    where = (
        "its last line was cut short, probably because Lemon stopped while saving it"
        if [n for n, _ in torn] == [total_lines]
        else f"line(s) {numbers} were cut short, probably because Lemon stopped while saving"
    )
    lost = (
        f" {dropped} tool result(s) whose call was in the damaged part were left out."
        if dropped
        else ""
    )
    return (
        f"Session {session_id} was recovered: {where}. All {kept} complete messages were kept "
        f"and the conversation continues from them; the unreadable part ({size} bytes, line(s) "
        f"{numbers}) was moved to {side}.{lost}"
    )


_REPAIR_ATTEMPTS: Final = 3


@dataclass(frozen=True, kw_only=True, slots=True)
class _Parsed:
    """A transcript as read, and what a repair must write (``kept`` None: nothing)."""

    transcript: Transcript
    messages: list[Message]
    timestamps: list[int | None]
    kept: list[bytes] | None
    torn: list[tuple[int, bytes]]
    lines: int
    dropped: int


class SessionStore:
    """Creates and loads session transcripts under ``directory``.

    ``max_transcript_bytes`` bounds what a resume reads into memory (default 32 MiB); a
    larger transcript is refused with a clear error instead of being loaded.
    """

    def __init__(
        self,
        directory: Path,
        *,
        max_transcript_bytes: int = 32 * 1024 * 1024,
        mirror: TranscriptMirror | None = None,
    ) -> None:
        self.directory = directory
        self.max_transcript_bytes = max_transcript_bytes
        self.mirror = mirror

    def path_of(self, session_id: str) -> Path:
        if not valid_session_id(session_id):
            raise SessionNotFoundError(
                f"session id {session_id!r} is not valid: use 1-128 letters, digits, '_' or '-' "
                "(the value of a `lemon resume <id>` token)"
            )
        return self.directory / f"{session_id}.jsonl"

    async def create(self, *, cwd: str, session_id: str | None = None) -> Transcript:
        """A new session with a durable header line."""
        sid = session_id or uuid.uuid4().hex
        path = self.path_of(sid)
        header = _Header(
            version=TRANSCRIPT_VERSION, id=sid, timestamp=int(time.time() * 1000), cwd=cwd
        )
        data = _encoder.encode(header) + b"\n"

        def write() -> None:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)

        await asyncio.to_thread(write)
        if self.mirror is not None:
            await self.mirror.wrote(sid, 0, data)
        return Transcript(
            session_id=sid, path=path, last_entry_id=None, entries=0, mirror=self.mirror
        )

    async def load(self, session_id: str) -> tuple[Transcript, list[Message]]:
        """Open ``session_id`` for appending and return its conversation.

        Raises :class:`SessionNotFoundError` (no such transcript) or
        :class:`CorruptTranscriptError` (unreadable, too large, or a bad line).
        """
        path = self.path_of(session_id)
        if self.mirror is not None:
            await self.mirror.materialise(session_id, path)
        transcript, messages, _ = await asyncio.to_thread(self._load_sync, session_id, path)
        transcript.mirror = self.mirror
        return transcript, messages

    async def load_timed(
        self, session_id: str
    ) -> tuple[Transcript, list[Message], list[int | None]]:
        """:meth:`load`, with each message's write time (wall-clock ms; ``None`` for a
        message the repair added)."""
        path = self.path_of(session_id)
        if self.mirror is not None:
            await self.mirror.materialise(session_id, path)
        transcript, messages, stamps = await asyncio.to_thread(self._load_sync, session_id, path)
        transcript.mirror = self.mirror
        return transcript, messages, stamps

    def _load_sync(
        self, session_id: str, path: Path
    ) -> tuple[Transcript, list[Message], list[int | None]]:
        for _ in range(_REPAIR_ATTEMPTS):
            raw = self._read(session_id, path)
            parsed = self._parse(session_id, path, raw)
            if parsed.kept is None:
                return parsed.transcript, parsed.messages, parsed.timestamps
            try:
                with _exclusive(path) as current:
                    if current != raw:
                        continue  # an append finished meanwhile: look again
                    side = _rewrite(path, parsed.kept, parsed.torn)
            except OSError as exc:
                raise CorruptTranscriptError(
                    f"transcript {path} has an incomplete line (a write cut short) and could "
                    f"not be repaired: {exc}. It was left as it was."
                ) from exc
            transcript = parsed.transcript
            if parsed.torn:
                transcript.notice = _torn_notice(
                    session_id, parsed.torn, parsed.lines, transcript.entries, parsed.dropped, side
                )
            return transcript, parsed.messages, parsed.timestamps
        raise CorruptTranscriptError(
            f"transcript {path} kept changing while it was being repaired; try again"
        )

    def _read(self, session_id: str, path: Path) -> bytes:
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise SessionNotFoundError(
                f"no transcript for session {session_id!r} at {path}; it was never created or "
                "was deleted. Start a new session (submit without a resume token)."
            ) from None
        if size > self.max_transcript_bytes:
            raise CorruptTranscriptError(
                f"transcript {path} is {size} bytes, above the {self.max_transcript_bytes}-byte "
                "bound for resuming; start a new session"
            )
        try:
            return path.read_bytes()
        except OSError as exc:
            raise CorruptTranscriptError(f"transcript {path} cannot be read: {exc}") from exc

    def _parse(self, session_id: str, path: Path, raw: bytes) -> _Parsed:
        lines = raw.split(b"\n")
        terminated = bool(lines) and lines[-1] == b""
        if terminated:
            lines.pop()
        if not lines:
            self._corrupt(path, 1, "the file is empty (no session header)")
        if len(lines) == 1 and not terminated:
            self._corrupt(path, 1, "the last line is incomplete (no newline)")
        try:
            header = _header_decoder.decode(lines[0])
        except msgspec.DecodeError as exc:
            self._corrupt(path, 1, f"bad session header: {exc}")
        if header.version != TRANSCRIPT_VERSION:
            self._corrupt(
                path, 1, f"unsupported transcript version {header.version} (expected "
                f"{TRANSCRIPT_VERSION})",
            )  # fmt: skip
        if header.id != session_id:
            self._corrupt(path, 1, f"header names session {header.id!r}")
        messages: list[Message] = []
        stamps: dict[int, int] = {}  # id(message) -> its entry's timestamp (objects kept alive)
        kept: list[bytes] = [lines[0]]
        torn: list[tuple[int, bytes]] = []
        last: str | None = None
        for number, line in enumerate(lines[1:], start=2):
            try:
                entry = _entry_decoder.decode(line)
            except msgspec.DecodeError as exc:
                if not _is_torn(line):
                    self._corrupt(path, number, str(exc))
                # A torn write with the next append glued to it: keep the whole record at
                # the end of the line, quarantine the fragment before it.
                start = line.rfind(_ENTRY_START)
                salvaged = _salvage(line[start:]) if start > 0 else None
                if salvaged is None:
                    torn.append((number, line))
                    continue
                torn.append((number, line[:start]))
                entry, line = salvaged, line[start:]
            if isinstance(entry, _Compaction):  # the conversation restarts at its summary
                messages = [summary_message(entry.summary)]
                stamps = {id(messages[0]): entry.timestamp}
            else:
                messages.append(_from_wire(entry.message))
                stamps[id(messages[-1])] = entry.timestamp
            kept.append(line)
            last = entry.id
        repaired, dropped = _repair(messages, drop_orphans=bool(torn))
        transcript = Transcript(
            session_id=session_id, path=path, last_entry_id=last, entries=len(messages)
        )
        return _Parsed(
            transcript=transcript,
            messages=repaired,
            timestamps=[stamps.get(id(m)) for m in repaired],
            kept=kept if torn or not terminated else None,
            torn=torn,
            lines=len(lines),
            dropped=dropped,
        )

    @staticmethod
    def _corrupt(path: Path, line: int, why: str) -> NoReturn:
        raise CorruptTranscriptError(
            f"transcript {path} is corrupt at line {line}: {why}. It was left untouched; move it "
            "away to inspect it, and start a new session (submit without a resume token)."
        )
