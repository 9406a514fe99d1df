"""JSONL session transcripts: round trip, append-only durability, corruption, bounds; the prompt."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coding_agent import (
    CorruptTranscriptError,
    PromptLimits,
    SessionNotFoundError,
    SessionStore,
    build_system_prompt,
    project_instruction_files,
)
from lemon_ai import (
    AssistantMessage,
    Cost,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

_text = st.text(max_size=40)
_json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)
_call = st.builds(
    ToolCall,
    id=st.text(alphabet="abc123", min_size=1, max_size=6),
    name=st.sampled_from(["read", "bash", "edit"]),
    arguments=st.dictionaries(_text, _json_value, max_size=3),
    raw_arguments=_text,
    parse_error=st.none() | _text,
)
_assistant = st.builds(
    AssistantMessage,
    content=st.lists(
        st.builds(TextContent, text=_text)
        | st.builds(ThinkingContent, thinking=_text, signature=_text),
        max_size=3,
    ).map(tuple),
    stop_reason=st.sampled_from(["stop", "length", "error", "aborted"]),
    usage=st.builds(Usage, input_tokens=st.integers(0, 10**6), output_tokens=st.integers(0, 999)),
    cost=st.builds(Cost, input=st.floats(0, 10), output=st.floats(0, 10)),
    model=_text,
    error_message=st.none() | _text,
)
_image_ref = st.builds(
    ImageContent,
    mime_type=st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp"]),
    size=st.integers(0, 4 * 1024 * 1024),
    sha256=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
)
_messages = st.lists(
    st.builds(UserMessage, content=_text, images=st.lists(_image_ref, max_size=2).map(tuple))
    | _assistant
    | st.builds(
        ToolResultMessage,
        tool_call_id=_text,
        tool_name=_text,
        content=_text,
        is_error=st.booleans(),
    ),
    max_size=6,
)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_messages, st.lists(_call, max_size=2))
def test_messages_round_trip_through_the_transcript(
    messages: list[Message], calls: list[ToolCall]
) -> None:
    # Tool calls, each answered, so the loaded conversation needs no repair.
    full: list[Message] = list(messages)
    if calls:
        unique = {c.id: c for c in calls}.values()
        full.append(AssistantMessage(content=tuple(unique), stop_reason="tool_use"))
        full += [ToolResultMessage(tool_call_id=c.id, tool_name=c.name, content="ok")
                 for c in unique]  # fmt: skip

    async def scenario(directory: Path) -> list[Message]:
        store = SessionStore(directory)
        transcript = await store.create(cwd="/w", session_id="s1")
        half = len(full) // 2
        await transcript.append(full[:half])
        await transcript.append(full[half:])
        _, loaded = await store.load("s1")
        return loaded

    with tempfile.TemporaryDirectory() as tmp:
        assert asyncio.run(scenario(Path(tmp))) == full


async def test_entries_chain_and_appends_are_whole_lines(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    transcript = await store.create(cwd="/w")
    await transcript.append([UserMessage(content="a"), UserMessage(content="b")])
    reopened, messages = await store.load(transcript.session_id)
    assert messages == [UserMessage(content="a"), UserMessage(content="b")]
    await reopened.append([UserMessage(content="c")])
    raw = transcript.path.read_text()
    assert raw.endswith("\n")
    lines = [json.loads(line) for line in raw.splitlines()]
    assert lines[0] == {"type": "session", "version": 1, "id": transcript.session_id,
                        "timestamp": lines[0]["timestamp"], "cwd": "/w"}  # fmt: skip
    assert [x["parent_id"] for x in lines[1:]] == [None, lines[1]["id"], lines[2]["id"]]
    assert all(len(x["id"]) == 8 for x in lines[1:])


async def test_unanswered_tool_calls_are_closed_on_load(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    transcript = await store.create(cwd="/w", session_id="s1")
    call = ToolCall(id="c1", name="bash", arguments={"command": "sleep 9"})
    other = ToolCall(id="c2", name="read", arguments={"path": "x"})
    await transcript.append([
        UserMessage(content="go"),
        AssistantMessage(content=(call, other), stop_reason="tool_use"),
        ToolResultMessage(tool_call_id="c2", tool_name="read", content="x"),
    ])  # fmt: skip
    _, messages = await store.load("s1")
    assert len(messages) == 4
    closing = messages[3]
    assert isinstance(closing, ToolResultMessage)
    assert (closing.tool_call_id, closing.is_error) == ("c1", True)


@pytest.mark.parametrize(
    ("content", "line", "why"),
    [
        (b"", 1, "empty"),
        (b'{"type":"session","version":1,"id":"s1","timestamp":1}', 1, "incomplete"),
        (b'{"type":"session","version":9,"id":"s1","timestamp":1}\n', 1, "version 9"),
        (b'{"type":"session","version":1,"id":"other","timestamp":1}\n', 1, "'other'"),
        (b"not json\n", 1, "bad session header"),
        (b'{"type":"session","version":1,"id":"s1","timestamp":1}\n{"type":"message"}\n', 2,
         "missing required field"),
        (b'{"type":"session","version":1,"id":"s1","timestamp":1}\n'
         b'{"type":"message","id":"a","parent_id":null,"timestamp":1,'
         b'"message":{"role":"robot","content":"x"}}\n', 2, "robot"),
    ],
)  # fmt: skip
async def test_corrupt_transcripts_name_the_line(
    tmp_path: Path, content: bytes, line: int, why: str
) -> None:
    store = SessionStore(tmp_path)
    (tmp_path / "s1.jsonl").write_bytes(content)
    with pytest.raises(CorruptTranscriptError, match=f"line {line}") as info:
        await store.load("s1")
    assert why in str(info.value)
    assert (tmp_path / "s1.jsonl").read_bytes() == content


async def test_missing_oversized_and_invalid_sessions_are_refused(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, max_transcript_bytes=200)
    with pytest.raises(SessionNotFoundError, match="no transcript"):
        await store.load("nope")
    with pytest.raises(SessionNotFoundError, match="not valid"):
        await store.load("../etc/passwd")
    transcript = await store.create(cwd="/w", session_id="big")
    await transcript.append([UserMessage(content="x" * 300)])
    with pytest.raises(CorruptTranscriptError, match="200-byte bound"):
        await store.load("big")


def test_project_instructions_are_walked_up_outermost_first(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("outer rules")
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    (tmp_path / "a" / "CLAUDE.md").write_text("middle rules")
    (inner / "AGENTS.md").write_text("inner rules")
    files = project_instruction_files(inner)
    assert files[-3:] == [tmp_path / "AGENTS.md", tmp_path / "a" / "CLAUDE.md",
                          inner / "AGENTS.md"]  # fmt: skip
    home = tmp_path / "home"
    (home / "agent" / "workspace").mkdir(parents=True)
    (home / "agent" / "workspace" / "SOUL.md").write_text("be kind")
    (home / "agent" / "workspace" / "AGENTS.md").write_text("assistant agents")
    (home / "agent" / "workspace" / "zz.md").write_text("extra")
    prompt = build_system_prompt(cwd=inner, home=home, tool_names=["read", "bash"])
    order = [prompt.index(t) for t in ("assistant agents", "be kind", "extra", "Tools: read, bash",
                                       "outer rules", "middle rules", "inner rules")]  # fmt: skip
    assert order == sorted(order)


def test_the_prompt_is_bounded(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("a" * 5000)
    (tmp_path / "CLAUDE.md").write_text("b" * 5000)
    prompt = build_system_prompt(
        cwd=tmp_path,
        home=tmp_path / "home",
        limits=PromptLimits(max_file_chars=1000, max_total_chars=1500),
    )
    assert "AGENTS.md truncated:" in prompt
    assert "left out (prompt bound)" in prompt
    assert "b" * 100 not in prompt
    assert len(prompt) < 1800
