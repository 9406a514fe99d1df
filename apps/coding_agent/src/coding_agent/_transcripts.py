"""The transcript reader coding_agent registers as ``TRANSCRIPT_READER``: a session's history
read from its JSONL transcript, for clients (through the session port). Nobody builds an
executor to read history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal

from coding_agent.errors import CodingAgentError, CompactionError
from coding_agent.session import SessionStore
from lemon_ai import AssistantMessage, Message, Model, ToolResultMessage, UserMessage
from lemon_core.capabilities import ModelInfo
from lemon_core.events import ErrorCode
from lemon_core.sessions import CompactResult, NativeHistory, TodoItem, TranscriptEntry

if TYPE_CHECKING:
    from collections.abc import Mapping

    from coding_agent.executor import CodingExecutor
    from lemon_core.config import Config

__all__ = ["ModelCatalogImpl", "SessionCompactorImpl", "SessionTranscriptReader"]

ToolOutcome = Literal["ok", "failed", "denied", "expired", "cancelled"]

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
            _, messages, stamps = await self._sessions.load_timed(native_session_id)
        except (CodingAgentError, OSError) as exc:
            raise LookupError(str(exc)) from exc
        entries = [
            e for e in (_entry(i, m, stamps[i]) for i, m in enumerate(messages)) if e is not None
        ]
        if before is not None:
            entries = [e for e in entries if e.index < before]
        limit = max(0, min(limit, _MAX_LIMIT))
        page = entries[-limit:] if limit else []
        return NativeHistory(
            entries=tuple(page), more=len(entries) > len(page), todos=_todos(messages)
        )


def _entry(index: int, message: Message, timestamp_ms: int | None) -> TranscriptEntry | None:
    role: Literal["user", "assistant", "tool"]
    if isinstance(message, UserMessage):
        # Images are kept as references (type and size; the bytes are not in the transcript).
        marks = [f"[image: {i.mime_type}, {i.size} bytes]" for i in message.images]
        role, text = "user", "\n".join(part for part in (message.content, *marks) if part)
    elif isinstance(message, AssistantMessage):
        if not message.text:
            return None
        role, text = "assistant", message.text
    else:
        marks = [f"[image: {i.mime_type}, {i.size} bytes]" for i in message.images]
        role, text = "tool", "\n".join((f"{message.tool_name}: {message.content}", *marks))
    truncated = len(text) > _MAX_ENTRY_CHARS
    if truncated:
        text = text[: _MAX_ENTRY_CHARS - 1] + "…"
    if not isinstance(message, ToolResultMessage):
        return TranscriptEntry(
            index=index, role=role, text=text, truncated=truncated, timestamp_ms=timestamp_ms
        )
    return TranscriptEntry(
        index=index,
        role=role,
        text=text,
        truncated=truncated,
        timestamp_ms=timestamp_ms,
        tool=message.tool_name,
        outcome=tool_outcome(message),
    )


# How a call that did not run or did not finish is told in its result (policy.check_gate,
# lemon_agent's abort, the session's repair of an unanswered call): the first match wins.
_NOT_RUN: Final[tuple[tuple[str, ToolOutcome], ...]] = (
    ("(deny:", "denied"),
    ("(timeout:", "expired"),
    ("(expired:", "expired"),
    ("(cancelled:", "cancelled"),
    ("is denied by this run's tool policy", "denied"),
    ("needs an approval", "denied"),
    ("the run was aborted", "cancelled"),
    ("The run ended before this tool call finished", "cancelled"),
)


def tool_outcome(message: ToolResultMessage) -> ToolOutcome:
    """How a tool call ended, from its result as the transcript keeps it."""
    if not message.is_error:
        return "ok"
    head = message.content[:400]
    for marker, outcome in _NOT_RUN:
        if marker in head:
            return outcome
    if " did not run: " in head:
        return "denied"  # refused before running (a secret path, the approvals' capacity)
    return "failed"


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


class SessionCompactorImpl:
    """The compactor coding_agent registers as ``SESSION_COMPACTOR``: the executor's own
    on-demand compaction, its errors as typed results."""

    def __init__(self, executor: CodingExecutor) -> None:
        self._executor = executor

    async def compact(
        self, native_session_id: str, *, cwd: str | None, instructions: str | None
    ) -> CompactResult:
        try:
            info = await self._executor.compact(
                native_session_id, cwd=cwd, instructions=instructions
            )
        except CompactionError as exc:
            return CompactResult(
                session_key="",
                compacted=False,
                error=str(exc),
                error_code=_COMPACTION_CODES.get(exc.code, ErrorCode.PROVIDER_ERROR),
            )
        except CodingAgentError as exc:
            return CompactResult(
                session_key="", compacted=False, error=str(exc), error_code=ErrorCode.BAD_REQUEST
            )
        return CompactResult(
            session_key="",
            compacted=info.compacted,
            summary=info.summary,
            messages_summarised=info.messages_summarised,
            messages_kept=info.messages_kept,
            tokens_before=info.tokens_before,
            tokens_after=info.tokens_after,
            context_window=info.context_window,
            note=info.note or None,
        )


_COMPACTION_CODES: Final = {
    "config_invalid": ErrorCode.CONFIG_INVALID,
    "model_unavailable": ErrorCode.MODEL_UNAVAILABLE,
    "auth": ErrorCode.PROVIDER_AUTH,
    "rate_limit": ErrorCode.RATE_LIMITED,
    "context_overflow": ErrorCode.CONTEXT_OVERFLOW,
    "connection": ErrorCode.CONNECTION,
}


class ModelCatalogImpl:
    """The models a run of this runtime can use (``MODEL_CATALOG``): the configured default
    first, then each configured provider's ``models = [...]``, then lemon_ai's built-in
    catalogue. A model whose hosted API needs a key that is not set is listed with
    ``unavailable`` naming the variable (resolved as a run resolves it)."""

    def __init__(self, config: Config, environ: Mapping[str, str]) -> None:
        self._config = config
        self._environ = environ

    def models(self) -> list[ModelInfo]:
        from lemon_ai import default_catalogue

        found: dict[str, ModelInfo] = {}
        default_ref = self._config.defaults.model
        if default_ref:
            self._add(found, default_ref, default=True)
        else:
            self._add(found, "offline:offline", default=True)
        for name, provider in self._config.providers.items():
            for model_id in provider.models:
                self._add(found, f"{name}:{model_id}", default=False)
        for model in default_catalogue().models():
            self._add(found, model.ref, default=False)
        return list(found.values())

    def _add(self, found: dict[str, ModelInfo], ref: str, *, default: bool) -> None:
        from coding_agent.executor import check_model, model_for
        from lemon_ai import AuthError, LemonAiError

        if ref in found:
            return
        try:
            model, _key, _variable = model_for(self._config, ref, environ=self._environ)
        except LemonAiError:
            return
        unavailable = ""
        try:
            check_model(self._config, ref, environ=self._environ)
        except AuthError as exc:
            unavailable = str(exc)
        found[model.ref] = _info(model, default=default, unavailable=unavailable)


def _info(model: Model, *, default: bool, unavailable: str = "") -> ModelInfo:
    return ModelInfo(
        ref=model.ref,
        provider=model.provider,
        id=model.id,
        name=model.name or model.id,
        context_window=model.context_window,
        max_output=model.max_tokens,
        reasoning=model.reasoning,
        default=default,
        unavailable=unavailable,
    )
