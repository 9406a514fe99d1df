"""``read`` / ``write`` / ``edit`` / ``bash`` through the editor (an ACP client's ``fs/*`` and
``terminal/*``), for a run whose request carries an
:class:`~lemon_core.execution.EditorHandle`.

The tools keep the local tools' names, arguments and result shapes; only where the bytes come
from and where the command runs change: ``fs/read_text_file`` (so an unsaved buffer is what is
read), ``fs/write_text_file`` (so the editor records the edit; the disk is the editor's to
write), and a ``terminal/create`` -> ``terminal/wait_for_exit`` -> ``terminal/output`` ->
``terminal/release`` sequence for ``bash`` (``outputByteLimit`` the local tool's output bound;
a timeout or an abort is ``terminal/kill`` before the output is read). While the command runs,
``terminal/output`` is polled every :data:`POLL_INTERVAL_S` seconds (one poll at a time) and
what is new goes out as the tool's progress (``tool_execution_update``, at most
:data:`_PROGRESS_CHARS` characters each), as the local ``bash`` streams its pipe. Paths are
absolute and inside the session's workspace: any other is refused with a tool error (secret
files are refused as locally). The approval gate runs before a tool does, so the editor is
asked only once the call is allowed. An editor's error, or its connection gone, is a tool
error.

If the run is cancelled while a call is in flight, the call's connection closes: the ACP
agent then ends what it started for it (a terminal is killed and released).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from pathlib import Path
from typing import Any, Literal

from coding_agent.tools.bash import BASH_PARAMETERS
from coding_agent.tools.files import READ_PARAMETERS, edit_line, page_lines
from coding_agent.workspace import Workspace
from lemon_agent import Tool, ToolContext, ToolError, ToolResult
from lemon_core.execution import EditorCallError, EditorHandle, editor_call

__all__ = [
    "DISK_NOTE",
    "POLL_INTERVAL_S",
    "disk_view",
    "editor_bash_tool",
    "editor_edit_tool",
    "editor_read_tool",
    "editor_write_tool",
    "fresh_output",
]

#: Seconds a file call to the editor may take.
_FS_TIMEOUT = 60.0
#: Seconds past the command's own timeout the wait for its exit may take (the kill follows).
_TERMINAL_GRACE = 30.0
#: Seconds between two ``terminal/output`` polls while the command runs (live progress).
POLL_INTERVAL_S = 0.5
#: At most this many characters of fresh output in one progress update.
_PROGRESS_CHARS = 4096
#: The start of a poll's output looked for in the previous one (the editor may cut the
#: output's start once it passes ``outputByteLimit``).
_ANCHOR_CHARS = 32


def _inside(workspace: Workspace, raw: object) -> tuple[Path, str]:
    """``raw`` as an absolute path inside the workspace, and as shown; else a ToolError."""
    path = workspace.resolve_checked(raw)
    if not workspace.contains(path):
        raise ToolError(
            f"{path} is outside the session's workspace {workspace.cwd}: the editor's files "
            "are those inside it"
        )
    return path, workspace.show(path)


#: Said by ``ls`` / ``find`` / ``grep`` of a run whose editor offers its file system.
DISK_NOTE = "[from the disk: the editor's unsaved changes are not seen; read a file for them]"


def disk_view(tool: Tool) -> Tool:
    """``tool`` (``ls``, ``find`` or ``grep``) for a run whose editor offers ``fs/*``: ACP has
    no listing or search call, so it still reads the disk, and says so (its description, and
    :data:`DISK_NOTE` after each answer) so that an unsaved buffer is looked at with ``read``."""
    run = tool.execute

    async def execute(ctx: ToolContext) -> str | ToolResult:
        out = await run(ctx)
        if isinstance(out, ToolResult):
            return dataclasses.replace(out, content=f"{out.content}\n{DISK_NOTE}")
        return f"{out}\n{DISK_NOTE}"

    return Tool(
        name=tool.name,
        description=(
            f"{tool.description} It reads the files on disk, not the editor's unsaved changes: "
            "read a file to see it as the editor has it."
        ),
        execute=execute,
        parameters=tool.parameters,
    )


async def _call(
    handle: EditorHandle, method: str, params: dict[str, Any], *, within_s: float = _FS_TIMEOUT
) -> dict[str, Any]:
    try:
        result = await editor_call(handle, method, params, within_s=within_s)
    except EditorCallError as exc:
        raise ToolError(str(exc)) from None
    if result is None:
        return {}
    if not isinstance(result, dict):
        raise ToolError(f"the editor's answer to {method} is not an object")
    return result


async def _read_all(handle: EditorHandle, path: Path, shown: str, max_bytes: int) -> str:
    result = await _call(handle, "fs/read_text_file", {"path": str(path)})
    content = result.get("content")
    if not isinstance(content, str):
        raise ToolError(f"the editor's answer for {shown} carries no text content")
    if len(content.encode()) > max_bytes:
        raise ToolError(f"{shown} is larger than {max_bytes} bytes")
    return content


def editor_read_tool(workspace: Workspace, handle: EditorHandle) -> Tool:
    """``read`` through ``fs/read_text_file`` (``line`` / ``limit`` from offset / limit)."""
    limits = workspace.limits

    async def execute(ctx: ToolContext) -> str:
        args = dict(ctx.arguments)
        path, shown = _inside(workspace, args["path"])
        offset = int(args.get("offset", 1))
        limit = min(int(args.get("limit", limits.max_read_lines)), limits.max_read_lines)
        # One line more than shown, to know whether the file goes on.
        result = await _call(
            handle, "fs/read_text_file", {"path": str(path), "line": offset, "limit": limit + 1}
        )
        content = result.get("content")
        if not isinstance(content, str):
            raise ToolError(f"the editor's answer for {shown} carries no text content")
        lines = content.splitlines(keepends=True)
        if not lines and offset > 1:
            raise ToolError(f"offset {offset} is past the end of {shown}")
        return page_lines(lines, offset, limit, limits.max_output_chars, whole=False)

    return Tool(
        name="read",
        description=(
            "Read a text file of the workspace (as the editor has it, unsaved changes "
            "included). Paths are relative to the workspace. Use offset (1-based line) and "
            f"limit to page through large files (at most {limits.max_read_lines} lines per "
            "call). Secret files (.env, private keys, credential files) are refused."
        ),
        execute=execute,
        parameters=READ_PARAMETERS,
    )


def editor_write_tool(workspace: Workspace, handle: EditorHandle) -> Tool:
    """``write`` through ``fs/write_text_file``."""

    async def execute(ctx: ToolContext) -> str:
        path, shown = _inside(workspace, ctx.arguments["path"])
        content: str = ctx.arguments["content"]
        await _call(handle, "fs/write_text_file", {"path": str(path), "content": content})
        return f"Wrote {shown} through the editor ({len(content.encode())} bytes)"

    return Tool(
        name="write",
        description=(
            "Write a file of the workspace with the given content, replacing it if it exists "
            "(the editor writes it)."
        ),
        execute=execute,
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
            "additionalProperties": False,
        },
    )


def editor_edit_tool(workspace: Workspace, handle: EditorHandle) -> Tool:
    """``edit``: the editor's text (``fs/read_text_file``), one exact replacement, written back
    (``fs/write_text_file``)."""
    limits = workspace.limits

    async def execute(ctx: ToolContext) -> ToolResult:
        path, shown = _inside(workspace, ctx.arguments["path"])
        old: str = ctx.arguments["old_text"]
        new: str = ctx.arguments["new_text"]
        if not old:
            raise ToolError("old_text must not be empty")
        text = await _read_all(handle, path, shown, limits.max_file_bytes)
        line = edit_line(text, old, shown)
        await _call(
            handle,
            "fs/write_text_file",
            {"path": str(path), "content": text.replace(old, new, 1)},
        )
        return ToolResult(
            content=f"Edited {shown} through the editor: replaced 1 occurrence at line {line}",
            details={"path": shown, "line": line, "lines_removed": old.count("\n") + 1,
                     "lines_added": new.count("\n") + 1},
        )  # fmt: skip

    return Tool(
        name="edit",
        description=(
            "Replace exact text in a file of the workspace (as the editor has it). old_text "
            "must match exactly once (copy it from read, including whitespace); new_text "
            "replaces it."
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


def editor_bash_tool(workspace: Workspace, handle: EditorHandle) -> Tool:
    """``bash`` in one of the editor's terminals (``terminal/*``)."""
    limits = workspace.limits

    async def execute(ctx: ToolContext) -> ToolResult:
        command: str = ctx.arguments["command"]
        timeout = min(float(ctx.arguments.get("timeout", limits.bash_timeout)),
                      limits.bash_max_timeout)  # fmt: skip
        created = await _call(
            handle,
            "terminal/create",
            {
                "command": "bash",
                "args": ["-c", command],
                "cwd": str(workspace.cwd),
                "outputByteLimit": limits.bash_output_bytes,
            },
        )
        terminal = created.get("terminalId")
        if not isinstance(terminal, str) or not terminal:
            raise ToolError("the editor's answer to terminal/create carries no terminalId")
        ids = {"terminalId": terminal}
        try:
            ending, status = await _wait(handle, ids, ctx, timeout)
            output = await _call(handle, "terminal/output", ids)
        except asyncio.CancelledError:
            raise  # the wait's connection closed: the agent kills and releases the terminal
        except BaseException:
            await _release(handle, ids)
            raise
        await _release(handle, ids)
        status = status or output.get("exitStatus") or {}
        code = status.get("exitCode") if isinstance(status, dict) else None
        signal = status.get("signal") if isinstance(status, dict) else None
        body = str(output.get("output") or "")
        truncated = bool(output.get("truncated"))
        details = {"exit_code": code, "signal": signal, "ending": ending,
                   "truncated": truncated, "terminal": terminal}  # fmt: skip
        if ending == "timeout":
            footer = f"[timed out after {timeout:g} s; the editor's terminal was killed]"
        elif ending == "aborted":
            footer = "[aborted; the editor's terminal was killed]"
        elif code is None and signal:
            footer = f"[killed by {signal}]"
        else:
            footer = f"[exit code {code}]"
        if truncated:
            footer = f"[output cut to its last {limits.bash_output_bytes} bytes]\n{footer}"
        text = f"{body.rstrip()}\n{footer}" if body.strip() else footer
        return ToolResult(content=text, is_error=ending != "exit" or code != 0, details=details)

    return Tool(
        name="bash",
        description=(
            "Run a shell command (bash -c) in the workspace, in a terminal of the editor; stdout "
            f"and stderr are combined. Default timeout {limits.bash_timeout:g} s (max "
            f"{limits.bash_max_timeout:g}); only the last {limits.bash_output_bytes} bytes of "
            "output are kept."
        ),
        execute=execute,
        parameters=BASH_PARAMETERS,
    )


async def _wait(
    handle: EditorHandle, ids: dict[str, Any], ctx: ToolContext, limit_s: float
) -> tuple[Literal["exit", "timeout", "aborted"], dict[str, Any] | None]:
    """Wait for the terminal's command to exit, for ``limit_s`` seconds or until the run is
    aborted: then ``terminal/kill``, after which the editor's wait ends too."""
    exited = asyncio.ensure_future(
        _call(handle, "terminal/wait_for_exit", ids, within_s=limit_s + _TERMINAL_GRACE)
    )
    aborted = asyncio.ensure_future(ctx.signal.wait())
    stop = asyncio.Event()
    progress = asyncio.ensure_future(_progress(handle, ids, ctx, stop))
    try:
        done, _ = await asyncio.wait(
            {exited, aborted}, timeout=limit_s, return_when=asyncio.FIRST_COMPLETED
        )
        if exited in done:
            return "exit", exited.result()
        ending: Literal["timeout", "aborted"] = "aborted" if aborted in done else "timeout"
        await _call(handle, "terminal/kill", ids)
        status: dict[str, Any] | None = None
        with contextlib.suppress(ToolError, TimeoutError):
            status = await asyncio.wait_for(asyncio.shield(exited), _TERMINAL_GRACE)
        return ending, status
    finally:
        aborted.cancel()
        stop.set()  # the poll in flight ends on its own (a withdrawn poll is not a kill)
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(progress, _FS_TIMEOUT)
        if not exited.done():
            exited.cancel()
            with contextlib.suppress(BaseException):
                await exited


async def _progress(
    handle: EditorHandle, ids: dict[str, Any], ctx: ToolContext, stop: asyncio.Event
) -> None:
    """Poll ``terminal/output`` until ``stop``, sending what is new as the tool's progress.
    A failed poll ends the polling (the wait reports the command's end or the editor's
    error)."""
    seen = ""
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), POLL_INTERVAL_S)  # the poll's period
        if stop.is_set():
            return
        try:
            answer = await _call(handle, "terminal/output", ids)
        except ToolError:
            return
        output = answer.get("output")
        if not isinstance(output, str) or output == seen:
            continue
        fresh = fresh_output(seen, output)[-_PROGRESS_CHARS:]
        seen = output
        if fresh:
            await ctx.update(fresh)


def fresh_output(seen: str, output: str) -> str:
    """What ``output`` (the terminal's output now) adds to ``seen`` (its output at the previous
    poll). The editor keeps only the last ``outputByteLimit`` bytes, so once the output is cut
    at its start, what is left of ``seen`` is ``output``'s start: found by ``output``'s first
    characters in ``seen`` (all of ``output`` is new when no end of ``seen`` starts it, or
    when less than :data:`_ANCHOR_CHARS` of ``seen`` is left)."""
    if output.startswith(seen):
        return output[len(seen) :]
    head = output[:_ANCHOR_CHARS]
    at = seen.find(head) if head else -1
    while at >= 0:
        if output.startswith(seen[at:]):
            return output[len(seen) - at :]
        at = seen.find(head, at + 1)
    return output


async def _release(handle: EditorHandle, ids: dict[str, Any]) -> None:
    """``terminal/release`` (its failure is not the command's: nothing more to do)."""
    with contextlib.suppress(EditorCallError):
        await editor_call(handle, "terminal/release", ids, within_s=_FS_TIMEOUT)
