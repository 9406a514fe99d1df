"""Images: checking attachments, and what each wire encodes for a user message with images."""

from __future__ import annotations

import base64
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lemon_ai import (
    AnthropicMessagesProvider,
    AssistantMessage,
    Context,
    ImageContent,
    ImageLimits,
    InvalidImageError,
    OfflineProvider,
    OpenAICompletionsProvider,
    StreamOptions,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    check_images,
    complete,
    decode_image,
    default_catalogue,
    offline_model,
    tool_result_turn,
    user_turn,
)

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
HEADERS = {
    "image/png": b"\x89PNG\r\n\x1a\n",
    "image/jpeg": b"\xff\xd8\xff\xe0",
    "image/gif": b"GIF89a",
    "image/webp": b"RIFF\x00\x00\x00\x00WEBPVP8 ",
}


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@given(kind=st.sampled_from(sorted(HEADERS)), tail=st.binary(max_size=512))
def test_every_supported_kind_decodes_to_its_type_size_and_hash(kind: str, tail: bytes) -> None:
    raw = HEADERS[kind] + tail
    image = decode_image(_b64(raw), kind)
    assert (image.mime_type, image.size, image.sha256) == (
        kind, len(raw), hashlib.sha256(raw).hexdigest()
    )  # fmt: skip
    assert base64.b64decode(image.data) == raw
    ref = image.reference()
    assert not ref.available
    assert (ref.size, ref.sha256) == (image.size, image.sha256)


def test_a_mislabelled_image_is_sent_as_what_its_bytes_are() -> None:
    assert decode_image(_b64(PNG), "image/jpeg").mime_type == "image/png"
    assert decode_image(_b64(PNG), None).mime_type == "image/png"
    assert decode_image("data:image/png;base64," + _b64(PNG)).mime_type == "image/png"


@pytest.mark.parametrize(
    ("data", "mime", "words"),
    [
        (_b64(PNG), "image/tiff", "media type 'image/tiff'"),
        (_b64(PNG), "application/pdf", "PNG, JPEG, GIF or WebP"),
        ("%%%not base64%%%", "image/png", "not valid base64"),
        (_b64(b"hello there"), "image/png", "not a PNG, JPEG, GIF or WebP image"),
        ("data:image/png," + _b64(PNG), None, "not base64-encoded"),
    ],
)
def test_bad_attachments_are_explained(data: str, mime: str | None, words: str) -> None:
    with pytest.raises(InvalidImageError, match=words):
        decode_image(data, mime)


def test_an_oversized_image_is_refused_before_and_after_decoding() -> None:
    limits = ImageLimits(max_image_bytes=1000)
    big = _b64(PNG[:16] + bytes(2000))
    with pytest.raises(InvalidImageError, match=r"more than the 0\.00 MiB"):
        decode_image(big, "image/png", limits=limits)
    exact = PNG[:16] + bytes(1000 - 16)
    assert decode_image(_b64(exact), limits=limits).size == 1000
    with pytest.raises(InvalidImageError, match="smaller"):
        decode_image(_b64(exact + b"x"), limits=limits)


def test_a_message_is_bounded_in_images_and_bytes() -> None:
    one = decode_image(_b64(PNG))
    check_images((one,) * 8)
    with pytest.raises(InvalidImageError, match="at most 8"):
        check_images((one,) * 9)
    with pytest.raises(InvalidImageError, match="total"):
        check_images((one,) * 3, ImageLimits(max_total_bytes=2 * one.size))


def _context(*images: ImageContent, text: str = "what is this?") -> Context:
    return Context(messages=(UserMessage(content=text, images=images),))


def test_openai_sends_text_and_data_url_parts() -> None:
    image = decode_image(_b64(PNG))
    model = default_catalogue().resolve("openai:gpt-4o-mini")
    _, _, body = OpenAICompletionsProvider().build_request(model, _context(image), StreamOptions())
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image.data}"}},
    ]}]  # fmt: skip
    _, _, plain = OpenAICompletionsProvider().build_request(model, _context(), StreamOptions())
    assert plain["messages"] == [{"role": "user", "content": "what is this?"}]


def test_anthropic_sends_base64_image_blocks_before_the_text() -> None:
    image = decode_image(_b64(PNG))
    model = default_catalogue().resolve("anthropic:claude-sonnet-4-20250514")
    provider = AnthropicMessagesProvider()
    _, _, body = provider.build_request(model, _context(image), StreamOptions())
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "image",
         "source": {"type": "base64", "media_type": "image/png", "data": image.data}},
        {"type": "text", "text": "what is this?"},
    ]}]  # fmt: skip
    # an image alone: no empty text block (the API rejects one)
    _, _, alone = provider.build_request(model, _context(image, text=""), StreamOptions())
    assert [b["type"] for b in alone["messages"][0]["content"]] == ["image"]


