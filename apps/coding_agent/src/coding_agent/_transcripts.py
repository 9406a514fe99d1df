"""The transcript reader coding_agent registers as ``TRANSCRIPT_READER``: a session's history
read from its JSONL transcript, for clients (through the session port). Nobody builds an
executor to read history."""

from __future__ import annotations

from typing import Final, Literal

from coding_agent.errors import CodingAgentError
from coding_agent.session import SessionStore
from lemon_ai import AssistantMessage, Message, UserMessage
from lemon_core.sessions import NativeHistory, TodoItem, TranscriptEntry

__all__ = ["SessionTranscriptReader"]

_MAX_ENTRY_CHARS: Final = 8000
_MAX_LIMIT: Final = 500


class SessionTranscriptReader:
    """Reads transcripts from a :class:`SessionStore` (bounded: ``limit`` at most 500 entries,
    each at most 8000 characters)."""

    def __init__(self, sessions: SessionStore) -> None:
        self._sessions = sessions

    async def read(
        self, native_session_id: str, *, limit: int = 50, before: int | None = None
    ) -> NativeHistory:
        try:
            _, messages = await self._sessions.load(native_session_id)
        except (CodingAgentError, OSError) as exc:
            raise LookupError(str(exc)) from exc
        entries = [e for e in (_entry(i, m) for i, m in enumerate(messages)) if e is not None]
        if before is not None:
            entries = [e for e in entries if e.index < before]
        limit = max(0, min(limit, _MAX_LIMIT))
        page = entries[-limit:] if limit else []
        return NativeHistory(
            entries=tuple(page), more=len(entries) > len(page), todos=_todos(messages)
        )


def _entry(index: int, message: Message) -> TranscriptEntry | None:
    role: Literal["user", "assistant", "tool"]
    if isinstance(message, UserMessage):
        role, text = "user", message.content
    elif isinstance(message, AssistantMessage):
        if not message.text:
            return None
        role, text = "assistant", message.text
    else:
        role, text = "tool", f"{message.tool_name}: {message.content}"
    truncated = len(text) > _MAX_ENTRY_CHARS
    if truncated:
        text = text[: _MAX_ENTRY_CHARS - 1] + "…"
    return TranscriptEntry(index=index, role=role, text=text, truncated=truncated)


def _todos(messages: list[Message]) -> tuple[TodoItem, ...]:
    """The last todo list the model wrote (``todo`` with ``action=write``)."""
    for message in reversed(messages):
        if not isinstance(message, AssistantMessage):
            continue
        for call in reversed(message.tool_calls):
            if call.name != "todo" or call.arguments.get("action") != "write":
                continue
            raw = call.arguments.get("todos")
            if not isinstance(raw, list):
                return ()
            return tuple(
                TodoItem(
                    text=str(item.get("content", "")), status=str(item.get("status", "pending"))
                )
                for item in raw
                if isinstance(item, dict)
            )
    return ()
