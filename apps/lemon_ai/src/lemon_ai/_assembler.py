"""Builds the assistant message from wire-level pieces and emits the matching stream events.

Each provider maps its wire format onto this one builder, so block indexing, tool-argument
parsing, the stop reason (including a tool call cut by the output limit), usage and cost work
the same for every provider.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from lemon_ai.events import (
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from lemon_ai.messages import (
    AssistantContent,
    AssistantMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
)
from lemon_ai.models import Model
from lemon_ai.usage import Usage


@dataclass(slots=True)
class _Block:
    kind: Literal["text", "thinking", "tool"]
    parts: list[str] = field(default_factory=list)
    id: str = ""
    name: str = ""
    signature: str = ""
    ended: bool = False
    call: ToolCall | None = None


TRUNCATED_ARGUMENTS = (
    "the response reached its output-token limit (max_tokens) before this call's arguments were "
    "complete; the call was not run"
)


def parse_tool_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """Parse a tool call's JSON arguments; an empty string means no arguments."""
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


class MessageAssembler:
    """Accumulates one response; ``key`` identifies a block in the provider's own terms."""

    def __init__(self, model: Model) -> None:
        self._model = model
        self._blocks: list[_Block] = []
        self._keys: dict[Hashable, int] = {}
        self.usage = Usage()
        self.produced_output = False
        self.refused = False

    def _block(self, key: Hashable, kind: Literal["text", "thinking", "tool"]) -> int:
        index = self._keys.get(key)
        if index is None or self._blocks[index].kind != kind:
            index = len(self._blocks)
            self._blocks.append(_Block(kind))
            self._keys[key] = index
        return index

    def text(self, key: Hashable, delta: str) -> TextDeltaEvent:
        index = self._block(key, "text")
        self._blocks[index].parts.append(delta)
        self.produced_output = True
        return TextDeltaEvent(index=index, delta=delta)

    def thinking(self, key: Hashable, delta: str) -> ThinkingDeltaEvent:
        index = self._block(key, "thinking")
        self._blocks[index].parts.append(delta)
        self.produced_output = True
        return ThinkingDeltaEvent(index=index, delta=delta)

    def refusal(self, key: Hashable, delta: str) -> TextDeltaEvent:
        """Refusal text: it is the answer, and the message says it was a refusal."""
        self.refused = True
        return self.text(key, delta)

    def signature(self, key: Hashable, signature: str) -> None:
        index = self._block(key, "thinking")
        self._blocks[index].signature += signature

    def tool_signature(self, key: Hashable, signature: str) -> None:
        """An opaque signature attached to a tool call (sent back verbatim later)."""
        index = self._keys[key]
        self._blocks[index].signature = signature

    def has_tool(self, key: Hashable) -> bool:
        index = self._keys.get(key)
        return index is not None and self._blocks[index].kind == "tool"

    def tool_start(self, key: Hashable, call_id: str, name: str) -> ToolCallStartEvent:
        index = len(self._blocks)
        self._blocks.append(_Block("tool", id=call_id, name=name))
        self._keys[key] = index
        self.produced_output = True
        return ToolCallStartEvent(index=index, id=call_id, name=name)

    def tool_arguments_complete(self, key: Hashable) -> bool:
        """Whether the arguments of tool call ``key`` so far are one complete JSON object."""
        raw = "".join(self._blocks[self._keys[key]].parts)
        _, error = parse_tool_arguments(raw)
        return error is None and bool(raw.strip())

    def tool_delta(self, key: Hashable, delta: str) -> ToolCallDeltaEvent:
        index = self._keys[key]
        block = self._blocks[index]
        block.parts.append(delta)
        return ToolCallDeltaEvent(index=index, id=block.id, delta=delta)

    def tool_end(self, key: Hashable) -> ToolCallEndEvent | None:
        index = self._keys.get(key)
        if index is None:
            return None
        block = self._blocks[index]
        if block.kind != "tool" or block.ended:
            return None
        block.ended = True
        raw = "".join(block.parts)
        arguments, error = parse_tool_arguments(raw)
        block.call = ToolCall(
            id=block.id,
            name=block.name,
            arguments=arguments,
            raw_arguments=raw,
            parse_error=error,
            signature=block.signature,
        )
        return ToolCallEndEvent(index=index, tool_call=block.call)

    def end_open_tools(self) -> list[ToolCallEndEvent]:
        """End every tool call still open (wire formats that only mark the end of the message)."""
        events: list[ToolCallEndEvent] = []
        for key in list(self._keys):
            event = self.tool_end(key)
            if event is not None:
                events.append(event)
        return events

    @property
    def has_tool_calls(self) -> bool:
        return any(block.call is not None for block in self._blocks)

    def finish(self, reported: StopReason) -> AssistantMessage:
        """The final message, with the stop reason settled from what the wire ``reported``.

        A response with tool calls stops with ``tool_use``, unless it hit the output limit
        (``length``) inside its last call: that call's arguments are incomplete (they do not
        parse, or never began), so it is marked ``truncated`` and the stop reason stays
        ``length``. A length stop after complete calls is an ordinary ``tool_use``.
        """
        tools = [block for block in self._blocks if block.kind == "tool" and block.call]
        stop = reported
        if tools:
            last = tools[-1]
            call = last.call
            assert call is not None
            cut = call.parse_error is not None or not call.raw_arguments.strip()
            if reported == "length" and cut:
                last.call = replace(
                    call, arguments={}, parse_error=TRUNCATED_ARGUMENTS, truncated=True
                )
            else:
                stop = "tool_use"
        return self.message(stop)

    def message(
        self, stop_reason: StopReason, error_message: str | None = None
    ) -> AssistantMessage:
        """The message so far; unfinished tool calls are left out."""
        content: list[AssistantContent] = []
        for block in self._blocks:
            if block.kind == "text":
                content.append(TextContent(text="".join(block.parts)))
            elif block.kind == "thinking":
                content.append(
                    ThinkingContent(thinking="".join(block.parts), signature=block.signature)
                )
            elif block.call is not None:
                content.append(block.call)
        refusal: str | None = None
        if self.refused:
            refusal = "".join(b.text for b in content if isinstance(b, TextContent))
        return AssistantMessage(
            content=tuple(content),
            stop_reason=stop_reason,
            usage=self.usage,
            cost=self._model.cost(self.usage),
            model=self._model.id,
            provider=self._model.provider,
            error_message=error_message,
            refusal=refusal,
        )
