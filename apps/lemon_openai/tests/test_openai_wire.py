"""How a request's messages become one run's prompt, and the field errors of bad bodies."""

from __future__ import annotations

import pytest

from lemon_openai import ApiError
from lemon_openai._wire import parse_chat, render_prompt

PNG = "data:image/png;base64,iVBORw0KGgo="


def test_a_new_session_fences_the_history_and_the_instructions() -> None:
    chat = parse_chat(
        {
            "model": "lemon:openai:gpt-4o",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
                {"role": "tool", "content": "42"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "and now?"},
                        {"type": "image_url", "image_url": {"url": PNG}},
                    ],
                },
            ],
        }
    )
    assert chat.model == "openai:gpt-4o"
    prompt, images = render_prompt(chat.messages, continuing=False)
    assert prompt.startswith("<client_instructions>\nbe brief\n</client_instructions>")
    assert "<conversation_so_far>\nuser: hi\nassistant: hello\n</conversation_so_far>" in prompt
    assert "<tool_result>\n42\n</tool_result>" in prompt
    assert prompt.endswith("and now?")
    assert images == ({"type": "image", "data": "iVBORw0KGgo=", "mime_type": "image/png"},)


def test_a_continuing_session_gets_only_the_new_turn() -> None:
    chat = parse_chat(
        {
            "model": "lemon",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "again"},
            ],
        }
    )
    assert chat.model is None
    assert render_prompt(chat.messages, continuing=True) == ("again", ())


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "lemon", "messages": []}, "messages"),
        ({"model": "lemon", "messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
        (
            {
                "model": "lemon",
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}],
                    }
                ],
            },
            "messages[0].content[0].image_url.url",
        ),
        (
            {"model": "lemon", "messages": [{"role": "user", "content": "x"}], "stream": "yes"},
            "stream",
        ),
        (
            {
                "model": "lemon",
                "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "function"}],
            },
            "tools",
        ),
        ({"model": "lemon", "messages": [{"role": "user", "content": "x"}], "user": ""}, "user"),
    ],
)
def test_a_bad_body_names_the_field(body: dict[str, object], param: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_chat(body)
    assert caught.value.status == 400
    assert caught.value.param == param
