"""The read pager: the continuation offset is always the first line not shown."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from coding_agent import CodingLimits, Workspace, read_tool
from lemon_agent import AbortSignal, ToolContext, ToolResult

_HINT = re.compile(r"\n\[showing lines (\d+)-(\d+) of (\d+)[^\]]*; continue with offset=(\d+)\]$")


async def _noop(text: str) -> None:
    return None


async def read(workspace: Workspace, **args: Any) -> str:
    ctx = ToolContext(tool_call_id="t1", name="read", arguments=args, signal=AbortSignal(),
                      update=_noop)  # fmt: skip
    out = await read_tool(workspace).execute(ctx)
    return out.content if isinstance(out, ToolResult) else out


def _big_file(path: Path, lines: int) -> str:
    text = "".join(f"line {n:05d} " + "x" * (40 + n % 23) + "\n" for n in range(1, lines + 1))
    path.write_text(text)
    return text


async def test_the_character_cut_continues_at_the_first_line_not_shown(tmp_path: Path) -> None:
    _big_file(tmp_path / "big.txt", 3000)
    workspace = Workspace(cwd=tmp_path)  # the defaults: 2000 lines, 50,000 characters
    first = await read(workspace, path="big.txt")
    hint = _HINT.search(first)
    assert hint is not None, first[-200:]
    shown_to, next_offset = int(hint.group(2)), int(hint.group(4))
    body = first[: hint.start()]
    assert len(body) <= 50_000
    # The 50,000-character cut falls well before line 2000, and the next offset follows it.
    assert shown_to < 2000
    assert next_offset == shown_to + 1
    assert body.splitlines()[-1].startswith(f"line {shown_to:05d} ")
    second = await read(workspace, path="big.txt", offset=next_offset)
    assert second.startswith(f"line {next_offset:05d} ")


async def test_paging_through_a_big_file_shows_every_line_exactly_once(tmp_path: Path) -> None:
    text = _big_file(tmp_path / "big.txt", 5000)
    workspace = Workspace(cwd=tmp_path, limits=CodingLimits(max_output_chars=7_000))
    seen: list[str] = []
    offset = 1
    for _ in range(1000):
        page = await read(workspace, path="big.txt", offset=offset)
        hint = _HINT.search(page)
        if hint is None:
            seen.append(page)
            break
        seen.append(page[: hint.start()])
        offset = int(hint.group(4))
    assert "".join(seen) == text


async def test_a_line_longer_than_the_limit_is_cut_and_paging_moves_on(tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_text("short\n" + "y" * 500 + "\nafter\n")
    workspace = Workspace(cwd=tmp_path, limits=CodingLimits(max_output_chars=100))
    first = await read(workspace, path="wide.txt")
    assert first.startswith("short\n")
    assert first.endswith("continue with offset=2]")
    second = await read(workspace, path="wide.txt", offset=2)
    assert second.startswith("y" * 100 + "\n[... line 2 is 501 characters long")
    assert second.endswith("continue with offset=3]")
    assert await read(workspace, path="wide.txt", offset=3) == "after\n"
