"""The editor's stdio, kept clean: stdout carries only JSON-RPC frames.

:func:`claim_stdout` takes the process's real stdout (fd 1) for the frames and points fd 1 (and
``sys.stdout``) at stderr, so any stray write of any library (a ``print``, a C extension, a
logging handler configured on stdout) lands on stderr instead of corrupting the editor's
stream (opencode #13634). :func:`serve_stdio` then answers the editor until stdin ends.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import IO

from lemon_acp._agent import AcpAgent

__all__ = ["claim_stdout", "serve_stdio"]

#: A frame is one line; an image block can be large.
_LINE_LIMIT = 64 * 1024 * 1024


def claim_stdout() -> IO[bytes]:
    """The real stdout, for frames only; fd 1 and ``sys.stdout`` become stderr."""
    frames = os.fdopen(os.dup(1), "wb", buffering=0)
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return frames


class _FrameFile:
    """Frames to a file object, written off the event loop (stdout may be a pipe, a file or a
    terminal; a full pipe must not block the loop)."""

    def __init__(self, file: IO[bytes]) -> None:
        self._file = file
        self._buffer: list[bytes] = []

    def write(self, data: bytes) -> None:
        self._buffer.append(data)

    async def drain(self) -> None:
        data, self._buffer = b"".join(self._buffer), []
        if data:
            await asyncio.to_thread(self._write, data)

    def _write(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()


class _ThreadLines:
    """Lines of a stdin that is not a pipe (a file, a terminal), read off the event loop."""

    def __init__(self, file: IO[bytes]) -> None:
        self._file = file

    async def readline(self) -> bytes:
        return await asyncio.to_thread(self._file.readline, _LINE_LIMIT)


async def serve_stdio(agent: AcpAgent, frames: IO[bytes]) -> None:
    """Answer the editor on stdin / ``frames`` until stdin ends."""
    loop = asyncio.get_running_loop()
    reader: asyncio.StreamReader | _ThreadLines = asyncio.StreamReader(limit=_LINE_LIMIT)
    try:
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader),  # type: ignore[arg-type]  # narrowed
            sys.stdin,
        )
    except ValueError:  # stdin is a regular file
        reader = _ThreadLines(sys.stdin.buffer)
    writer: asyncio.StreamWriter | _FrameFile
    try:  # a pipe or a socket (as editors run agents): written on the loop, no thread hop
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, frames
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
    except ValueError:  # a regular file or a terminal: written off the loop
        writer = _FrameFile(frames)
    await agent.serve(reader, writer)
