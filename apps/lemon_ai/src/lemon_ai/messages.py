"""The conversation a model sees: messages, content blocks, tool specs and the context."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lemon_ai.usage import Cost, Usage

__all__ = [
    "AssistantContent",
    "AssistantMessage",
    "Context",
    "ImageContent",
    "Message",
    "StopReason",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevel",
    "ToolCall",
    "ToolResultMessage",
    "ToolSpec",
    "UserMessage",
]

StopReason = Literal["stop", "length", "tool_use", "error", "aborted"]
"""Why a response ended: natural stop, token limit, tool calls requested, error, or aborted."""

ThinkingLevel = Literal["off", "minimal", "low", "medium", "high"]
"""How much extended reasoning to ask for (ignored by models without reasoning)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TextContent:
    """Visible answer text."""

    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ThinkingContent:
    """Reasoning text; ``signature`` is the provider's opaque proof, sent back verbatim."""

    thinking: str
    signature: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    """A tool invocation the model asked for.

    ``arguments`` is the parsed JSON object; when the model produced text that is not a JSON
    object, ``arguments`` is empty and ``parse_error`` says why (the agent returns that to the
    model as a tool error instead of running the tool).

    ``truncated`` is true when the response hit its output-token limit (``stop_reason ==
    "length"``) before this call's arguments were complete: the call must not be run, and the
    model should be asked again with a larger budget or to do less per call. ``signature`` is a
    provider's opaque proof attached to the call (Gemini's ``thought_signature``), sent back
    verbatim with the call on later requests.
    """

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    raw_arguments: str = ""
    parse_error: str | None = None
    truncated: bool = False
    signature: str = ""


AssistantContent = TextContent | ThinkingContent | ToolCall


@dataclass(frozen=True, kw_only=True, slots=True)
class ImageContent:
    """An image attached to a user message or returned by a tool (a browser screenshot).

    ``data`` is the base64 of the image's bytes (``size`` of them, hashing to ``sha256``), as
    :func:`lemon_ai.images.decode_image` checked it. An image whose ``data`` is empty is a
    *reference* (what a transcript keeps): providers tell the model that an image of that type
    and size was here but is no longer available, instead of sending it.
    """

    mime_type: str
    data: str = ""
    size: int = 0
    sha256: str = ""

    @property
    def available(self) -> bool:
        """Whether the bytes are here (a reference has none)."""
        return bool(self.data)

    def reference(self) -> ImageContent:
        """The same image without its bytes (type, size and hash kept)."""
        return ImageContent(mime_type=self.mime_type, size=self.size, sha256=self.sha256)


@dataclass(frozen=True, kw_only=True, slots=True)
class UserMessage:
    """What the person (or a steering/follow-up source) said, with any images they attached
    (sent as image parts to models that take image input; see :mod:`lemon_ai.images`)."""

    content: str
    images: tuple[ImageContent, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class AssistantMessage:
    """One complete (or, on error/abort, partial) model response.

    ``refusal`` is not ``None`` when the model declined to answer (OpenAI ``refusal`` deltas,
    Anthropic ``stop_reason: "refusal"``); the refusal text is also the answer ``text``.
    """

    content: tuple[AssistantContent, ...] = ()
    stop_reason: StopReason = "stop"
    usage: Usage = field(default_factory=Usage)
    cost: Cost = field(default_factory=Cost)
    model: str = ""
    provider: str = ""
    error_message: str | None = None
    refusal: str | None = None

    @property
    def text(self) -> str:
        """All visible text blocks joined."""
        return "".join(block.text for block in self.content if isinstance(block, TextContent))

    @property
    def thinking(self) -> str:
        """All reasoning blocks joined."""
        return "".join(
            block.thinking for block in self.content if isinstance(block, ThinkingContent)
        )

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls, in the order the model made them."""
        return tuple(block for block in self.content if isinstance(block, ToolCall))

    @property
    def truncated_tool_call(self) -> ToolCall | None:
        """The tool call cut off by the output-token limit, if the response ended inside one."""
        if self.stop_reason != "length":
            return None
        for block in self.content:
            if isinstance(block, ToolCall) and block.truncated:
                return block
        return None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResultMessage:
    """The result of one tool call, fed back to the model, with any images the tool returned
    (sent as image parts to models that take image input; see
    :func:`lemon_ai.images.tool_result_turn`)."""

    tool_call_id: str
    tool_name: str
    content: str
    is_error: bool = False
    images: tuple[ImageContent, ...] = ()


Message = UserMessage | AssistantMessage | ToolResultMessage


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Context:
    """Everything one model call is given."""

    system_prompt: str = ""
    messages: tuple[Message, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
