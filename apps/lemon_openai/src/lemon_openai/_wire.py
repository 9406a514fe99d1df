"""The request shapes ``/v1`` takes, read into typed records with an error naming the field.

Chat Completions: ``model``, ``messages`` (system / developer / user / assistant / tool roles;
content as text or parts: ``text`` and ``image_url`` with a ``data:`` URL), ``stream``,
``stream_options.include_usage``, ``user`` (a string, or an object with an ``id``: front ends
forwarding their user), ``x_lemon_tools``. Responses: ``model``, ``input`` (text or messages),
``instructions``, ``stream``, ``previous_response_id``. Keys this API does not use
(``temperature``, ``top_p``...) are accepted and ignored, as an agent chooses its own sampling;
client-side ``tools`` are refused (the agent runs its own tools).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from lemon_openai.errors import ApiError

__all__ = [
    "ChatMessage",
    "ChatRequest",
    "ResponsesRequest",
    "model_override",
    "parse_chat",
    "parse_responses",
    "render_prompt",
]

_ROLES: Final = frozenset({"system", "developer", "user", "assistant", "tool"})
_IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


@dataclass(frozen=True, kw_only=True, slots=True)
class ChatMessage:
    role: str
    text: str
    images: tuple[Mapping[str, Any], ...] = ()
    name: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ChatRequest:
    model: str | None
    """``None``: the session's model (``lemon``); else ``provider:model``."""
    model_name: str
    messages: tuple[ChatMessage, ...]
    stream: bool = False
    include_usage: bool = False
    user: str | None = None
    lemon_tools: bool = False
    """``x_lemon_tools``: tool activity also as ``tool_calls`` (already run by the agent)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ResponsesRequest:
    model: str | None
    model_name: str
    messages: tuple[ChatMessage, ...]
    instructions: str | None = None
    stream: bool = False
    previous_response_id: str | None = None
    images: tuple[Mapping[str, Any], ...] = field(default=())


def _bad(message: str, param: str) -> ApiError:
    return ApiError(400, message, param=param, code="invalid_value")


def model_override(value: object, param: str = "model") -> str | None:
    """``lemon`` -> ``None`` (the session's own model); ``lemon:<provider>:<model>`` ->
    ``provider:model``; anything else is a 404 ``model_not_found``."""
    if not isinstance(value, str) or not value.strip():
        raise _bad("'model' is required: 'lemon' or 'lemon:<provider>:<model>'", param)
    if value == "lemon":
        return None
    prefix, _, rest = value.partition(":")
    provider, _, model = rest.partition(":")
    if prefix != "lemon" or not provider or not model:
        raise ApiError(
            404,
            f"The model '{value}' does not exist: use 'lemon' (the session's model) or "
            "'lemon:<provider>:<model>' (GET /v1/models lists them)",
            code="model_not_found",
            param=param,
        )
    return f"{provider}:{model}"


def _image(url: object, where: str) -> Mapping[str, Any]:
    if not isinstance(url, str) or not url.startswith("data:"):
        raise _bad(f"{where}: an image must be a data URL (data:image/png;base64,...)", where)
    head, _, data = url[5:].partition(",")
    mime, _, encoding = head.partition(";")
    if mime not in _IMAGE_TYPES or encoding != "base64":
        raise _bad(f"{where}: an image must be base64 PNG, JPEG, GIF or WebP, got {head!r}", where)
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise _bad(f"{where}: the image's base64 data does not decode", where) from None
    return {"type": "image", "data": data, "mime_type": mime}


def _content(value: object, where: str) -> tuple[str, tuple[Mapping[str, Any], ...]]:
    if value is None:
        return "", ()
    if isinstance(value, str):
        return value, ()
    if not isinstance(value, list):
        raise _bad(f"{where} must be a string or a list of content parts", where)
    texts: list[str] = []
    images: list[Mapping[str, Any]] = []
    for index, part in enumerate(value):
        at = f"{where}[{index}]"
        if not isinstance(part, dict):
            raise _bad(f"{at} must be an object with a 'type'", at)
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text"):
            text = part.get("text")
            if not isinstance(text, str):
                raise _bad(f"{at}.text must be a string", f"{at}.text")
            texts.append(text)
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            images.append(_image(url, f"{at}.image_url.url"))
        elif kind == "input_image":
            images.append(_image(part.get("image_url"), f"{at}.image_url"))
        else:
            raise _bad(
                f"{at}.type {kind!r} is not supported (text and image parts are)", f"{at}.type"
            )
    return "\n".join(texts), tuple(images)


def _messages(value: object, param: str) -> tuple[ChatMessage, ...]:
    if not isinstance(value, list) or not value:
        raise _bad(f"'{param}' must be a non-empty list of messages", param)
    out: list[ChatMessage] = []
    for index, raw in enumerate(value):
        at = f"{param}[{index}]"
        if not isinstance(raw, dict):
            raise _bad(f"{at} must be an object with 'role' and 'content'", at)
        role = raw.get("role")
        if role not in _ROLES:
            raise _bad(
                f"{at}.role must be one of system, developer, user, assistant, tool; got {role!r}",
                f"{at}.role",
            )
        text, images = _content(raw.get("content"), f"{at}.content")
        name = raw.get("name") if isinstance(raw.get("name"), str) else None
        out.append(ChatMessage(role=str(role), text=text, images=images, name=name))
    return tuple(out)


def _flag(body: Mapping[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _bad(f"'{name}' must be true or false", name)
    return value


def _refuse_tools(body: Mapping[str, Any]) -> None:
    if body.get("tools"):
        raise _bad(
            "'tools' is not supported: Lemon's agent runs its own tools in the session's "
            "workspace; send the request without client-side tools",
            "tools",
        )


def parse_chat(body: object) -> ChatRequest:
    """A ``/v1/chat/completions`` body (see the module docstring)."""
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object", "body")
    _refuse_tools(body)
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise _bad("'stream_options' must be an object", "stream_options")
    include = (options or {}).get("include_usage", False)
    if not isinstance(include, bool):
        raise _bad("'stream_options.include_usage' must be true or false", "stream_options")
    user = body.get("user")
    if isinstance(user, dict):  # front ends that forward their user as an object
        user = user.get("id")
    if user is not None and (not isinstance(user, str) or not user.strip()):
        raise _bad("'user' must be a non-empty string (it names the session)", "user")
    return ChatRequest(
        model=model_override(body.get("model")),
        model_name=str(body.get("model")),
        messages=_messages(body.get("messages"), "messages"),
        stream=_flag(body, "stream"),
        include_usage=include,
        user=user,
        lemon_tools=_flag(body, "x_lemon_tools"),
    )


def parse_responses(body: object) -> ResponsesRequest:
    """A ``/v1/responses`` body (see the module docstring)."""
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object", "body")
    _refuse_tools(body)
    raw = body.get("input")
    if isinstance(raw, str):
        if not raw.strip():
            raise _bad("'input' must not be empty", "input")
        messages: tuple[ChatMessage, ...] = (ChatMessage(role="user", text=raw),)
    else:
        items = (
            [
                item
                for item in raw or []
                if not isinstance(item, dict) or item.get("type") != "reasoning"
            ]
            if isinstance(raw, list)
            else raw
        )
        messages = _messages(items, "input")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise _bad("'instructions' must be a string", "instructions")
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        raise _bad("'previous_response_id' must be a string", "previous_response_id")
    return ResponsesRequest(
        model=model_override(body.get("model")),
        model_name=str(body.get("model")),
        messages=messages,
        instructions=instructions,
        stream=_flag(body, "stream"),
        previous_response_id=previous,
    )


def render_prompt(
    messages: tuple[ChatMessage, ...], *, continuing: bool, instructions: str | None = None
) -> tuple[str, tuple[Mapping[str, Any], ...]]:
    """The prompt one run takes, and its images.

    ``continuing`` (the session already holds the conversation): only the messages after
    the last assistant message (the new turn), so a client resending the whole history does
    not repeat it. Else (a new session): every earlier message is fenced as the conversation
    so far, and the last user turn follows it. System / developer messages are always sent,
    fenced as the client's instructions (they are the calling program's, not the owner's).
    """
    system = [m.text for m in messages if m.role in ("system", "developer") and m.text]
    if instructions:
        system.insert(0, instructions)
    turns = [m for m in messages if m.role not in ("system", "developer")]
    last_assistant = max((i for i, m in enumerate(turns) if m.role == "assistant"), default=-1)
    new = turns[last_assistant + 1 :]
    earlier = [] if continuing else turns[: last_assistant + 1]
    parts: list[str] = []
    if system:
        parts.append("<client_instructions>\n" + "\n\n".join(system) + "\n</client_instructions>")
    if earlier:
        lines = [f"{m.role}{f' ({m.name})' if m.name else ''}: {m.text}" for m in earlier]
        parts.append("<conversation_so_far>\n" + "\n".join(lines) + "\n</conversation_so_far>")
    for message in new:
        if message.role == "tool":
            parts.append(f"<tool_result>\n{message.text}\n</tool_result>")
        else:
            parts.append(message.text)
    images = tuple(image for m in new for image in m.images)
    return "\n\n".join(p for p in parts if p), images
