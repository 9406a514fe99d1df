"""Rendering scripted turns and errors in the OpenAI and Anthropic wire formats."""

from __future__ import annotations

import json
from typing import Any, Literal

from lemon_platform_test.providers._script import ScriptedError, ScriptedTurn

Wire = Literal["openai", "anthropic"]


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _frame(data: Any, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def _call_id(turn_number: int, position: int, explicit: str | None) -> str:
    return explicit or f"call_{turn_number}_{position}"


def openai_frames(turn: ScriptedTurn, model: str, number: int) -> list[bytes]:
    """Chat-completion chunks for ``turn``, ending with ``data: [DONE]``."""
    base = {"id": f"chatcmpl-scripted-{number}", "object": "chat.completion.chunk",
            "created": 0, "model": model}  # fmt: skip

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _frame({**base, "choices": [choice]})

    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"reasoning_content": p}) for p in _pieces(turn.thinking, turn.chunk_size)]
    frames += [chunk({"content": p}) for p in _pieces(turn.text, turn.chunk_size)]
    for position, call in enumerate(turn.tool_calls):
        frames.append(
            chunk({"tool_calls": [{
                "index": position, "id": _call_id(number, position, call.id), "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]})
        )  # fmt: skip
        for piece in _pieces(call.raw_arguments(), turn.chunk_size):
            frames.append(
                chunk({"tool_calls": [{"index": position, "function": {"arguments": piece}}]})
            )
    # A length stop wins: it is how a response cut inside a tool call ends.
    finish = "length" if turn.stop_reason == "length" else (
        "tool_calls" if turn.tool_calls else "stop")  # fmt: skip
    frames.append(chunk({}, finish))
    usage = {
        "prompt_tokens": turn.input_tokens + turn.cached_tokens,
        "completion_tokens": turn.output_tokens,
        "total_tokens": turn.input_tokens + turn.cached_tokens + turn.output_tokens,
        "prompt_tokens_details": {"cached_tokens": turn.cached_tokens},
    }
    frames.append(_frame({**base, "choices": [], "usage": usage}))
    frames.append(_frame("[DONE]"))
    return frames


def anthropic_frames(turn: ScriptedTurn, model: str, number: int) -> list[bytes]:
    """Messages-API stream events for ``turn``, ending with ``message_stop``."""

    def event(name: str, data: dict[str, Any]) -> bytes:
        return _frame({"type": name, **data}, name)

    frames = [
        event("message_start", {"message": {
            "id": f"msg_scripted_{number}", "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": turn.input_tokens, "output_tokens": 1,
                      "cache_read_input_tokens": turn.cached_tokens,
                      "cache_creation_input_tokens": 0},
        }}),
        event("ping", {}),
    ]  # fmt: skip

    def start(index: int, block: dict[str, Any]) -> bytes:
        return event("content_block_start", {"index": index, "content_block": block})

    def delta(index: int, body: dict[str, Any]) -> bytes:
        return event("content_block_delta", {"index": index, "delta": body})

    def stop(index: int) -> bytes:
        return event("content_block_stop", {"index": index})

    index = 0
    if turn.thinking:
        frames.append(start(index, {"type": "thinking", "thinking": ""}))
        for piece in _pieces(turn.thinking, turn.chunk_size):
            frames.append(delta(index, {"type": "thinking_delta", "thinking": piece}))
        signature = f"scripted-signature-{number}"
        frames.append(delta(index, {"type": "signature_delta", "signature": signature}))
        frames.append(stop(index))
        index += 1
    if turn.text:
        frames.append(start(index, {"type": "text", "text": ""}))
        for piece in _pieces(turn.text, turn.chunk_size):
            frames.append(delta(index, {"type": "text_delta", "text": piece}))
        frames.append(stop(index))
        index += 1
    for position, call in enumerate(turn.tool_calls):
        call_id = _call_id(number, position, call.id)
        frames.append(start(index, {"type": "tool_use", "id": call_id, "name": call.name,
                                    "input": {}}))  # fmt: skip
        for piece in _pieces(call.raw_arguments(), turn.chunk_size):
            frames.append(delta(index, {"type": "input_json_delta", "partial_json": piece}))
        frames.append(stop(index))
        index += 1
    reason = "max_tokens" if turn.stop_reason == "length" else (
        "tool_use" if turn.tool_calls else "end_turn")  # fmt: skip
    frames.append(event("message_delta", {
        "delta": {"stop_reason": reason, "stop_sequence": None},
        "usage": {"output_tokens": turn.output_tokens},
    }))  # fmt: skip
    frames.append(event("message_stop", {}))
    return frames


def error_body(error: ScriptedError, wire: Wire) -> dict[str, Any]:
    """The JSON error body ``wire`` uses."""
    if wire == "openai":
        return {"error": {"message": error.message, "type": error.openai_code or "error",
                          "param": None, "code": error.openai_code}}  # fmt: skip
    detail = {"type": error.anthropic_type or "api_error", "message": error.message}
    return {"type": "error", "error": detail}


def error_frame(error: ScriptedError, wire: Wire) -> bytes:
    """The in-stream error event ``wire`` uses."""
    body = error_body(error, wire)
    return _frame(body, "error" if wire == "anthropic" else None)
