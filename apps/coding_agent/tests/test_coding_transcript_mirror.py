"""Transcripts mirrored into a shared store: a daemon with its own directory reads and resumes
what another daemon wrote, with nothing shared but the store."""

from __future__ import annotations

from pathlib import Path

from coding_agent.session import SessionStore
from coding_agent.transcript_mirror import TABLE, TranscriptMirror
from lemon_ai import AssistantMessage, TextContent, UserMessage
from lemon_infra import MemoryStore


def answer(text: str) -> AssistantMessage:
    return AssistantMessage(content=(TextContent(text=text),), stop_reason="stop")


async def test_a_second_daemon_reads_and_continues_a_transcript_through_the_store(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    a = SessionStore(tmp_path / "a", mirror=TranscriptMirror(store))
    b = SessionStore(tmp_path / "b", mirror=TranscriptMirror(store))
    written = await a.create(cwd="/w")
    await written.append([UserMessage(content="hi"), answer("hello")])
    assert not (tmp_path / "b").exists()  # nothing shared on disk
    resumed, messages = await b.load(written.session_id)
    assert [type(m).__name__ for m in messages] == ["UserMessage", "AssistantMessage"]
    assert messages[0] == UserMessage(content="hi")
    await resumed.append([UserMessage(content="again"), answer("and again")])
    # A reads B's turn (its stale local file is brought up to the store).
    _, on_a, stamps = await a.load_timed(written.session_id)
    assert [getattr(m, "content", None) for m in on_a][::2] == ["hi", "again"]
    assert len(stamps) == 4
    assert (tmp_path / "a" / f"{written.session_id}.jsonl").read_bytes() == (
        tmp_path / "b" / f"{written.session_id}.jsonl"
    ).read_bytes()
    assert len(await store.scan(TABLE)) == 3  # header, A's write, B's write
