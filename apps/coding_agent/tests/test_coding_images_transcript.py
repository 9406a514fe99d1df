"""Images in a session: the transcript keeps references (never the bytes), and the context
estimate counts what an image costs the model."""

from __future__ import annotations

import base64
from pathlib import Path

from coding_agent import SessionStore, estimate_tokens
from lemon_ai import AssistantMessage, ToolCall, ToolResultMessage, UserMessage, decode_image

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


async def test_an_image_is_stored_as_a_reference_and_loads_as_one(tmp_path: Path) -> None:
    big = PNG + bytes(1024 * 1024)
    image = decode_image(base64.b64encode(big).decode())
    store = SessionStore(tmp_path)
    transcript = await store.create(cwd="/w", session_id="s1")
    await transcript.append(
        [UserMessage(content="look", images=(image,)), UserMessage(content="x")]
    )
    lines = store.path_of("s1").read_bytes().splitlines()
    assert max(len(line) for line in lines) < 1000  # a 1 MiB image costs a line ~200 bytes
    assert b'"images"' not in lines[-1]  # a message without images keeps its old shape
    _, (loaded, _plain) = await store.load("s1")
    assert isinstance(loaded, UserMessage)
    assert loaded.images == (image.reference(),)
    assert (loaded.images[0].size, loaded.images[0].sha256) == (len(big), image.sha256)


def test_an_image_counts_as_its_token_cost_not_its_base64_length() -> None:
    image = decode_image(base64.b64encode(PNG + bytes(1024 * 1024)).decode())
    plain = estimate_tokens([UserMessage(content="look")])
    with_image = estimate_tokens([UserMessage(content="look", images=(image,))])
    reference = estimate_tokens([UserMessage(content="look", images=(image.reference(),))])
    assert with_image - plain == 1600
    assert 0 < reference - plain < 100


async def test_a_tool_results_image_is_stored_as_a_reference_and_counted(tmp_path: Path) -> None:
    big = PNG + bytes(512 * 1024)
    image = decode_image(base64.b64encode(big).decode())
    call = ToolCall(id="c1", name="browser", arguments={"action": "screenshot"})
    shot = ToolResultMessage(tool_call_id="c1", tool_name="browser", content="a screenshot",
                             images=(image,))  # fmt: skip
    plain = ToolResultMessage(tool_call_id="c2", tool_name="read", content="text")
    store = SessionStore(tmp_path)
    transcript = await store.create(cwd="/w", session_id="s1")
    await transcript.append([
        UserMessage(content="look"),
        AssistantMessage(content=(call, ToolCall(id="c2", name="read")), stop_reason="tool_use"),
        shot, plain,
    ])  # fmt: skip
    lines = store.path_of("s1").read_bytes().splitlines()
    assert max(len(line) for line in lines) < 1000  # the bytes are never in the transcript
    assert b'"images"' not in lines[-1]  # a result without images keeps its old shape
    _, messages = await store.load("s1")
    loaded = messages[2]
    assert isinstance(loaded, ToolResultMessage)
    assert loaded.images == (image.reference(),)
    no_image = ToolResultMessage(tool_call_id="c1", tool_name="browser", content="a screenshot")
    assert estimate_tokens([shot]) - estimate_tokens([no_image]) == 1600
