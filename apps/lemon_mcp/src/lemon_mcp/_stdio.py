"""The stdio transport: the server is our child process, one JSON message per line.

Bounds (each one a fault seen in other clients): a line longer than ``max_frame_bytes``
(16 MiB) ends the connection; so does more than ``max_garbage_lines`` lines that are not
JSON-RPC (a server printing its banner or logs on stdout), each logged once, briefly. stderr
is always drained (a full pipe would stall the server) into a ring of ``stderr_bytes``
(64 KiB) that ``stderr_tail()`` shows and nothing else reads: it never reaches a model or an
answer. The child runs in its own process group (``start_new_session``), and :meth:`aclose`
ends the group: stdin closed, then TERM, then KILL after ``kill_grace_s`` (2 s): no orphans.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from lemon_mcp.errors import McpConnectionError, McpProtocolError

__all__ = ["MAX_FRAME_BYTES", "StdioTransport"]

log = logging.getLogger("lemon_mcp")

MAX_FRAME_BYTES: Final = 16 * 1024 * 1024
STDERR_BYTES: Final = 64 * 1024

OnMessage = Callable[[bytes], None]
OnClose = Callable[[str], None]


class StdioTransport:
    """A child process speaking newline-delimited JSON-RPC (loop-only)."""

    def __init__(
        self,
        *,
        name: str,
        command: str,
        args: tuple[str, ...] = (),
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        max_garbage_lines: int = 20,
        stderr_bytes: int = STDERR_BYTES,
        kill_grace_s: float = 2.0,
    ) -> None:
        self.name = name
        self._command = command
        self._args = args
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._max_frame = max_frame_bytes
        self._max_garbage = max_garbage_lines
        self._kill_grace = kill_grace_s
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._stderr_cap = stderr_bytes
        self._proc: asyncio.subprocess.Process | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._on_close: OnClose | None = None
        self._closed = False
        self._closing: asyncio.Future[None] | None = None
        self.garbage_lines = 0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    async def start(self, on_message: OnMessage, on_close: OnClose) -> None:
        self._on_close = on_close
        try:
            self._proc = await asyncio.create_subprocess_exec(
                self._command,
                *self._args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self._env,
                cwd=self._cwd,
                start_new_session=True,
                limit=self._max_frame + 1,
            )
        except OSError as exc:
            raise McpConnectionError(f"cannot start {self._command!r}: {exc}") from None
        self._tasks = [
            asyncio.create_task(self._read_stdout(on_message), name=f"mcp-{self.name}-stdout"),
            asyncio.create_task(self._read_stderr(), name=f"mcp-{self.name}-stderr"),
        ]

    async def send(self, payload: bytes) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or self._closed:
            raise McpConnectionError("the server's connection is closed")
        try:
            proc.stdin.write(payload + b"\n")
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise McpConnectionError(f"the server closed its stdin: {exc}") from None

    def stderr_tail(self) -> str:
        """The last ``stderr_bytes`` of the server's stderr (for ``lemon mcp`` and logs)."""
        return b"".join(self._stderr).decode("utf-8", "replace")

    async def _read_stdout(self, on_message: OnMessage) -> None:
        proc = self._proc
        assert proc is not None
        assert proc.stdout is not None
        reason = "the server closed its stdout"
        try:
            while True:
                try:
                    line = await proc.stdout.readuntil(b"\n")
                except asyncio.IncompleteReadError as exc:
                    if exc.partial.strip():
                        self._frame(exc.partial, on_message)
                    break
                except asyncio.LimitOverrunError:
                    raise McpProtocolError(
                        f"a frame over {self._max_frame} bytes on stdout"
                    ) from None
                if len(line) > self._max_frame + 1:
                    raise McpProtocolError(f"a frame over {self._max_frame} bytes on stdout")
                if line.strip():
                    self._frame(line, on_message)
        except McpProtocolError as exc:
            reason = str(exc)
            log.warning("mcp server %s: %s; its connection is ended", self.name, reason)
        except (OSError, ValueError) as exc:
            reason = f"reading stdout failed: {exc}"
        self._lost(reason)

    def _frame(self, line: bytes, on_message: OnMessage) -> None:
        stripped = line.strip()
        if not stripped.startswith(b"{"):
            self.garbage_lines += 1
            if self.garbage_lines == 1:
                log.info("mcp server %s prints non-JSON on stdout (ignored)", self.name)
            if self.garbage_lines > self._max_garbage:
                raise McpProtocolError(f"more than {self._max_garbage} non-JSON lines on stdout")
            return
        on_message(stripped)

    async def _read_stderr(self) -> None:
        proc = self._proc
        assert proc is not None
        assert proc.stderr is not None
        with contextlib.suppress(OSError):
            while chunk := await proc.stderr.read(8192):
                self._stderr.append(chunk)
                self._stderr_size += len(chunk)
                while self._stderr_size > self._stderr_cap and len(self._stderr) > 1:
                    self._stderr_size -= len(self._stderr.popleft())
                if self._stderr_size > self._stderr_cap:
                    only = self._stderr.pop()[-self._stderr_cap :]
                    self._stderr.append(only)
                    self._stderr_size = len(only)

    def _lost(self, reason: str) -> None:
        if not self._closed and self._on_close is not None:
            self._on_close(reason)

    async def aclose(self) -> None:
        """End the server: stdin closed, TERM to its process group, KILL after the grace. A
        second call (the hub's stop racing a cancelled start's clean-up) waits for the first:
        neither returns before the process is ended and reaped."""
        if self._closing is not None:
            await asyncio.shield(self._closing)
            return
        self._closed = True
        self._closing = asyncio.ensure_future(self._close())
        await asyncio.shield(self._closing)

    async def _close(self) -> None:
        proc = self._proc
        if proc is not None:
            if proc.stdin is not None:
                with contextlib.suppress(OSError, RuntimeError):
                    proc.stdin.close()
            await self._end_group(proc)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _end_group(self, proc: asyncio.subprocess.Process) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            try:
                await asyncio.wait_for(proc.wait(), self._kill_grace)
            except TimeoutError:
                continue
            # The leader is gone; end what is left of its group (children it started).
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            return
