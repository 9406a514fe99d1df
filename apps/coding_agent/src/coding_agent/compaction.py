"""Compaction: keeping a coding session inside its model's context window.

Guarantees:

* **Before every model request** of a run, the request is sized conservatively: characters / 3
  of the system prompt, tool specs and messages, or, when the provider reported usage for the
  latest answer made on the current context, that answer's prompt and output tokens plus
  characters / 3 of what came after it, whichever is larger. When the estimate is above the
  model's context window (from the lemon_ai catalogue) less the output reserve, the older
  messages are replaced by a summary that the same model writes (one summarisation request
  through the same provider) before the request is sent.
* **On a ``context_overflow`` error** answered before anything streamed, the conversation is
  compacted once more (with half the kept tail) and the request retried **once**; a second
  overflow, or a compaction that cannot make the conversation smaller, is the run's error.
  A request therefore costs at most two summarisation calls and two model calls, never a loop.
* **The transcript stays append-only.** A compaction appends one ``compaction`` entry (the
  summary) and copies of the kept messages, in one durable write; a later load starts the
  conversation at the latest compaction (:mod:`coding_agent.session`). The original lines stay.
  The copies carry zero usage and cost, so summing a transcript never counts an answer twice,
  and a stale prompt size is never taken for the compacted context's.
* Every automatic compaction is reported through the run's sink as an action of kind
  ``compaction`` (phase ``started``, then ``completed`` with ``ok`` and the summary).

It never splits a message and never separates a tool result from the call it answers: the kept
tail starts at a user or assistant message and always holds the newest message. It does not
shrink the system prompt or the tool specs (they are rebuilt every run).

Tool results are capped relative to the window too (:func:`tool_result_cap`): a share of the
window in characters, between a floor and an absolute ceiling.
"""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Final, Literal

from coding_agent.errors import CodingAgentUsageError, CompactionError
from coding_agent.session import SUMMARY_PREFIX, Transcript, summary_message
from coding_agent.workspace import CodingLimits
from lemon_ai import (
    Api,
    AssistantMessage,
    Context,
    Cost,
    ErrorEvent,
    ErrorKind,
    Message,
    Model,
    Provider,
    ProviderError,
    StreamEvent,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    complete,
    image_note,
)
from lemon_core.execution import ActionKind, ExecutionSink

__all__ = [
    "CHARS_PER_TOKEN",
    "CompactionInfo",
    "CompactionReason",
    "CompactionSettings",
    "Compactor",
    "context_budget",
    "estimate_tokens",
    "run_limits",
    "tool_result_cap",
]

CHARS_PER_TOKEN: Final = 3
"""Characters counted per token: conservative (English prose is about 4, code about 3)."""

CompactionReason = Literal["threshold", "overflow", "manual"]
"""Why a compaction ran: the estimate crossed the budget, the provider said the request did not
fit, or it was asked for (``CodingExecutor.compact``)."""

_MESSAGE_OVERHEAD_CHARS: Final = 12
# An image costs the model about 1,600 tokens at most (Anthropic: width x height / 750 for an
# image scaled to 1.15 megapixels; OpenAI high detail is less): counted as that many tokens'
# characters. A reference (bytes not kept) is sent as a short note.
_IMAGE_CHARS: Final = 1_600 * CHARS_PER_TOKEN
_IMAGE_NOTE_CHARS: Final = 200
_MAX_SERIALISED_TOOL_RESULT: Final = 4_000
_MAX_SERIALISED_ARGUMENTS: Final = 2_000
_MAX_ACTION_TEXT: Final = 2_000
_TOOL_LIMIT_MARGIN: Final = 512
"""Room left under the agent's cap for a tool's own marker (the read pager's next offset)."""

