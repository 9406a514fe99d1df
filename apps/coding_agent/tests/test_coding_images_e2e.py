"""Images attached to a run request reach the model, through the booted runtime: the session
port, the router, the gateway and the coding executor, to the scripted provider server (real
HTTP) speaking each wire. The transcript keeps a reference, not the bytes."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lemon_core.config import load_config
from lemon_core.events import ActionKind, ErrorCode
from lemon_core.execution import ALL_TOOLS, RunRequest, ToolPolicy
from lemon_core.sessions import SESSION_PORT, RunEnded, SessionEvent, SessionPort, ToolCard
from lemon_platform_test.providers import ScriptedProviderServer, ScriptedToolCall, ScriptedTurn
from lemon_runtime import Runtime

SESSION = "agent:default:main"
# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
PNG_B64 = base64.b64encode(PNG).decode()


def _boot(tmp_path: Path, provider: str, kind: str, base_url: str) -> Runtime:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        f'[providers.{provider}]\nkind = "{kind}"\nbase_url = "{base_url}"\n'
    )
    loaded = load_config(home=home, cwd=tmp_path, environ={})
    return Runtime(profile="full", config=loaded)


async def _run(port: SessionPort, request: RunRequest) -> tuple[RunEnded, list[SessionEvent]]:
    stream = port.watch(request.session_key)
    seen: list[SessionEvent] = []
    try:
        receipt = await port.submit(request)
        async for event in stream:
            seen.append(event)
            if isinstance(event, RunEnded) and event.run_id == receipt.run_id:
                return event, seen
    finally:
        stream.close()
    raise AssertionError("the stream ended before the run did")


def _request(
    cwd: Path, model: str, images: tuple[dict[str, Any], ...], prompt: str = "what is this?"
) -> RunRequest:
    return RunRequest(
        origin="test",
        session_key=SESSION,
        prompt=prompt,
        model=model,
        images=images,
        cwd=str(cwd),
        tool_policy=ToolPolicy(),
        preapproved=frozenset({ALL_TOOLS}),
    )


def _image(data: str = PNG_B64, mime_type: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "data": data, "mime_type": mime_type}


def _openai_image(body: dict[str, Any]) -> list[dict[str, Any]]:
    (user,) = [m for m in body["messages"] if m["role"] == "user"][-1:]
    assert isinstance(user["content"], list), user
    return list(user["content"])


def _anthropic_image(body: dict[str, Any]) -> list[dict[str, Any]]:
    return list(body["messages"][-1]["content"])


WIRES: dict[str, tuple[Callable[[ScriptedProviderServer], str], Callable[..., Any], Any]] = {
    "openai_completions": (
        lambda s: s.openai_base_url,
        _openai_image,
        [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
        ],
    ),
    "anthropic_messages": (
        lambda s: s.url,
        _anthropic_image,
        [
            {"type": "image",
             "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
            {"type": "text", "text": "what is this?"},
        ],
    ),
}  # fmt: skip


@pytest.mark.parametrize("wire", sorted(WIRES))
async def test_an_image_reaches_the_model_on_each_wire_and_the_transcript_keeps_a_reference(
    tmp_path: Path, scripted_provider: ScriptedProviderServer, wire: str
) -> None:
    base_url, parts_of, expected = WIRES[wire]
    scripted_provider.script(ScriptedTurn(text="a red dot"), ScriptedTurn(text="still a dot"))
    async with _boot(tmp_path, "scripted", wire, base_url(scripted_provider)) as runtime:
        port = runtime.context.capabilities.require(SESSION_PORT)
        first, _ = await _run(port, _request(tmp_path, "scripted:vision", (_image(),)))
        assert first.ok, first.error
        assert first.answer == "a red dot"
        again, _ = await _run(port, _request(tmp_path, "scripted:vision", (), "and now?"))
        assert again.ok, again.error
        page = await port.transcript(SESSION)
        assert page.entries[0].text == f"what is this?\n[image: image/png, {len(PNG)} bytes]"
    assert parts_of(scripted_provider.requests[0].body) == expected
    (transcript,) = (tmp_path / "home" / "agent" / "sessions").glob("*.jsonl")
    text = transcript.read_text()
    assert PNG_B64 not in text  # a reference, not megabytes of base64 per line
    assert hashlib.sha256(PNG).hexdigest() in text
    # The resumed session tells the model an image was there (the bytes are not kept).
    history = json.dumps(scripted_provider.requests[1].body)
    assert PNG_B64 not in history
    assert "image/png" in history
    assert "not kept" in history


async def test_a_model_without_image_input_gets_a_note_instead_of_the_image(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    scripted_provider.script(ScriptedTurn(text="I cannot see it"))
    # o3-mini takes no image input (the catalogue says so); reach it at the scripted server.
    url = scripted_provider.openai_base_url
    async with _boot(tmp_path, "openai", "openai_completions", url) as runtime:
        port = runtime.context.capabilities.require(SESSION_PORT)
        ended, seen = await _run(port, _request(tmp_path, "openai:o3-mini", (_image(),)))
    assert ended.ok, ended.error
    body = json.dumps(scripted_provider.requests[0].body)
    assert PNG_B64 not in body
    assert "image_url" not in body
    assert "does not accept image input" in body
    notes = [e for e in seen if isinstance(e, ToolCard) and e.kind == ActionKind.NOTE]
    assert any("openai:o3-mini" in n.title and "image" in n.title for n in notes), notes


@pytest.mark.parametrize(
    ("image", "words"),
    [
        (_image(mime_type="image/tiff"), ["image/tiff", "PNG, JPEG, GIF or WebP"]),
        (_image(data="not base64!"), ["base64"]),
        (_image(data=base64.b64encode(b"plain text, no image").decode()), ["not a PNG"]),
        (
            _image(data=base64.b64encode(PNG[:16] + bytes(4 * 1024 * 1024)).decode()),
            ["MiB", "smaller"],
        ),
    ],
    ids=["media-type", "not-base64", "not-an-image", "too-large"],
)
async def test_a_bad_image_fails_the_run_clearly_before_any_model_call(
    tmp_path: Path, scripted_provider: ScriptedProviderServer, image: dict[str, Any],
    words: list[str],
) -> None:  # fmt: skip
    url = scripted_provider.openai_base_url
    async with _boot(tmp_path, "scripted", "openai_completions", url) as runtime:
        port = runtime.context.capabilities.require(SESSION_PORT)
        ended, _ = await _run(port, _request(tmp_path, "scripted:vision", (image,)))
    assert not ended.ok
    assert ended.error_code == ErrorCode.BAD_REQUEST
    assert ended.error is not None
    for word in words:
        assert word in ended.error
    assert scripted_provider.requests == []


async def test_every_model_call_of_the_run_sees_the_image_and_errors_name_which_image(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    (tmp_path / "notes.txt").write_text("a dot\n")
    scripted_provider.script(
        ScriptedTurn(tool_calls=(ScriptedToolCall(name="read", arguments={"path": "notes.txt"}),)),
        ScriptedTurn(text="it is the dot from notes.txt"),
    )
    url = scripted_provider.openai_base_url
    async with _boot(tmp_path, "scripted", "openai_completions", url) as runtime:
        port = runtime.context.capabilities.require(SESSION_PORT)
        ended, _ = await _run(port, _request(tmp_path, "scripted:vision", (_image(),)))
        assert ended.ok, ended.error
        bad, _ = await _run(
            port, _request(tmp_path, "scripted:vision", (_image(), _image(mime_type="image/bmp")))
        )
    first, second = (json.dumps(r.body) for r in scripted_provider.requests)
    assert PNG_B64 in first
    assert PNG_B64 in second  # the tool turn's request still carries it
    assert "a dot" in second
    assert not bad.ok
    assert bad.error is not None
    assert "image 2 has media type 'image/bmp'" in bad.error
