"""``bash``: run a shell command in the workspace, bounded in time and output.

The command runs as ``bash -c`` in an asyncio subprocess in its own process group (a new
session), with stdin closed and stderr merged into stdout. Whatever way the call ends (normal
exit, timeout, abort signal, cancellation of the tool) the whole process group is killed with
SIGKILL, so background jobs the command started do not outlive the call. Output keeps the last
``bash_output_bytes`` bytes, with a marker counting what was dropped; progress goes out as
``tool_execution_update`` events at most every 0.2 s. The command's environment is
``Workspace.env``: the daemon's less its secrets (:mod:`coding_agent.environment`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any, Final, Literal

from coding_agent.workspace import Workspace
from lemon_agent import Tool, ToolContext, ToolResult

__all__ = ["bash_tool"]

_UPDATE_INTERVAL = 0.2
_DRAIN_SECONDS = 2.0


class _Tail:
    """The last ``limit`` bytes of a stream, and how many bytes were dropped before them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        excess = len(self.data) - self.limit
        if excess > 0:
            del self.data[:excess]
            self.dropped += excess

    def text(self) -> str:
        body = self.data.decode("utf-8", errors="replace")
        if self.dropped:
            body = f"[... {self.dropped} bytes of earlier output omitted]\n" + body
        return body


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class _Shell(asyncio.SubprocessProtocol):
    """Collects output and notices exit even while background jobs keep the pipe open."""

    def __init__(self, tail: _Tail) -> None:
        loop = asyncio.get_running_loop()
        self.tail = tail
        self.fresh = bytearray()
        self.data = asyncio.Event()
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.tail.add(data)
        self.fresh += data[-4096:]
        del self.fresh[:-4096]
        self.data.set()

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1 and not self.closed.done():
            self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


#: ``bash``'s arguments (the local tool's and the editor terminal's).
BASH_PARAMETERS: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "minLength": 1},
        "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "seconds"},
    },
    "required": ["command"],
    "additionalProperties": False,
}


def bash_tool(workspace: Workspace) -> Tool:
    """The ``bash`` tool for ``workspace``."""
    limits = workspace.limits

    async def execute(ctx: ToolContext) -> ToolResult:
        command: str = ctx.arguments["command"]
        timeout = min(float(ctx.arguments.get("timeout", limits.bash_timeout)),
                      limits.bash_max_timeout)  # fmt: skip
        tail = _Tail(limits.bash_output_bytes)
        loop = asyncio.get_running_loop()
        transport, shell = await loop.subprocess_exec(
            lambda: _Shell(tail),
            "bash",
            "-c",
            command,
            cwd=workspace.cwd,
            env=dict(workspace.env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        pid = transport.get_pid()

        async def progress() -> None:
            while True:
                await shell.data.wait()
                shell.data.clear()
                text = shell.fresh.decode("utf-8", errors="replace")
                shell.fresh.clear()
                await ctx.update(text)
                await asyncio.sleep(_UPDATE_INTERVAL)  # throttle, not synchronisation

        updates = asyncio.create_task(progress())
        aborted = asyncio.create_task(ctx.signal.wait())
        ending: Literal["exit", "timeout", "aborted"] = "timeout"
        try:
            waiters: set[asyncio.Future[Any]] = {shell.exited, aborted}
            done, _ = await asyncio.wait(
                waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if shell.exited in done:
                ending = "exit"
            elif aborted in done:
                ending = "aborted"
        finally:
            _kill_group(pid)  # the command, its children and background jobs
            aborted.cancel()
            updates.cancel()
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.gather(shell.exited, shell.closed), _DRAIN_SECONDS)
            transport.close()
        code = transport.get_returncode()
        body = tail.text()
        details = {"exit_code": code, "ending": ending, "dropped_bytes": tail.dropped}
        if ending == "timeout":
            footer = f"[timed out after {timeout:g} s; the process group was killed]"
        elif ending == "aborted":
            footer = "[aborted; the process group was killed]"
        else:
            footer = f"[exit code {code}]"
        text = f"{body.rstrip()}\n{footer}" if body.strip() else footer
        return ToolResult(content=text, is_error=ending != "exit" or code != 0, details=details)

    return Tool(
        name="bash",
        description=(
            "Run a shell command (bash -c) in the workspace; stdout and stderr are combined. "
            f"Default timeout {limits.bash_timeout:g} s (max {limits.bash_max_timeout:g}); only "
            f"the last {limits.bash_output_bytes} bytes of output are kept. Background jobs are "
            "killed when the command ends."
        ),
        execute=execute,
        parameters=BASH_PARAMETERS,
    )
