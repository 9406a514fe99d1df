"""OpenAI-compatible Chat Completions (``POST {base_url}/chat/completions``, streamed as SSE).

Reaches OpenAI and every server that copies its API (Ollama, vLLM, llama.cpp server, LM Studio,
OpenRouter, Gemini's OpenAI-compatible endpoint, ...) through the model's ``base_url``. Usage
comes from the final chunk requested with ``stream_options.include_usage``.

What the translator accepts, because real servers send it:

* tool calls as ``delta.tool_calls`` fragments keyed by ``index`` (several indices mean parallel
  calls); calls without an ``index`` (Gemini) are told apart by ``id``, a fragment with neither
  continues the last call, and an ``index`` reused with a new ``id`` after the call at that
  index has complete JSON arguments starts a new call (servers that number every call 0);
* ``arguments`` as a JSON object instead of a JSON-encoded string (re-encoded to a string);
* ``extra_content.google.thought_signature`` on a tool call (Gemini 3), kept as the call's
  ``signature`` and sent back the same way on later requests (the API rejects a call without it);
* reasoning as ``delta.reasoning_content`` / ``delta.reasoning`` or as a leading
  ``<think>…</think>`` section of the content: both become thinking, never answer text;
* ``delta.refusal`` text: it is the answer, and the message's ``refusal`` says so;
* ``finish_reason: "length"`` inside a tool call: the call is marked ``truncated`` (see
  :meth:`MessageAssembler.finish`).

A user message with images is sent as content parts: its text, then one ``image_url`` part per
image with a ``data:<type>;base64,...`` URL (what OpenAI, Gemini's compatible endpoint, Ollama
and vLLM take); see :func:`lemon_ai.images.user_turn` for images a model is not sent. A ``tool``
message carries text only on this wire, so the images of tool results (a browser screenshot)
follow the run of ``tool`` messages as one ``user`` message: a text part naming the tool call,
then its ``image_url`` parts (the tool message says the image follows).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Hashable
from typing import Any

import msgspec

from lemon_ai._assembler import MessageAssembler
from lemon_ai._think import ThinkTagSplitter
from lemon_ai.events import DoneEvent, StreamEvent
from lemon_ai.images import tool_result_turn, user_turn
from lemon_ai.messages import (
    AssistantMessage,
    Context,
    ImageContent,
    StopReason,
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

__all__ = ["OpenAICompletionsProvider"]

_STOP_REASONS: dict[str, StopReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "stop",
}

_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}


def _tool_call(call: ToolCall) -> dict[str, Any]:
    arguments = "{}" if call.truncated else (call.raw_arguments or "{}")
    entry: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }
    if call.signature:
        entry["extra_content"] = {"google": {"thought_signature": call.signature}}
    return entry


def _text(value: Any) -> str:
    """Content as text: a string, or the text parts of a list of content parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            part["text"] for part in value if isinstance(part, dict)
            and isinstance(part.get("text"), str)
        )  # fmt: skip
    return ""


def _arguments(value: Any) -> str:
    """Tool-call arguments as JSON text (some servers send the object itself)."""
    if value is None or isinstance(value, str):
        return value or ""
    return msgspec.json.encode(value).decode()


def _signature(call: dict[str, Any]) -> str:
    extra = call.get("extra_content")
    google = extra.get("google") if isinstance(extra, dict) else None
    signature = google.get("thought_signature") if isinstance(google, dict) else None
    return signature if isinstance(signature, str) else ""