_SUMMARY_SYSTEM: Final = (
    "You compact a coding session so that it can continue within the model's context window. "
    "Summarise the conversation you are given for the assistant that will continue it: the "
    "user's goals, requests and constraints; what was done (files read, created or changed, "
    "commands run and their results); decisions and their reasons; errors and open problems; "
    "the state of the work and the next steps. Keep exact file paths, names, commands, values "
    "and error messages that will matter. If the conversation starts with an earlier summary, "
    "fold it in. Write only the summary, with no preamble."
)


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactionSettings:
    """When a run compacts, how much it keeps, and how large one tool result may be."""

    auto: bool = True
    """Compact before a request that would overflow, and once after a ``context_overflow``."""
    keep_recent_share: float = 0.3
    """Share of the usable window (window less output reserve) the kept tail may take."""
    summary_max_tokens: int = 4_096
    """Output budget of the summary (at most the model's ``max_tokens`` and window / 8)."""
    tool_result_share: float = 0.15
    """Share of the context window one tool result may take (in characters, 3 per token)."""
    tool_result_min_chars: int = 2_000
    tool_result_max_chars: int = 200_000
    """The absolute ceiling of one tool result, however large the window."""

    def __post_init__(self) -> None:
        for name in ("keep_recent_share", "tool_result_share"):
            value = getattr(self, name)
            if not 0 < value < 1:
                raise CodingAgentUsageError(f"CompactionSettings.{name} must be in (0, 1): {value}")
        for name in ("summary_max_tokens", "tool_result_min_chars", "tool_result_max_chars"):
            if getattr(self, name) < 1:
                raise CodingAgentUsageError(f"CompactionSettings.{name} must be >= 1")
        if self.tool_result_min_chars > self.tool_result_max_chars:
            raise CodingAgentUsageError(
                "CompactionSettings.tool_result_min_chars is above tool_result_max_chars"
            )


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactionInfo:
    """What one compaction did (``compacted`` False: nothing was changed, ``note`` says why)."""

    session_id: str
    compacted: bool
    reason: CompactionReason
    summary: str = ""
    messages_summarised: int = 0
    messages_kept: int = 0
    tokens_before: int = 0
    """Estimated prompt tokens of the conversation before compacting."""
    tokens_after: int = 0
    context_window: int = 0
    usage: Usage = field(default_factory=Usage)
    """Tokens of the summarisation request."""
    cost: Cost = field(default_factory=Cost)
    note: str = ""


# -- sizing --------------------------------------------------------------------------------


def _chars(message: Message) -> int:
    if isinstance(message, UserMessage):
        images = sum(
            _IMAGE_CHARS if image.available else _IMAGE_NOTE_CHARS for image in message.images
        )
        return len(message.content) + images + _MESSAGE_OVERHEAD_CHARS
    if isinstance(message, ToolResultMessage):
        images = sum(
            _IMAGE_CHARS if image.available else _IMAGE_NOTE_CHARS for image in message.images
        )
        return len(message.content) + len(message.tool_name) + images + _MESSAGE_OVERHEAD_CHARS
    total = _MESSAGE_OVERHEAD_CHARS
    for block in message.content:
        if isinstance(block, TextContent):
            total += len(block.text)
        elif isinstance(block, ThinkingContent):
            total += len(block.thinking) + len(block.signature)
        else:
            arguments = block.raw_arguments or json.dumps(dict(block.arguments))
            total += len(block.name) + len(arguments) + _MESSAGE_OVERHEAD_CHARS
    return total


def _tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def estimate_tokens(
    messages: Sequence[Message], *, system_prompt: str = "", tools: Sequence[ToolSpec] = ()
) -> int:
    """A conservative token count of a request (characters / :data:`CHARS_PER_TOKEN`)."""
    chars = len(system_prompt) + sum(_chars(m) for m in messages)
    return _tokens(chars + sum(_spec_chars(spec) for spec in tools))


def _spec_chars(spec: ToolSpec) -> int:
    return len(spec.name) + len(spec.description) + len(json.dumps(dict(spec.parameters)))


