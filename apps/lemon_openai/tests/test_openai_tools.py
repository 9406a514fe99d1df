"""Tool activity on ``/v1/chat/completions`` (as the assistant's text; with ``x_lemon_tools``
also as ``tool_calls``), and a chat front end's request shape replayed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import openai

from lemon_runtime import Runtime

PREAPPROVE = '[openai_api]\nenabled = true\npreapprove = ["bash"]\n'
BASH = '/tool bash {"command": "echo tool-$((40+2))"}'


def _events(body: str) -> list[Any]:
    """The SSE ``data:`` payloads of a streamed answer (``[DONE]`` kept as a string)."""
    out: list[Any] = []
    for block in body.split("\n\n"):
        if block.startswith("data: "):
            data = block.removeprefix("data: ")
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


async def test_tool_activity_streams_as_text_and_as_tool_calls_when_asked(
    boot: Callable[..., Runtime],
) -> None:
    async with boot(PREAPPROVE) as runtime:
        plane: Any = runtime.handle("lemon_control_plane")
        headers = {"authorization": f"Bearer {plane.local_token}"}
        body = {
            "model": "lemon",
            "stream": True,
            "x_lemon_tools": True,
            "messages": [{"role": "user", "content": BASH}],
        }
        async with httpx.AsyncClient(base_url=plane.url, timeout=60) as http:
            response = await http.post("/v1/chat/completions", json=body, headers=headers)
    assert response.status_code == 200
    events = _events(response.text)
    assert events[-1] == "[DONE]"
    deltas = [e["choices"][0]["delta"] for e in events[:-1] if e["choices"]]
    text = "".join(d.get("content") or "" for d in deltas)
    assert "[tool " in text
    calls = [c for d in deltas for c in d.get("tool_calls", [])]
    assert [c["function"]["name"] for c in calls] == ["bash"]
    assert calls[0]["index"] == 0
    assert json.loads(calls[0]["function"]["arguments"])["command"] == "echo tool-$((40+2))"


async def test_without_the_flag_tool_activity_is_only_text(boot: Callable[..., Runtime]) -> None:
    async with boot(PREAPPROVE) as runtime:
        plane: Any = runtime.handle("lemon_control_plane")
        async with openai.AsyncOpenAI(
            base_url=plane.url + "/v1", api_key=plane.local_token, max_retries=0
        ) as client:
            completion = await client.chat.completions.create(
                model="lemon", messages=[{"role": "user", "content": BASH}]
            )
            flagged = await client.chat.completions.create(
                model="lemon",
                messages=[{"role": "user", "content": BASH}],
                extra_body={"x_lemon_tools": True},
            )
    message = completion.choices[0].message
    assert message.content is not None
    assert "[tool " in message.content
    assert message.tool_calls is None
    assert flagged.choices[0].message.tool_calls is not None
    assert [c.function.name for c in flagged.choices[0].message.tool_calls] == ["bash"]


# The body shape Open WebUI sends to an OpenAI-compatible connection for a chat turn: its
# system prompt, the model's advanced params, ``stream_options`` for usage, and its user
# forwarded as an object (reconstructed from its payload code, not a packet capture).
OPEN_WEBUI_BODY: dict[str, Any] = {
    "stream": True,
    "model": "lemon",
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "/echo earlier question"},
        {"role": "assistant", "content": "earlier question"},
        {"role": "user", "content": [{"type": "text", "text": "/echo from open webui"}]},
    ],
    "stream_options": {"include_usage": True},
    "temperature": 0.7,
    "top_p": 0.9,
    "max_tokens": 1024,
    "seed": 42,
    "stop": ["<|im_end|>"],
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "user": {"name": "Ada", "id": "8c1f-ada", "email": "ada@example.com", "role": "user"},
}


async def test_an_open_webui_request_is_answered(boot: Callable[..., Runtime]) -> None:
    from lemon_core.sessions import SESSION_PORT

    async with boot() as runtime:
        plane: Any = runtime.handle("lemon_control_plane")
        port = runtime.context.capabilities.require(SESSION_PORT)
        headers = {"authorization": f"Bearer {plane.local_token}"}
        async with httpx.AsyncClient(base_url=plane.url, timeout=60) as http:
            response = await http.post(
                "/v1/chat/completions", json=OPEN_WEBUI_BODY, headers=headers
            )
        page = await port.transcript("openai:8c1f-ada", limit=10)
    prompts = [e.text for e in page.entries if e.role == "user"]
    assert len(prompts) == 1  # one run: the front end's history fenced into its prompt
    assert prompts[0].startswith(
        "<client_instructions>\nYou are a helpful assistant.\n</client_instructions>"
    )
    assert "user: /echo earlier question\nassistant: earlier question" in prompts[0]
    assert prompts[0].endswith("/echo from open webui")
    assert response.status_code == 200, response.text
    assert response.headers["x-lemon-session"] == "openai:8c1f-ada"
    events = _events(response.text)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text  # the offline model's answer to the fenced prompt below
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["total_tokens"] >= 0
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
