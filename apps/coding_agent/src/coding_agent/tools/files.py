"""File tools: ``read`` (with line ranges), ``write``, ``edit`` (exact, unique replacement).

Blocking file I/O runs in a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from coding_agent.tools._text import read_text
from coding_agent.workspace import Workspace
from lemon_agent import Tool, ToolContext, ToolError, ToolResult

__all__ = ["edit_tool", "read_tool", "write_tool"]


def read_tool(workspace: Workspace) -> Tool:
    """``read``: a text file, optionally from line ``offset`` (1-based) for ``limit`` lines."""
    limits = workspace.limits

    def run(args: dict[str, Any]) -> str:
        path = workspace.resolve_checked(args["path"])
        shown = workspace.show(path)
        lines = read_text(path, shown, limits.max_file_bytes).splitlines(keepends=True)
        offset = int(args.get("offset", 1))
        if lines and offset > len(lines):
            raise ToolError(f"offset {offset} is past the end of {shown} ({len(lines)} lines)")
        limit = min(int(args.get("limit", limits.max_read_lines)), limits.max_read_lines)
        return page_lines(lines, offset, limit, limits.max_output_chars)

    async def execute(ctx: ToolContext) -> str:
        return await asyncio.to_thread(run, dict(ctx.arguments))

    return Tool(
        name="read",
        description=(
            "Read a text file. Paths are relative to the workspace. Use offset (1-based line) "
            f"and limit to page through large files (at most {limits.max_read_lines} lines "
            "per call). Paths outside the workspace need the user's approval; secret files "
            "(.env, private keys, credential files) are refused."
        ),
        execute=execute,
        parameters=READ_PARAMETERS,
    )


#: ``read``'s arguments (the local tool's and the editor's).
READ_PARAMETERS: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "file to read"},
        "offset": {"type": "integer", "minimum": 1, "description": "first line (1-based)"},
        "limit": {"type": "integer", "minimum": 1, "description": "number of lines"},
    },
    "required": ["path"],
    "additionalProperties": False,
}


def page_lines(
    lines: list[str], offset: int, limit: int, max_chars: int, *, whole: bool = True
) -> str:
    """Lines ``offset`` .. (at most ``limit`` of them and ``max_chars`` characters), with a
    marker naming the first line not shown whenever the file goes on. ``lines`` is the whole
    file (``whole``), or the lines from ``offset`` on (an editor's answer: at least one line
    past the page when the file goes on; the total is then not known).

    Only whole lines are shown, so the continuation offset is exactly the first line the model
    has not seen. A single line longer than ``max_chars`` is shown cut (with a marker) and the
    continuation is the line after it, so paging always makes progress.
    """
    start = offset - 1 if whole else 0
    taken: list[str] = []
    used = 0
    for line in lines[start : start + limit]:
        if used + len(line) > max_chars:
            break
        taken.append(line)
        used += len(line)
    note = ""
    if not taken and start < len(lines):
        line = lines[start]
        taken.append(line[:max_chars])
        note = (
            f"\n[... line {offset} is {len(line)} characters long; only its first {max_chars} "
            "are shown]"
        )
    body = "".join(taken) + note
    shown = start + len(taken)  # lines of ``lines`` up to the last one shown
    if shown < len(lines):
        end = offset - 1 + len(taken)  # the last line shown (1-based)
        cut = " (output limit)" if shown < min(start + limit, len(lines)) else ""
        total = f" of {len(lines)}" if whole else ""
        body += f"\n[showing lines {offset}-{end}{total}{cut}; continue with offset={end + 1}]"
    return body


def edit_line(text: str, old: str, shown: str) -> int:
    """The line ``old`` starts at in ``text`` (1-based); a :class:`ToolError` saying what to do
    unless it occurs exactly once."""
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"old_text was not found in {shown}; read the file and copy the exact text "
            "(whitespace and indentation included)"
        )
    if count > 1:
        raise ToolError(
            f"old_text occurs {count} times in {shown}; include more surrounding lines so it "
            "matches exactly once"
        )
    return text.count("\n", 0, text.index(old)) + 1


def write_tool(workspace: Workspace) -> Tool:
    """``write``: create or overwrite a file (parent directories are created)."""

    def run(args: dict[str, Any]) -> str:
        path = workspace.resolve_checked(args["path"])
        if path.is_dir():
            raise ToolError(f"{workspace.show(path)} is a directory")
        content: str = args["content"]
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        path.write_text(content, encoding="utf-8")
        verb = "Overwrote" if existed else "Created"
        return f"{verb} {workspace.show(path)} ({len(content.encode())} bytes)"

    async def execute(ctx: ToolContext) -> str:
        return await asyncio.to_thread(run, dict(ctx.arguments))

    return Tool(
        name="write",
        description="Write a file with the given content, replacing it if it exists.",
        execute=execute,
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
            "additionalProperties": False,
        },
    )


def edit_tool(workspace: Workspace) -> Tool:
    """``edit``: replace ``old_text`` by ``new_text``; ``old_text`` must occur exactly once."""
    limits = workspace.limits

    def run(args: dict[str, Any]) -> ToolResult:
        path = workspace.resolve_checked(args["path"])
        shown = workspace.show(path)
        old: str = args["old_text"]
        new: str = args["new_text"]
        if not old:
            raise ToolError("old_text must not be empty")
        text = read_text(path, shown, limits.max_file_bytes)
        line = edit_line(text, old, shown)
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
        added = new.count("\n") + 1
        return ToolResult(
            content=f"Edited {shown}: replaced 1 occurrence at line {line}",
            details={"path": shown, "line": line, "lines_removed": old.count("\n") + 1,
                     "lines_added": added},
        )  # fmt: skip

    async def execute(ctx: ToolContext) -> ToolResult:
        return await asyncio.to_thread(run, dict(ctx.arguments))

    return Tool(
        name="edit",
        description=(
            "Replace exact text in a file. old_text must match exactly once (copy it from read, "
            "including whitespace); new_text replaces it."
        ),
        execute=execute,
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_text": {"type": "string", "minLength": 1},
                "new_text": {"type": "string"},
            },
            "required": ["path", "old_text", "new_text"],
            "additionalProperties": False,
        },
    )
