"""OpenAI-compatible Chat Completions (``POST {base_url}/chat/completions``, streamed as SSE).

Reaches OpenAI and every server that copies its API (Ollama, vLLM, llama.cpp server, LM Studio,
OpenRouter, ...) through the model's ``base_url``. Tool calls arrive as ``delta.tool_calls``
fragments keyed by ``index`` (several indices mean parallel calls); reasoning text from servers
that stream it (``delta.reasoning_content`` or ``delta.reasoning``) becomes thinking deltas; usage
comes from the final chunk requested with ``stream_options.include_usage``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from lemon_ai._assembler import MessageAssembler
from lemon_ai.events import DoneEvent, StreamEvent
from lemon_ai.messages import (
    AssistantMessage,
    Context,
    StopReason,
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

__all__ = ["OpenAICompletionsProvider"]

_STOP_REASONS: dict[str, StopReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "stop",
}

_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}


def _messages(context: Context) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if context.system_prompt:
        out.append({"role": "system", "content": context.system_prompt})
    for message in context.messages:
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": message.content})
        elif isinstance(message, AssistantMessage):
            entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            calls = message.tool_calls
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.raw_arguments or "{}"},
                    }
                    for call in calls
                ]
            elif not message.text:
                continue  # an empty (aborted) answer carries nothing for the model
            out.append(entry)
        elif isinstance(message, ToolResultMessage):
            content = f"Error: {message.content}" if message.is_error else message.content
            out.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": content})
    return out


class OpenAICompletionsProvider(HttpProvider):
    """The ``openai_completions`` wire protocol over httpx.

    ``api_key`` is sent as a bearer token when given (local servers usually need none).
    """

    api: Api = "openai_completions"

    def build_request(
        self, model: Model, context: Context, options: StreamOptions
    ) -> tuple[str, dict[str, str], dict[str, Any]]:
        url = model.base_url.rstrip("/") + "/chat/completions"
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            **self._headers,
            **model.headers,
        }
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        body: dict[str, Any] = {
            "model": model.id,
            "messages": _messages(context),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if context.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": dict(tool.parameters),
                    },
                }
                for tool in context.tools
            ]
        if options.max_tokens is not None:
            # OpenAI itself wants max_completion_tokens (reasoning models reject max_tokens);
            # compatible servers know max_tokens.
            key = "max_completion_tokens" if model.provider == "openai" else "max_tokens"
            body[key] = options.max_tokens
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if model.reasoning and options.thinking != "off":
            body["reasoning_effort"] = _EFFORT[options.thinking]
        return url, headers, body

    async def translate(
        self, events: AsyncIterator[ServerSentEvent], assembler: MessageAssembler
    ) -> AsyncGenerator[StreamEvent, None]:
        finish: str | None = None
        done = False
        async for sse in events:
            if sse.data == "[DONE]":
                done = True
                break
            chunk = decode_json(sse.data)
            if not isinstance(chunk, dict):
                continue
            if chunk.get("error"):
                raise classify_error(self.api, None, chunk, raw=sse.data)
            usage = chunk.get("usage")
            if isinstance(usage, dict):
                details = usage.get("prompt_tokens_details") or {}
                cached = int(details.get("cached_tokens") or 0)
                assembler.usage = Usage(
                    input_tokens=max(0, int(usage.get("prompt_tokens") or 0) - cached),
                    output_tokens=int(usage.get("completion_tokens") or 0),
                    cache_read_tokens=cached,
                )
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if reasoning:
                    yield assembler.thinking("thinking", reasoning)
                content = delta.get("content")
                if content:
                    yield assembler.text("text", content)
                for call in delta.get("tool_calls") or ():
                    key = ("tool", call.get("index", 0))
                    function = call.get("function") or {}
                    if not assembler.has_tool(key):
                        call_id = call.get("id") or f"call_{key[1]}"
                        yield assembler.tool_start(key, call_id, function.get("name") or "")
                    arguments = function.get("arguments")
                    if arguments:
                        yield assembler.tool_delta(key, arguments)
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
        if not done and finish is None:
            raise truncated_stream_error(self.api)
        for end in assembler.end_open_tools():
            yield end
        stop: StopReason = "tool_use" if assembler.has_tool_calls else "stop"
        if finish is not None and stop != "tool_use":
            stop = _STOP_REASONS.get(finish, "stop")
        yield DoneEvent(message=assembler.message(stop))
