"""The read/write/edit/bash tools through an editor handle, against a real loopback endpoint
speaking the handle's protocol (one JSON line each way per call), as the ACP agent serves it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from coding_agent import Workspace
from coding_agent.tools import coding_tools
from lemon_agent import AbortSignal, Tool, ToolContext, ToolError, ToolResult
from lemon_core.execution import EditorHandle

Answer = Callable[[str, dict[str, Any]], Any]


class Endpoint:
    """Records each call; ``answer(method, params)`` gives the result (a coroutine may wait;
    ``{"error": ...}`` is an error frame; ``None`` from ``drop`` closes without answering)."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.tokens: set[str] = set()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frame = json.loads(await reader.readline())
        self.tokens.add(frame["token"])
        self.calls.append((frame["method"], frame["params"]))
        result = self.answer(frame["method"], frame["params"])
        if asyncio.iscoroutine(result):
            result = await result
        if result != "drop":
            body = result if isinstance(result, dict) and "error" in result else {"result": result}
            writer.write(json.dumps(body).encode() + b"\n")
            await writer.drain()
        writer.close()

    def methods(self) -> list[str]:
        return [m for m, _ in self.calls]


@asynccontextmanager
async def endpoint(answer: Answer, **offers: bool) -> AsyncIterator[tuple[Endpoint, EditorHandle]]:
    served = Endpoint(answer)
    server = await asyncio.start_server(served.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    given = {"read": True, "write": True, "terminal": True, **offers}
    handle = EditorHandle(host="127.0.0.1", port=port, token="t0ken", **given)
    async with server:
        yield served, handle


def tool(workspace: Workspace, handle: EditorHandle, name: str) -> Tool:
    return next(t for t in coding_tools(workspace, editor=handle) if t.name == name)


async def call(t: Tool, signal: AbortSignal | None = None, **args: Any) -> ToolResult | str:
    async def update(text: str) -> None:
        return None

    ctx = ToolContext(tool_call_id="e1", name=t.name, arguments=args,
                      signal=signal or AbortSignal(), update=update)  # fmt: skip
    return await t.execute(ctx)


async def test_read_asks_one_line_more_and_pages(tmp_path: Path) -> None:
    workspace = Workspace(cwd=tmp_path)
    async with endpoint(lambda m, p: {"content": "b\nc\n"}) as (served, handle):
        out = await call(tool(workspace, handle, "read"), path="f.txt", offset=2, limit=1)
    assert served.calls == [
        ("fs/read_text_file", {"path": str(tmp_path / "f.txt"), "line": 2, "limit": 2})
    ]
    assert served.tokens == {"t0ken"}
    assert out == "b\n\n[showing lines 2-2; continue with offset=3]"


async def test_paths_outside_the_workspace_and_secret_files_never_reach_the_editor(
    tmp_path: Path,
) -> None:
    (tmp_path / "ws").mkdir()
    workspace = Workspace(cwd=tmp_path / "ws")
    async with endpoint(lambda m, p: {"content": ""}) as (served, handle):
        with pytest.raises(ToolError, match="outside the session's workspace"):
            await call(tool(workspace, handle, "read"), path=str(tmp_path / "other.txt"))
        with pytest.raises(ToolError, match="outside the session's workspace"):
            await call(tool(workspace, handle, "write"), path="../x.txt", content="x")
        with pytest.raises(ToolError, match="refused"):
            await call(tool(workspace, handle, "read"), path=".env")
    assert served.calls == []


async def test_edit_reads_the_editors_text_and_writes_it_back(tmp_path: Path) -> None:
    workspace = Workspace(cwd=tmp_path)
    (tmp_path / "a.py").write_text("on disk\n")

    def answer(method: str, params: dict[str, Any]) -> Any:
        return {"content": "x = 1\ny = 2\n"} if method == "fs/read_text_file" else None

    async with endpoint(answer) as (served, handle):
        out = await call(tool(workspace, handle, "edit"), path="a.py", old_text="y = 2",
                         new_text="y = 3")  # fmt: skip
    assert isinstance(out, ToolResult)
    assert out.details["line"] == 2
    assert served.calls[1] == (
        "fs/write_text_file",
        {"path": str(tmp_path / "a.py"), "content": "x = 1\ny = 3\n"},
    )
    assert (tmp_path / "a.py").read_text() == "on disk\n"


async def test_an_editor_error_and_a_dropped_connection_are_tool_errors(tmp_path: Path) -> None:
    workspace = Workspace(cwd=tmp_path)
    refused = {"error": {"code": -32002, "message": "no such buffer"}}
    async with endpoint(lambda m, p: refused) as (_, handle):
        with pytest.raises(ToolError, match="no such buffer"):
            await call(tool(workspace, handle, "read"), path="f.txt")
    async with endpoint(lambda m, p: "drop") as (_, handle):
        with pytest.raises(ToolError, match="closed before answering"):
            await call(tool(workspace, handle, "write"), path="f.txt", content="x")
    assert not (tmp_path / "f.txt").exists()


async def test_a_timeout_kills_the_terminal_then_reads_its_output_and_releases_it(
    tmp_path: Path,
) -> None:
    workspace = Workspace(cwd=tmp_path)
    killed = asyncio.Event()

    async def answer(method: str, params: dict[str, Any]) -> Any:
        if method == "terminal/create":
            return {"terminalId": "t1"}
        if method == "terminal/wait_for_exit":
            await killed.wait()  # the command runs until it is killed
            return {"exitCode": None, "signal": "SIGKILL"}
        if method == "terminal/kill":
            killed.set()
            return None
        if method == "terminal/output":
            return {"output": "partial\n", "truncated": True}
        return None

    async with endpoint(answer) as (served, handle):
        out = await call(tool(workspace, handle, "bash"), command="sleep 60", timeout=0.2)
    assert isinstance(out, ToolResult)
    assert out.is_error
    assert out.details["ending"] == "timeout"
    assert out.details["signal"] == "SIGKILL"
    assert "partial" in out.content
    assert "[output cut to its last" in out.content
    assert served.methods() == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/output",
        "terminal/release",
    ]
    assert served.calls[0][1]["outputByteLimit"] == workspace.limits.bash_output_bytes


