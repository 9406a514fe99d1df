"""Anthropic Messages API (``POST {base_url}/v1/messages``, streamed as SSE).

Events map one-to-one onto the vocabulary: ``content_block_start``/``_delta``/``_stop`` for
``text``, ``thinking`` (with its signature, sent back verbatim on later turns) and ``tool_use``
(arguments as ``input_json_delta`` fragments); usage from ``message_start`` and
``message_delta``; ``message_stop`` ends the response and an ``error`` event fails it.

``stop_reason: "max_tokens"`` inside a ``tool_use`` block marks that call ``truncated`` (see
:meth:`MessageAssembler.finish`); ``stop_reason: "refusal"`` sets the message's ``refusal``. A
stream that ends cleanly after ``message_delta`` carried the stop reason is complete even when
its ``message_stop`` is missing (proxies that close early) or lacks its blank line.

A user message with images is sent as ``image`` blocks with base64 sources, then its text; see
:func:`lemon_ai.images.user_turn` for images a model is not sent. A tool result with images (a
browser screenshot) carries them inside its ``tool_result`` block: its content is then a list,
the text block first, then the ``image`` blocks (the Messages API takes both there).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from lemon_ai._assembler import MessageAssembler
from lemon_ai.events import DoneEvent, StreamEvent
from lemon_ai.images import tool_result_turn, user_turn
from lemon_ai.messages import (
    AssistantMessage,
    Context,
    ImageContent,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from lemon_ai.models import Api, Model
from lemon_ai.provider import StreamOptions
from lemon_ai.providers._http import (
    HttpProvider,
    classify_error,
    decode_json,
    truncated_stream_error,
)
from lemon_ai.sse import ServerSentEvent
from lemon_ai.usage import Usage

__all__ = ["ANTHROPIC_VERSION", "THINKING_BUDGETS", "AnthropicMessagesProvider"]

ANTHROPIC_VERSION = "2023-06-01"

THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}
"""Thinking token budgets per level; ``max_tokens`` is raised to fit the budget."""

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "refusal": "stop",
    "tool_use": "tool_use",
    "max_tokens": "length",
}


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if block.signature:  # unsigned reasoning is rejected by the API; drop it
                blocks.append(
                    {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
                )
        elif isinstance(block, TextContent):
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ToolCall):
            blocks.append(
                {"type": "tool_use", "id": block.id, "name": block.name,
                 "input": dict(block.arguments)}
            )  # fmt: skip
    return blocks


def _user_blocks(message: UserMessage, model: Model) -> list[dict[str, Any]]:
    """Image blocks (base64 sources) first, as Anthropic recommends, then the text."""
    text, images = user_turn(message, model)
    blocks: list[dict[str, Any]] = [_image_block(image) for image in images]
    if text or not images:  # the API rejects an empty text block next to an image
        blocks.append({"type": "text", "text": text})
    return blocks


def _image_block(image: ImageContent) -> dict[str, Any]:
    source = {"type": "base64", "media_type": image.mime_type, "data": image.data}
    return {"type": "image", "source": source}


def _tool_result_block(message: ToolResultMessage, model: Model) -> dict[str, Any]:
    """A ``tool_result`` block: its text, or (with images sent) a text block then the images."""
    text, images = tool_result_turn(message, model)
    content: str | list[dict[str, Any]] = text
    if images:
        content = [{"type": "text", "text": text}] if text else []
        content += [_image_block(image) for image in images]
    return {"type": "tool_result", "tool_use_id": message.tool_call_id, "content": content,
            "is_error": message.is_error}  # fmt: skip


def _messages(context: Context, model: Model) -> list[dict[str, Any]]:
    """Alternating user/assistant turns; tool results (and what follows) join one user turn."""
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message in context.messages:
        if isinstance(message, UserMessage):
            add("user", _user_blocks(message, model))
        elif isinstance(message, AssistantMessage):
            add("assistant", _assistant_blocks(message))
        elif isinstance(message, ToolResultMessage):
            add("user", [_tool_result_block(message, model)])
    return turns


def _usage(raw: Any, previous: Usage) -> Usage:
    if not isinstance(raw, dict):
        return previous

    def pick(key: str, old: int) -> int:
        value = raw.get(key)
        return int(value) if value is not None else old

    return Usage(
        input_tokens=pick("input_tokens", previous.input_tokens),
        output_tokens=pick("output_tokens", previous.output_tokens),
        cache_read_tokens=pick("cache_read_input_tokens", previous.cache_read_tokens),
        cache_write_tokens=pick("cache_creation_input_tokens", previous.cache_write_tokens),
    )


class AnthropicMessagesProvider(HttpProvider):
    """The ``anthropic_messages`` wire protocol over httpx (``x-api-key`` authentication)."""

    api: Api = "anthropic_messages"

    def build_request(
        self, model: Model, context: Context, options: StreamOptions
    ) -> tuple[str, dict[str, str], dict[str, Any]]:
        url = model.base_url.rstrip("/") + "/v1/messages"
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "anthropic-version": ANTHROPIC_VERSION,
            **self._headers,
            **model.headers,
        }
        if self._api_key:
            headers["x-api-key"] = self._api_key
        max_tokens = options.max_tokens or model.max_tokens
        body: dict[str, Any] = {
            "model": model.id,
            "max_tokens": max_tokens,
            "messages": _messages(context, model),
            "stream": True,
        }
        if context.system_prompt:
            body["system"] = context.system_prompt
        if context.tools:
            body["tools"] = [
                {"name": tool.name, "description": tool.description,
                 "input_schema": dict(tool.parameters)}
                for tool in context.tools
            ]  # fmt: skip
        if model.reasoning and options.thinking != "off":
            budget = THINKING_BUDGETS[options.thinking]
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            body["max_tokens"] = max(max_tokens, budget + 1024)
        elif options.temperature is not None:
            body["temperature"] = options.temperature  # not allowed together with thinking
        return url, headers, body

    async def translate(
        self, events: AsyncIterator[ServerSentEvent], assembler: MessageAssembler
    ) -> AsyncGenerator[StreamEvent, None]:
        stop: StopReason = "stop"
        stopped = False  # message_delta carried the stop reason: the content is complete
        async for sse in events:
            kind = sse.event
            if kind == "ping":
                continue
            data = decode_json(sse.data)
            if not isinstance(data, dict):
                continue
            kind = data.get("type", kind)
            if kind == "content_block_delta":
                index = data.get("index", 0)
                delta = data.get("delta") or {}
                delta_type = delta.get("type")
                if delta_type == "text_delta":
                    yield assembler.text(index, delta.get("text", ""))
                elif delta_type == "thinking_delta":
                    yield assembler.thinking(index, delta.get("thinking", ""))
                elif delta_type == "signature_delta":
                    assembler.signature(index, delta.get("signature", ""))
                elif delta_type == "input_json_delta" and assembler.has_tool(index):
                    fragment = delta.get("partial_json", "")
                    if isinstance(fragment, str) and fragment:
                        yield assembler.tool_delta(index, fragment)
            elif kind == "content_block_start":
                index = data.get("index", 0)
                block = data.get("content_block") or {}
                if block.get("type") == "tool_use":
                    yield assembler.tool_start(index, block.get("id", ""), block.get("name", ""))
                elif block.get("type") == "text" and block.get("text"):
                    yield assembler.text(index, block["text"])
                elif block.get("type") == "thinking" and block.get("thinking"):
                    yield assembler.thinking(index, block["thinking"])
            elif kind == "content_block_stop":
                end = assembler.tool_end(data.get("index", 0))
                if end is not None:
                    yield end
            elif kind == "message_start":
                message = data.get("message") or {}
                assembler.usage = _usage(message.get("usage"), assembler.usage)
            elif kind == "message_delta":
                reason = (data.get("delta") or {}).get("stop_reason")
                if isinstance(reason, str) and reason:
                    stop = _STOP_REASONS.get(reason, "stop")
                    stopped = True
                    if reason == "refusal":
                        assembler.refused = True
                assembler.usage = _usage(data.get("usage"), assembler.usage)
            elif kind == "message_stop":
                stopped = True
                break
            elif kind == "error":
                raise classify_error(self.api, None, data, raw=sse.data)
        if not stopped:
            raise truncated_stream_error(self.api)
        for end in assembler.end_open_tools():
            yield end
        yield DoneEvent(message=assembler.finish(stop))
