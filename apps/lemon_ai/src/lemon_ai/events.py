"""The one streaming event vocabulary every provider speaks.

A stream is an async iterator of :data:`StreamEvent`. Its shape is a contract (the provider
contract kit in ``lemon_platform_test.providers`` checks it for every provider):

* the first event is :class:`StartEvent`;
* then any number of text, thinking and tool-call events; for each tool call a
  :class:`ToolCallStartEvent`, zero or more :class:`ToolCallDeltaEvent` (JSON fragments) and one
  :class:`ToolCallEndEvent` carrying the parsed call;
* the last event is exactly one of :class:`DoneEvent` (the complete message, with usage, cost and
  stop reason) or :class:`ErrorEvent` (the classified error and the partial message so far).

Failures become an :class:`ErrorEvent`, never an exception out of the iterator; cancelling the
consuming task (or closing the iterator) closes the connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lemon_ai.errors import ProviderError
from lemon_ai.messages import AssistantMessage, ToolCall

__all__ = [
    "DoneEvent",
    "ErrorEvent",
    "StartEvent",
    "StreamEvent",
    "TextDeltaEvent",
    "ThinkingDeltaEvent",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "ToolCallStartEvent",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class StartEvent:
    """The provider accepted the request and the response began."""

    type: ClassVar[str] = "start"
    model: str
    provider: str


@dataclass(frozen=True, kw_only=True, slots=True)
class TextDeltaEvent:
    """More answer text for content block ``index``."""

    type: ClassVar[str] = "text_delta"
    index: int
    delta: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ThinkingDeltaEvent:
    """More reasoning text for content block ``index``."""

    type: ClassVar[str] = "thinking_delta"
    index: int
    delta: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallStartEvent:
    """The model started a tool call (content block ``index``)."""

    type: ClassVar[str] = "tool_call_start"
    index: int
    id: str
    name: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallDeltaEvent:
    """A fragment of a tool call's JSON arguments."""

    type: ClassVar[str] = "tool_call_delta"
    index: int
    id: str
    delta: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallEndEvent:
    """A tool call is complete; ``tool_call`` carries the parsed arguments."""

    type: ClassVar[str] = "tool_call_end"
    index: int
    tool_call: ToolCall


@dataclass(frozen=True, kw_only=True, slots=True)
class DoneEvent:
    """The response is complete."""

    type: ClassVar[str] = "done"
    message: AssistantMessage


@dataclass(frozen=True, kw_only=True, slots=True)
class ErrorEvent:
    """The call failed; ``partial`` holds whatever was received (stop reason ``error``)."""

    type: ClassVar[str] = "error"
    error: ProviderError
    partial: AssistantMessage


StreamEvent = (
    StartEvent
    | TextDeltaEvent
    | ThinkingDeltaEvent
    | ToolCallStartEvent
    | ToolCallDeltaEvent
    | ToolCallEndEvent
    | DoneEvent
    | ErrorEvent
)