class _ToolKeys:
    """Which tool call a ``delta.tool_calls`` fragment belongs to (see the module docstring)."""

    def __init__(self) -> None:
        self._by_index: dict[int, Hashable] = {}
        self._by_id: dict[str, Hashable] = {}
        self._ids: dict[Hashable, str] = {}
        self._last: Hashable | None = None
        self._count = 0

    def key(
        self, fragment: dict[str, Any], assembler: MessageAssembler
    ) -> tuple[Hashable, str | None]:
        """(key, id of a new call or None when the fragment continues a call)."""
        index = fragment.get("index")
        call_id = fragment.get("id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        key: Hashable | None
        if isinstance(index, int):
            key = self._by_index.get(index)
            if (
                key is not None
                and call_id is not None
                and self._ids[key] != call_id
                and assembler.tool_arguments_complete(key)
            ):
                key = None  # the index was reused for the next call
        elif call_id is not None:
            key = self._by_id.get(call_id)
        else:
            key = self._last
        new_id: str | None = None
        if key is None:
            key = ("tool", self._count)
            new_id = call_id or f"call_{self._count}"
            self._count += 1
            self._ids[key] = new_id
            if isinstance(index, int):
                self._by_index[index] = key
            self._by_id[new_id] = key
        self._last = key
        return key, new_id


def _user_content(message: UserMessage, model: Model) -> str | list[dict[str, Any]]:
    """A plain string, or text and ``image_url`` parts (base64 data URLs) with images."""
    text, images = user_turn(message, model)
    if not images:
        return text
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    parts += [_image_part(image) for image in images]
    return parts


def _image_part(image: ImageContent) -> dict[str, Any]:
    url = f"data:{image.mime_type};base64,{image.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def _messages(context: Context, model: Model) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if context.system_prompt:
        out.append({"role": "system", "content": context.system_prompt})
    # Images of the current run of tool messages: sent as one user message after it (a tool
    # message cannot carry them, and nothing may come between a call's tool messages).
    pending: list[dict[str, Any]] = []

    def flush() -> None:
        if pending:
            out.append({"role": "user", "content": list(pending)})
            pending.clear()

    for message in context.messages:
        if not isinstance(message, ToolResultMessage):
            flush()
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": _user_content(message, model)})
        elif isinstance(message, AssistantMessage):
            entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            calls = message.tool_calls
            if calls:
                entry["tool_calls"] = [_tool_call(call) for call in calls]
            elif not message.text:
                continue  # an empty (aborted) answer carries nothing for the model
            out.append(entry)
        elif isinstance(message, ToolResultMessage):
            text, images = tool_result_turn(message, model)
            content = f"Error: {text}" if message.is_error else text
            if images:
                content += f"\n[{len(images)} image(s) of this result follow in the next message]"
                pending.append({"type": "text", "text": f"The image(s) returned by the "
                                f"{message.tool_name} call {message.tool_call_id}:"})  # fmt: skip
                pending.extend(_image_part(image) for image in images)
            out.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": content})
    flush()
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
            "messages": _messages(context, model),
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
        keys = _ToolKeys()
        think = ThinkTagSplitter()
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
                if isinstance(reasoning, str) and reasoning:
                    yield assembler.thinking("thinking", reasoning)
                content = _text(delta.get("content"))
                if content:
                    for kind, piece in think.feed(content):
                        if kind == "thinking":
                            yield assembler.thinking("thinking", piece)
                        else:
                            yield assembler.text("text", piece)
                refusal = delta.get("refusal")
                if isinstance(refusal, str) and refusal:
                    yield assembler.refusal("text", refusal)
                for call in delta.get("tool_calls") or ():
                    key, new_id = keys.key(call, assembler)
                    function = call.get("function") or {}
                    if new_id is not None:
                        name = function.get("name")
                        name = name if isinstance(name, str) else ""
                        yield assembler.tool_start(key, new_id, name)
                    signature = _signature(call)
                    if signature:
                        assembler.tool_signature(key, signature)
                    arguments = _arguments(function.get("arguments"))
                    if arguments:
                        yield assembler.tool_delta(key, arguments)
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
        if not done and finish is None:
            raise truncated_stream_error(self.api)
        for kind, piece in think.close():
            if kind == "thinking":
                yield assembler.thinking("thinking", piece)
            else:
                yield assembler.text("text", piece)
        for end in assembler.end_open_tools():
            yield end
        reported: StopReason = _STOP_REASONS.get(finish or "stop", "stop")
        yield DoneEvent(message=assembler.finish(reported))
