"""A model-chosen grep pattern cannot stall the process: the search runs in a child process
with a deadline, so the event loop keeps ticking and a pathological pattern is an error."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from coding_agent import CodingLimits, Workspace, find_tool, grep_tool
from lemon_agent import AbortSignal, ToolContext, ToolError, ToolResult

# Exponential backtracking in Python's re: 26 a's held the interpreter lock for 8 s; 30 would
# take minutes.
PATHOLOGICAL = r"(a+)+$"
SUBJECT = "a" * 30 + "!\n"


async def _noop(text: str) -> None:
    return None


def _ctx(name: str, signal: AbortSignal | None = None, **args: Any) -> ToolContext:
    return ToolContext(tool_call_id="g1", name=name, arguments=args,
                       signal=signal or AbortSignal(), update=_noop)  # fmt: skip


async def _grep(workspace: Workspace, signal: AbortSignal | None = None, **args: Any) -> str:
    out = await grep_tool(workspace).execute(_ctx("grep", signal, **args))
    return out.content if isinstance(out, ToolResult) else out


def _searches_left() -> list[int]:
    """Children of this process that are still a grep search."""
    left = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and b"_grep_search" in cmdline:
            left.append(int(entry.name))
    return left


async def test_a_pathological_pattern_times_out_while_the_event_loop_keeps_ticking(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.txt").write_text(SUBJECT)
    workspace = Workspace(cwd=tmp_path, limits=CodingLimits(grep_timeout=0.5))
    gaps: list[float] = []
    stop = asyncio.Event()

    async def heartbeat() -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    beating = asyncio.create_task(heartbeat())
    started = time.monotonic()
    try:
        with pytest.raises(ToolError) as info:
            await _grep(workspace, pattern=PATHOLOGICAL)
    finally:
        stop.set()
        await beating
    took = time.monotonic() - started
    message = str(info.value)
    assert "timed out after 0.5 s" in message
    assert "Simplify the pattern" in message
    assert took < 3.0  # the deadline, plus starting and killing the child
    assert len(gaps) >= 10
    assert max(gaps) < 0.1  # the loop never waited on the search
    assert _searches_left() == []  # the search was killed and reaped


async def test_an_abort_stops_a_slow_search_at_once(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(SUBJECT)
    workspace = Workspace(cwd=tmp_path, limits=CodingLimits(grep_timeout=60.0))
    signal = AbortSignal()
    started = time.monotonic()
    searching = asyncio.create_task(_grep(workspace, signal, pattern=PATHOLOGICAL))
    signal.abort()
    with pytest.raises(ToolError, match="aborted"):
        await searching
    assert time.monotonic() - started < 5.0
    assert _searches_left() == []


async def test_cancelling_a_slow_search_kills_it(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(SUBJECT)
    workspace = Workspace(cwd=tmp_path, limits=CodingLimits(grep_timeout=60.0))
    searching = asyncio.create_task(_grep(workspace, pattern=PATHOLOGICAL))
    for _ in range(500):  # until the child exists: a handshake on /proc, not a fixed sleep
        if _searches_left():
            break
        await asyncio.sleep(0.01)
    assert _searches_left()
    searching.cancel()
    with pytest.raises(asyncio.CancelledError):
        await searching
    assert _searches_left() == []


async def test_searches_still_find_match_and_report_as_before(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("import os\nvalue = 1\nprint(value)\n")
    (tmp_path / "b.bin").write_bytes(b"value\0binary")
    (tmp_path / "notes.md").write_text("Value here\n")
    workspace = Workspace(cwd=tmp_path)
    assert await _grep(workspace, pattern=r"val\w+ =") == "src/app.py:2: value = 1"
    both = await _grep(workspace, pattern="value", ignore_case=True)
    assert both.splitlines() == ["notes.md:1: Value here", "src/app.py:2: value = 1",
                                 "src/app.py:3: print(value)"]  # fmt: skip
    assert await _grep(workspace, pattern="(", literal=True) == "src/app.py:3: print(value)"
    around = await _grep(workspace, pattern="^value", context_lines=1)
    assert around.splitlines() == ["src/app.py:1- import os", "src/app.py:2: value = 1",
                                   "src/app.py:3- print(value)", "--"]  # fmt: skip
    capped = await _grep(workspace, pattern="e", max_results=1)
    assert capped.endswith("[stopped after 1 matches; narrow the pattern or path]")
    assert (
        await _grep(workspace, pattern="nothing-like-this") == "no matches for 'nothing-like-this'"
    )
    with pytest.raises(ToolError, match="invalid regular expression '\\(': missing \\)"):
        await _grep(workspace, pattern="(")
    (tmp_path / "non-utf8.txt").write_bytes(b"caf\xe9 value\n")
    assert "non-utf8.txt:1: caf\ufffd value" in await _grep(workspace, pattern="caf")


async def test_a_glob_cannot_backtrack(tmp_path: Path) -> None:
    """fnmatch's translation of ``*`` never backtracks (Python >= 3.9), so find's pattern and
    grep's glob need no deadline: a glob that would be exponential as a naive regex is instant."""
    (tmp_path / ("a" * 200)).write_text("x\n")
    workspace = Workspace(cwd=tmp_path)
    glob = "*a" * 40 + "*b"
    started = time.monotonic()
    out = await find_tool(workspace).execute(_ctx("find", pattern=glob))
    assert "no files match" in str(out)
    assert "no matches" in await _grep(workspace, pattern="x", glob=glob)
    assert time.monotonic() - started < 1.0
