"""Transcripts torn by a crash mid-append: every complete record is kept, the torn bytes go to
a side file, the notice says so, and the session goes on."""

from __future__ import annotations

import asyncio
import fcntl
import os
from pathlib import Path

import pytest

from coding_agent import CorruptTranscriptError, SessionStore
from lemon_ai import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage


async def _session(tmp_path: Path) -> tuple[SessionStore, Path, list[bytes]]:
    store = SessionStore(tmp_path)
    transcript = await store.create(cwd="/w", session_id="s1")
    await transcript.append([
        UserMessage(content="list the files"),
        AssistantMessage(content=(ToolCall(id="c1", name="ls", arguments={}),),
                         stop_reason="tool_use"),
        ToolResultMessage(tool_call_id="c1", tool_name="ls", content="a.py"),
        AssistantMessage(content=(TextContent(text="There is a.py."),)),
        UserMessage(content="thanks"),
    ])  # fmt: skip
    lines = transcript.path.read_bytes().split(b"\n")[:-1]
    assert len(lines) == 6
    return store, transcript.path, lines


async def test_a_torn_last_line_keeps_every_complete_record(tmp_path: Path) -> None:
    store, path, lines = await _session(tmp_path)
    torn = lines[5][: len(lines[5]) // 2]  # the append of line 6 was cut in the middle
    path.write_bytes(b"\n".join(lines[:5]) + b"\n" + torn)
    transcript, messages = await store.load("s1")
    assert [type(m).__name__ for m in messages] == [
        "UserMessage", "AssistantMessage", "ToolResultMessage", "AssistantMessage"]  # fmt: skip
    assert transcript.entries == 4
    notice = transcript.notice
    assert notice is not None
    assert "Session s1 was recovered: its last line was cut short" in notice
    assert "All 4 complete messages were kept" in notice
    assert f"({len(torn)} bytes, line(s) 6) was moved to {path}.torn" in notice
    assert (tmp_path / "s1.jsonl.torn").read_bytes() == torn + b"\n"
    assert path.read_bytes() == b"\n".join(lines[:5]) + b"\n"
    # Appending continues the chain on a clean file; a later load reports nothing.
    await transcript.append([UserMessage(content="again")])
    again, resumed = await store.load("s1")
    assert again.notice is None
    assert resumed[-1] == UserMessage(content="again")
    assert len(resumed) == 5


async def test_a_torn_line_in_the_middle_is_quarantined_and_its_orphans_left_out(
    tmp_path: Path,
) -> None:
    store, path, lines = await _session(tmp_path)
    # Line 3 (the assistant's tool call) torn, later lines written after it.
    damaged = [lines[0], lines[1], lines[2][:40], lines[3], lines[4], lines[5]]
    path.write_bytes(b"\n".join(damaged) + b"\n")
    transcript, messages = await store.load("s1")
    assert messages == [
        UserMessage(content="list the files"),
        AssistantMessage(content=(TextContent(text="There is a.py."),)),
        UserMessage(content="thanks"),
    ]
    assert transcript.notice is not None
    assert "line(s) 3 were cut short" in transcript.notice
    assert "1 tool result(s) whose call was in the damaged part were left out" in (
        transcript.notice)  # fmt: skip
    assert (tmp_path / "s1.jsonl.torn").read_bytes() == lines[2][:40] + b"\n"
    # The tool result stays on disk; only the unreadable fragment left the transcript.
    assert path.read_bytes() == b"\n".join([*lines[:2], *lines[3:]]) + b"\n"


async def test_a_record_glued_to_a_torn_fragment_is_kept(tmp_path: Path) -> None:
    store, path, lines = await _session(tmp_path)
    fragment = lines[5][:30]
    glued = [*lines[:5], fragment + lines[5]]  # the next append landed after the torn bytes
    path.write_bytes(b"\n".join(glued) + b"\n")
    transcript, messages = await store.load("s1")
    assert messages[-1] == UserMessage(content="thanks")
    assert len(messages) == 5
    assert (tmp_path / "s1.jsonl.torn").read_bytes() == fragment + b"\n"
    assert path.read_bytes() == b"\n".join(lines) + b"\n"
    assert transcript.notice is not None


async def test_a_complete_last_record_without_its_newline_is_kept_silently(
    tmp_path: Path,
) -> None:
    store, path, lines = await _session(tmp_path)
    path.write_bytes(b"\n".join(lines))
    transcript, messages = await store.load("s1")
    assert len(messages) == 5
    assert transcript.notice is None
    assert path.read_bytes() == b"\n".join(lines) + b"\n"
    assert not (tmp_path / "s1.jsonl.torn").exists()


async def test_quarantines_accumulate_and_valid_json_damage_still_fails(tmp_path: Path) -> None:
    store, path, _ = await _session(tmp_path)
    path.write_bytes(path.read_bytes() + b'{"type":"mess')
    await store.load("s1")
    path.write_bytes(path.read_bytes() + b'{"type":"message","id":"x",')
    await store.load("s1")
    assert (tmp_path / "s1.jsonl.torn").read_bytes() == (
        b'{"type":"mess\n{"type":"message","id":"x",\n')  # fmt: skip
    # JSON that is not a record is damage, not a torn write: refused, the file untouched.
    before = path.read_bytes() + b'{"type":"message","id":"x"}\n'
    path.write_bytes(before)
    with pytest.raises(CorruptTranscriptError, match="line 7"):
        await store.load("s1")
    assert path.read_bytes() == before


def _waiting_for_lock(path: Path) -> bool:
    """Whether some process waits for an flock on ``path`` (``/proc/locks``, ``->`` rows)."""
    inode = f":{path.stat().st_ino}"
    with open("/proc/locks") as locks:
        rows = [row.split() for row in locks]
    # A waiter's row: "1: -> FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode> 0 EOF".
    return any(len(r) > 6 and r[1] == "->" and r[6].endswith(inode) for r in rows)


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs /proc/locks (Linux)")
async def test_a_repair_waits_for_an_append_in_flight(tmp_path: Path) -> None:
    store, path, lines = await _session(tmp_path)
    path.write_bytes(b"\n".join(lines[:5]) + b"\n")
    # An append in flight: it holds the lock and has written half of its line so far.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, lines[5][:20])
        loading = asyncio.ensure_future(store.load("s1"))
        for _ in range(2000):  # the loader saw the cut line and now waits for the lock
            if _waiting_for_lock(path):
                break
            await asyncio.sleep(0.005)
        else:
            raise AssertionError("the load never waited for the lock")
        assert not loading.done()
        os.write(fd, lines[5][20:] + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)  # releases the lock
    transcript, messages = await asyncio.wait_for(loading, 30)
    assert transcript.notice is None, "a finished append is not a torn line"
    assert messages[-1] == UserMessage(content="thanks")
    assert not (tmp_path / "s1.jsonl.torn").exists()
    assert path.read_bytes() == b"\n".join(lines) + b"\n"