async def test_an_abort_kills_the_terminal(tmp_path: Path) -> None:
    workspace = Workspace(cwd=tmp_path)
    killed = asyncio.Event()
    waiting = asyncio.Event()
    signal = AbortSignal()

    async def answer(method: str, params: dict[str, Any]) -> Any:
        if method == "terminal/create":
            return {"terminalId": "t1"}
        if method == "terminal/wait_for_exit":
            waiting.set()
            await killed.wait()
            return {"signal": "SIGKILL"}
        if method == "terminal/kill":
            killed.set()
        if method == "terminal/output":
            return {"output": "", "truncated": False}
        return None

    async with endpoint(answer) as (served, handle):
        running = asyncio.ensure_future(call(tool(workspace, handle, "bash"), signal, command="x"))
        await waiting.wait()
        signal.abort("stop")
        out = await running
    assert isinstance(out, ToolResult)
    assert out.details["ending"] == "aborted"
    assert "terminal/kill" in served.methods()
    assert served.methods()[-1] == "terminal/release"


async def test_only_what_the_editor_offers_is_replaced(tmp_path: Path) -> None:
    workspace = Workspace(cwd=tmp_path)
    async with endpoint(lambda m, p: None, write=False, terminal=False) as (_, handle):
        tools = {t.name: t for t in coding_tools(workspace, editor=handle)}
        local = {t.name: t for t in coding_tools(workspace)}
    assert "editor" in tools["read"].description
    assert tools["write"].description == local["write"].description
    assert tools["edit"].description == local["edit"].description  # edit needs write too
    assert tools["bash"].description == local["bash"].description


def test_fresh_output_follows_an_output_cut_at_its_start() -> None:
    from coding_agent.tools.editor import fresh_output

    assert fresh_output("", "a\n") == "a\n"
    assert fresh_output("a\n", "a\nb\n") == "b\n"
    assert fresh_output("a\nb\n", "a\nb\n") == ""
    # The editor kept only the last bytes: what follows the end of the previous output.
    assert fresh_output("gone\n", "all new\n") == "all new\n"
    long = "".join(f"line {n}\n" for n in range(200))
    assert fresh_output(long, long[700:] + "more\n") == "more\n"


async def test_a_running_commands_output_is_polled_into_progress_updates(
    tmp_path: Path,
) -> None:
    """``terminal/output`` is polled while the command runs; each new part is an update (the
    command exits once the test has seen two), and the poll's end never kills the terminal."""
    workspace = Workspace(cwd=tmp_path)
    output = ["first\n"]
    updates: list[str] = []
    seen_two = asyncio.Event()

    async def answer(method: str, params: dict[str, Any]) -> Any:
        if method == "terminal/create":
            return {"terminalId": "t1"}
        if method == "terminal/wait_for_exit":
            await seen_two.wait()
            output.append("last\n")
            return {"exitCode": 0}
        if method == "terminal/output":
            if len(output) == 1 and updates:
                output.append("second\n")
            return {"output": "".join(output), "truncated": False}
        return None

    async def update(text: str) -> None:
        updates.append(text)
        if len(updates) == 2:
            seen_two.set()

    async with endpoint(answer) as (served, handle):
        bash = tool(workspace, handle, "bash")
        ctx = ToolContext(tool_call_id="e1", name="bash", arguments={"command": "x"},
                          signal=AbortSignal(), update=update)  # fmt: skip
        out = await bash.execute(ctx)
    assert isinstance(out, ToolResult)
    assert updates == ["first\n", "second\n"]
    assert "first\nsecond\nlast" in out.content
    assert "terminal/kill" not in served.methods()
    assert served.methods()[-2:] == ["terminal/output", "terminal/release"]


async def test_ls_find_and_grep_read_the_disk_and_say_so(tmp_path: Path) -> None:
    from coding_agent.tools.editor import DISK_NOTE

    (tmp_path / "a.txt").write_text("on disk\n")
    workspace = Workspace(cwd=tmp_path)
    async with endpoint(lambda m, p: None) as (served, handle):
        tools = {t.name: t for t in coding_tools(workspace, editor=handle)}
        for name, args in (("ls", {}), ("find", {"pattern": "*.txt"}),
                           ("grep", {"pattern": "disk"})):  # fmt: skip
            assert "not the editor's unsaved changes" in tools[name].description
            out = await call(tools[name], **args)
            text = out.content if isinstance(out, ToolResult) else out
            assert "a.txt" in text
            assert text.endswith(DISK_NOTE)
    assert served.calls == []  # the editor was never asked
    plain = {t.name: t for t in coding_tools(workspace)}
    assert DISK_NOTE not in str(await call(plain["grep"], pattern="disk"))