def context_budget(model: Model, options: StreamOptions | None = None) -> int:
    """The prompt tokens a request to ``model`` may use: the context window less the output
    reserve (the request's ``max_tokens``, else the model's, at most a quarter of the window)."""
    window = model.context_window
    out = (options.max_tokens if options is not None else None) or model.max_tokens
    return max(1, window - min(out, window // 4))


def tool_result_cap(model: Model, settings: CompactionSettings) -> int:
    """Characters one tool result may take for ``model``: ``tool_result_share`` of the
    context window (3 characters per token), between the settings' floor and ceiling."""
    scaled = int(model.context_window * CHARS_PER_TOKEN * settings.tool_result_share)
    return max(settings.tool_result_min_chars, min(settings.tool_result_max_chars, scaled))


def run_limits(limits: CodingLimits, model: Model, settings: CompactionSettings) -> CodingLimits:
    """The tools' output bounds for a run on ``model``: the configured ones, lowered to fit
    under :func:`tool_result_cap` (with room for a tool's own continuation marker)."""
    room = max(1, tool_result_cap(model, settings) - _TOOL_LIMIT_MARGIN)
    return replace(
        limits,
        max_output_chars=min(limits.max_output_chars, room),
        bash_output_bytes=min(limits.bash_output_bytes, room),
    )


def _is_summary(message: Message) -> bool:
    return isinstance(message, UserMessage) and message.content.startswith(SUMMARY_PREFIX)


def _without_usage(message: Message) -> Message:
    if isinstance(message, AssistantMessage):
        return replace(message, usage=Usage(), cost=Cost())
    return message


def _cut(messages: Sequence[Message], start: int, keep_tokens: int) -> int | None:
    """Where the kept tail starts: the earliest index after ``start`` whose tail fits
    ``keep_tokens`` and starts at a user or assistant message; if none fits, the latest such
    index (the smallest valid tail). ``None``: no valid place (nothing can be summarised)."""
    best: int | None = None
    tail = 0
    for index in range(len(messages) - 1, start, -1):
        tail += _tokens(_chars(messages[index]))
        if best is not None and tail > keep_tokens:
            break
        if not isinstance(messages[index], ToolResultMessage):
            best = index
    return best


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f" [... {len(text) - limit} more characters]"


def _serialise(messages: Sequence[Message], limit: int) -> str:
    """The conversation as plain text for the summariser, at most ``limit`` characters (the
    middle is cut when it is longer: the earlier summary and the newest work matter most)."""
    parts: list[str] = []
    for message in messages:
        if _is_summary(message):
            assert isinstance(message, UserMessage)
            parts.append("[earlier summary]\n" + message.content[len(SUMMARY_PREFIX) :])
        elif isinstance(message, UserMessage):
            notes = "".join(f"\n{image_note(image)}" for image in message.images)
            parts.append("[user]\n" + message.content + notes)
        elif isinstance(message, ToolResultMessage):
            flag = " (error)" if message.is_error else ""
            notes = "".join(f"\n{image_note(image, by='tool')}" for image in message.images)
            parts.append(
                f"[tool result {message.tool_name}{flag}]\n"
                + _clip(message.content, _MAX_SERIALISED_TOOL_RESULT)
                + notes
            )
        else:
            lines = [message.text] if message.text else []
            for call in message.tool_calls:
                arguments = call.raw_arguments or json.dumps(dict(call.arguments))
                lines.append(
                    f"[tool call {call.name}] {_clip(arguments, _MAX_SERIALISED_ARGUMENTS)}"
                )
            parts.append("[assistant]\n" + "\n".join(lines))
    text = "\n\n".join(parts)
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n\n[... {omitted} characters omitted ...]\n\n{text[-tail:]}"


# -- the compactor -------------------------------------------------------------------------

Flush = Callable[[], Awaitable[None]]
_Outcome = Literal["compacted", "nothing", "failed"]


class Compactor:
    """Compaction state of one session while a run (or an explicit compaction) holds it.

    The agent keeps its whole conversation in memory; the compactor remembers how many leading
    messages its latest summary replaced and shows the model the summary plus the rest
    (:meth:`view`). :attr:`provider` wraps the real provider with the automatic compaction and
    the overflow retry; the wrapper does not close the real provider.

    ``flush`` (the run's transcript append) is awaited before a compaction so that every
    message the compaction copies is already on disk before the compaction entry; ``sink``
    receives the ``compaction`` actions. Loop-only.
    """

    def __init__(
        self,
        *,
        model: Model,
        provider: Provider,
        transcript: Transcript,
        settings: CompactionSettings,
        sink: ExecutionSink | None = None,
        flush: Flush | None = None,
    ) -> None:
        self._model = model
        self._inner = provider
        self._transcript = transcript
        self.settings = settings
        self._sink = sink
        self._flush = flush
        self._covered = 0
        self._summary: UserMessage | None = None
        self._fresh_from = 0
        self._spec_sizes: dict[tuple[str, str], int] = {}
        self.usage = Usage()
        """Tokens of every summarisation request made so far."""
        self.cost = Cost()
        self.compactions = 0
        self.retries = 0
        """Requests retried after a ``context_overflow`` answer."""
        self.provider: Provider = _CompactingProvider(self)

    def view(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        """What the model is shown of the conversation ``messages``."""
        if self._summary is None:
            return tuple(messages)
        return (self._summary, *messages[self._covered :])

    def estimate(
        self,
        messages: Sequence[Message],
        *,
        system_prompt: str = "",
        tools: Sequence[ToolSpec] = (),
    ) -> int:
        """Estimated prompt tokens of a request with :meth:`view` of ``messages``."""
        # The specs are the same for every request of a run: their size is counted once.
        specs = 0
        for spec in tools:
            key = (spec.name, spec.description)
            size = self._spec_sizes.get(key)
            if size is None:
                size = self._spec_sizes[key] = _spec_chars(spec)
            specs += size
        counted = estimate_tokens(self.view(messages), system_prompt=system_prompt) + _tokens(specs)
        start = max(self._fresh_from, self._covered)
        for index in range(len(messages) - 1, start - 1, -1):
            message = messages[index]
            if isinstance(message, AssistantMessage) and message.usage.prompt_tokens > 0:
                after = estimate_tokens(messages[index + 1 :])
                reported = message.usage.prompt_tokens + message.usage.output_tokens + after
                return max(counted, reported)
        return counted

    async def compact(
        self,
        messages: Sequence[Message],
        *,
        reason: CompactionReason,
        system_prompt: str = "",
        tools: Sequence[ToolSpec] = (),
        options: StreamOptions | None = None,
        instructions: str | None = None,
    ) -> CompactionInfo:
        """Summarise the older part of the conversation ``messages`` and record it
        (``instructions``: what the summary should focus on, from whoever asked for it).

        Raises :class:`CompactionError` when the summarisation request fails or the summary is
        empty (nothing changed then). Returns ``compacted=False`` when there is nothing older
        than the tail to summarise.
        """
        model = self._model
        before = self.estimate(messages, system_prompt=system_prompt, tools=tools)
        keep = int(context_budget(model, options) * self.settings.keep_recent_share)
        if reason == "overflow":
            keep //= 2  # the estimate was too low for this provider: keep less
        elif reason == "manual":
            last_user = next(
                (
                    i
                    for i in range(len(messages) - 1, self._covered - 1, -1)
                    if isinstance(messages[i], UserMessage) and not _is_summary(messages[i])
                ),
                None,
            )
            # Keep the newest exchange (from the newest user message), unless it alone is
            # above the kept budget; nothing before it means nothing to compact.
            newest = (
                sum(_tokens(_chars(m)) for m in messages[last_user:])
                if last_user is not None
                else keep + 1
            )
            if newest <= keep:
                keep = newest
                if last_user is not None and last_user <= self._covered:
                    keep = -1
        info = CompactionInfo(
            session_id=self._transcript.session_id,
            compacted=False,
            reason=reason,
            tokens_before=before,
            tokens_after=before,
            context_window=model.context_window,
        )
        cut = _cut(messages, self._covered, keep) if keep >= 0 else None
        older = list(messages[self._covered : cut]) if cut is not None else []
        if cut is None or all(_is_summary(m) for m in older):
            return replace(
                info, note="nothing to compact: the conversation is only its newest part"
            )
        if self._flush is not None:
            await asyncio.shield(self._flush())
        reply = await self._summarise(
            self.view(messages[:cut]) if self._summary else older, instructions
        )
        summary = reply.text.strip()
        self.usage = self.usage + reply.usage
        self.cost = self.cost + reply.cost
        if not summary:
            raise CompactionError(
                "compaction failed: the model returned an empty summary", code="empty_summary"
            )
        kept = [_without_usage(m) for m in messages[cut:]]
        await asyncio.shield(
            self._transcript.append_compaction(
                summary, kept, reason=reason, summarised=cut - self._covered, tokens_before=before
            )
        )
        summarised = cut - self._covered
        self._summary = summary_message(summary)
        self._covered = cut
        self._fresh_from = len(messages)
        self.compactions += 1
        after = self.estimate(messages, system_prompt=system_prompt, tools=tools)
        return replace(
            info,
            compacted=True,
            summary=summary,
            messages_summarised=summarised,
            messages_kept=len(kept),
            tokens_after=after,
            usage=reply.usage,
            cost=reply.cost,
        )

    async def _summarise(
        self, messages: Sequence[Message], instructions: str | None
    ) -> AssistantMessage:
        model = self._model
        window = model.context_window
        out = max(1, min(self.settings.summary_max_tokens, model.max_tokens, window // 8))
        room = max(1_000, window - out - _tokens(len(_SUMMARY_SYSTEM)) - 256)
        # Three quarters of the characters the estimate would allow: the summary request is
        # the one that must not overflow.
        text = _serialise(messages, room * CHARS_PER_TOKEN * 3 // 4)
        focus = f"\n\nWhoever asked for it adds: {instructions.strip()}" if instructions else ""
        request = Context(
            system_prompt=_SUMMARY_SYSTEM,
            messages=(
                UserMessage(
                    content=(
                        "Summarise this conversation so the work can continue from the "
                        f"summary alone.\n\n<conversation>\n{text}\n</conversation>{focus}"
                    )
                ),
            ),
        )
        try:
            return await complete(self._inner, model, request, StreamOptions(max_tokens=out))
        except ProviderError as exc:
            raise CompactionError(
                f"compaction failed: the summarisation request failed: {exc.kind.value}: {exc}",
                code=exc.kind.value,
            ) from exc

    async def _auto(
        self, context: Context, options: StreamOptions | None, reason: CompactionReason
    ) -> _Outcome:
        """One automatic compaction with its actions."""
        sink = self._sink
        action_id = f"compaction-{uuid.uuid4().hex[:8]}"
        before = self.estimate(
            context.messages, system_prompt=context.system_prompt, tools=context.tools
        )
        budget = context_budget(self._model, options)
        if sink is not None:
            why = "the model said it did not fit" if reason == "overflow" else "it would not fit"
            sink.action(
                id=action_id,
                kind=ActionKind.COMPACTION,
                title=f"compacting the conversation (about {before} tokens; {why})",
                detail={"reason": reason, "tokens_before": before, "budget": budget,
                        "context_window": self._model.context_window},
                phase="started",
            )  # fmt: skip
        try:
            info = await self.compact(
                context.messages,
                reason=reason,
                system_prompt=context.system_prompt,
                tools=context.tools,
                options=options,
            )
        except CompactionError as exc:
            if sink is not None:
                sink.action(
                    id=action_id,
                    kind=ActionKind.COMPACTION,
                    title="compaction failed",
                    detail={"reason": reason, "error": exc.code},
                    phase="completed",
                    ok=False,
                    message=_clip(str(exc), _MAX_ACTION_TEXT),
                    level="warning",
                )
            return "failed"
        if sink is not None:
            sink.action(
                id=action_id,
                kind=ActionKind.COMPACTION,
                title=(
                    f"compacted: {info.messages_summarised} messages summarised, "
                    f"{info.messages_kept} kept (about {info.tokens_before} -> "
                    f"{info.tokens_after} tokens)"
                    if info.compacted
                    else info.note
                ),
                detail={"reason": reason, "tokens_before": info.tokens_before,
                        "tokens_after": info.tokens_after,
                        "messages_summarised": info.messages_summarised,
                        "messages_kept": info.messages_kept},
                phase="completed",
                ok=info.compacted,
                message=_clip(info.summary, _MAX_ACTION_TEXT) if info.compacted else None,
                level=None if info.compacted else "warning",
            )  # fmt: skip
        return "compacted" if info.compacted else "nothing"


class _CompactingProvider:
    """The run's provider: compacts before a request that would overflow, and retries once
    after a ``context_overflow`` answer (see the module docstring)."""

    def __init__(self, compactor: Compactor) -> None:
        self._compactor = compactor

    @property
    def api(self) -> Api:
        return self._compactor._inner.api

    async def aclose(self) -> None:
        """Nothing: the real provider belongs to whoever built the compactor."""

    async def stream(
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        compactor = self._compactor
        auto = compactor.settings.auto
        conversation = context.messages
        failed = False  # a summary request failed: do not try another for this request
        if auto:
            size = compactor.estimate(
                conversation, system_prompt=context.system_prompt, tools=context.tools
            )
            if size > context_budget(model, options):
                failed = await compactor._auto(context, options, "threshold") == "failed"
        retried = False
        while True:
            request = replace(context, messages=compactor.view(conversation))
            overflow: ErrorEvent | None = None
            first = True
            async with aclosing(compactor._inner.stream(model, request, options)) as events:
                async for event in events:
                    if (
                        first
                        and auto
                        and not retried
                        and isinstance(event, ErrorEvent)
                        and event.error.kind is ErrorKind.CONTEXT_OVERFLOW
                    ):
                        overflow = event
                        break
                    first = False
                    yield event
            if overflow is None:
                return
            retried = True
            if failed or await compactor._auto(context, options, "overflow") != "compacted":
                yield overflow
                return
            compactor.retries += 1
