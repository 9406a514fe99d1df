"""The file and search tools, on real files in a temporary workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coding_agent import CodingAgentUsageError, CodingLimits, TodoList, Workspace, coding_tools
from lemon_agent import AbortSignal, Tool, ToolContext, ToolError, ToolResult


async def _noop_update(text: str) -> None:
    return None


async def call(tools: dict[str, Tool], name: str, **args: Any) -> str:
    tool = tools[name]
    ctx = ToolContext(tool_call_id="t1", name=name, arguments=args, signal=AbortSignal(),
                      update=_noop_update)  # fmt: skip
    out = await tool.execute(ctx)
    return out.content if isinstance(out, ToolResult) else out


@pytest.fixture
def tools(tmp_path: Path) -> dict[str, Tool]:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("def main():\n    return 1\n\n\nprint(main())\n")
    (tmp_path / "README.md").write_text("# Demo\nhello world\n")
    (tmp_path / ".hidden").write_text("secret\n")
    limits = CodingLimits(max_read_lines=3, max_entries=2, max_matches=2)
    return {t.name: t for t in coding_tools(Workspace(cwd=tmp_path, limits=limits))}


def test_tool_set_and_order(tmp_path: Path) -> None:
    names = [t.name for t in coding_tools(Workspace(cwd=tmp_path))]
    assert names == ["read", "write", "edit", "ls", "find", "grep", "bash", "todo"]
    with pytest.raises(CodingAgentUsageError, match="not a directory"):
        Workspace(cwd=tmp_path / "missing")


async def test_read_pages_with_offset_and_limit(tools: dict[str, Tool]) -> None:
    first = await call(tools, "read", path="src/app.py")
    assert first.startswith("def main():\n    return 1\n\n")
    assert "[showing lines 1-3 of 5; continue with offset=4]" in first
    rest = await call(tools, "read", path="src/app.py", offset=4, limit=2)
    assert rest == "\nprint(main())\n"
    with pytest.raises(ToolError, match="past the end"):
        await call(tools, "read", path="src/app.py", offset=9)
    with pytest.raises(ToolError, match="no such file"):
        await call(tools, "read", path="nope.txt")


async def test_read_refuses_binary_files(tools: dict[str, Tool], tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ToolError, match="binary"):
        await call(tools, "read", path="blob.bin")


async def test_write_creates_parents_and_reports(tools: dict[str, Tool], tmp_path: Path) -> None:
    out = await call(tools, "write", path="new/dir/file.txt", content="héllo")
    assert out == "Created new/dir/file.txt (6 bytes)"
    assert (tmp_path / "new/dir/file.txt").read_text() == "héllo"
    again = await call(tools, "write", path="new/dir/file.txt", content="x")
    assert again.startswith("Overwrote")


async def test_edit_needs_an_exact_unique_match(tools: dict[str, Tool], tmp_path: Path) -> None:
    out = await call(tools, "edit", path="src/app.py", old_text="return 1", new_text="return 2")
    assert out == "Edited src/app.py: replaced 1 occurrence at line 2"
    assert "return 2" in (tmp_path / "src/app.py").read_text()
    with pytest.raises(ToolError, match="not found"):
        await call(tools, "edit", path="src/app.py", old_text="return 1", new_text="x")
    (tmp_path / "twice.txt").write_text("a\na\n")
    with pytest.raises(ToolError, match="occurs 2 times"):
        await call(tools, "edit", path="twice.txt", old_text="a", new_text="b")
    assert (tmp_path / "twice.txt").read_text() == "a\na\n", "nothing changes on refusal"


async def test_ls_find_and_grep(tools: dict[str, Tool], tmp_path: Path) -> None:
    assert await call(tools, "ls") == "README.md\nsrc/"
    listed = await call(tools, "ls", all=True)
    assert listed == ".hidden\nREADME.md\n[... 1 more entries not shown]"
    assert await call(tools, "find", pattern="*.py") == "src/app.py"
    assert "no files match" in await call(tools, "find", pattern="*.rs")
    assert await call(tools, "grep", pattern=r"main\(") == (
        "src/app.py:1: def main():\nsrc/app.py:5: print(main())"
    )
    assert (
        await call(tools, "grep", pattern="HELLO", ignore_case=True) == "README.md:2: hello world"
    )
    assert await call(tools, "grep", pattern="(", literal=True, glob="*.py") == (
        "src/app.py:1: def main():\nsrc/app.py:5: print(main())"
    )
    with pytest.raises(ToolError, match="invalid regular expression"):
        await call(tools, "grep", pattern="(")
    (tmp_path / "many.txt").write_text("x\n" * 10)
    capped = await call(tools, "grep", pattern="x", path="many.txt")
    assert capped.endswith("[stopped after 2 matches; narrow the pattern or path]")


async def test_todo_list_is_replaced_whole_and_bounded(tmp_path: Path) -> None:
    todos = TodoList(capacity=2)
    tools = {t.name: t for t in coding_tools(Workspace(cwd=tmp_path), todos=todos)}
    assert await call(tools, "todo", action="read") == "The todo list is empty."
    out = await call(tools, "todo", action="write", todos=[
        {"content": "write tests", "status": "completed"},
        {"content": "ship", "status": "in_progress", "priority": "high"},
    ])  # fmt: skip
    assert out == "Todo (1/2 done):\n[x] 1. write tests\n[~] 2. ship (high)"
    assert len(todos.items) == 2
    with pytest.raises(ToolError, match="at most 2"):
        await call(tools, "todo", action="write", todos=[{"content": str(i)} for i in range(3)])