@pytest.mark.parametrize("ref", ["openai:o3-mini", "anthropic:claude-3-5-haiku-20241022"])
def test_a_model_without_image_input_gets_a_note_in_place_of_the_image(ref: str) -> None:
    image = decode_image(_b64(PNG))
    model = default_catalogue().resolve(ref)
    assert model.image_input is False
    text, sent = user_turn(UserMessage(content="look", images=(image,)), model)
    assert sent == ()
    assert text.startswith("look\n\n[The user attached an image (image/png, 0.1 KiB)")
    assert f"this model ({ref}) does not accept image input" in text
    provider = (
        OpenAICompletionsProvider() if model.api == "openai_completions"
        else AnthropicMessagesProvider()
    )  # fmt: skip
    _, _, body = provider.build_request(model, _context(image), StreamOptions())
    assert image.data not in str(body)
    assert "does not accept image input" in str(body)


def test_a_referenced_image_is_described_not_sent() -> None:
    image = decode_image(_b64(PNG)).reference()
    model = default_catalogue().resolve("openai:gpt-4o")
    text, sent = user_turn(UserMessage(content="earlier", images=(image,)), model)
    assert sent == ()
    assert "not kept in the session" in text


def test_unknown_models_are_sent_images_and_the_catalogue_knows_the_hosted_ones() -> None:
    catalogue = default_catalogue()
    assert catalogue.resolve("ollama:llava").image_input is None
    assert catalogue.resolve("openai:gpt-4o").image_input is True
    assert catalogue.resolve("anthropic:claude-sonnet-4-20250514").image_input is True
    assert offline_model().image_input is False
    image = decode_image(_b64(PNG))
    _, sent = user_turn(UserMessage(content="", images=(image,)), catalogue.resolve("ollama:x"))
    assert sent == (image,)


async def test_the_offline_model_says_it_cannot_look_at_images() -> None:
    image = decode_image(_b64(PNG))
    message = await complete(OfflineProvider(), offline_model(), _context(image, text=""))
    assert "1 image" in message.text
    assert "offline" in message.text.lower()


def _tool_context(*images: ImageContent) -> Context:
    call = ToolCall(id="c1", name="browser", arguments={"action": "screenshot"})
    return Context(messages=(
        UserMessage(content="look at the page"),
        AssistantMessage(content=(call,), stop_reason="tool_use"),
        ToolResultMessage(tool_call_id="c1", tool_name="browser", content="screenshot of x",
                          images=images),
        UserMessage(content="and now?"),
    ))  # fmt: skip


def test_anthropic_sends_a_tool_results_image_inside_its_tool_result_block() -> None:
    image = decode_image(_b64(PNG))
    model = default_catalogue().resolve("anthropic:claude-sonnet-4-20250514")
    _, _, body = AnthropicMessagesProvider().build_request(
        model, _tool_context(image), StreamOptions()
    )
    result = body["messages"][2]["content"][0]
    assert result["type"] == "tool_result"
    assert result["content"] == [
        {"type": "text", "text": "screenshot of x"},
        {"type": "image",
         "source": {"type": "base64", "media_type": "image/png", "data": image.data}},
    ]  # fmt: skip
    _, _, plain = AnthropicMessagesProvider().build_request(model, _tool_context(), StreamOptions())
    assert plain["messages"][2]["content"][0]["content"] == "screenshot of x"


def test_openai_sends_a_tool_results_image_as_a_user_message_after_the_tool_messages() -> None:
    image = decode_image(_b64(PNG))
    model = default_catalogue().resolve("openai:gpt-4o-mini")
    _, _, body = OpenAICompletionsProvider().build_request(
        model, _tool_context(image), StreamOptions()
    )
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "tool", "user", "user"]
    tool, images = body["messages"][2], body["messages"][3]
    assert tool["content"].startswith("screenshot of x\n[1 image(s) of this result follow")
    assert images["content"] == [
        {"type": "text", "text": "The image(s) returned by the browser call c1:"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image.data}"}},
    ]
    assert body["messages"][4] == {"role": "user", "content": "and now?"}


def test_a_tool_image_is_a_note_for_a_blind_model_or_once_kept_as_a_reference() -> None:
    image = decode_image(_b64(PNG))
    blind = default_catalogue().resolve("openai:o3-mini")
    message = ToolResultMessage(tool_call_id="c1", tool_name="browser", content="shot",
                                images=(image,))  # fmt: skip
    text, sent = tool_result_turn(message, blind)
    assert sent == ()
    assert "The tool returned an image (image/png" in text
    _, _, body = OpenAICompletionsProvider().build_request(
        blind, _tool_context(image), StreamOptions()
    )
    assert image.data not in str(body)
    seeing = default_catalogue().resolve("openai:gpt-4o")
    kept = ToolResultMessage(tool_call_id="c1", tool_name="browser", content="shot",
                             images=(image.reference(),))  # fmt: skip
    text, sent = tool_result_turn(kept, seeing)
    assert sent == ()
    assert "not kept in the session" in text
