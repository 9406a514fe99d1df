"""The editor's file system and terminal for one run: a handle, and the call that uses it.

An ACP client (an editor) may offer ``fs/read_text_file``, ``fs/write_text_file`` and
``terminal/*``: then a run's file and shell tools ask the editor instead of touching the disk
and spawning processes themselves (so unsaved buffers are read and the editor records the
edit). The ACP agent serves its session's editor on a loopback endpoint of its own and puts an
:class:`EditorHandle` on each of the session's run requests (``RunRequest.editor``); the
handle travels like ``mcp_servers`` through the router and the gateway to the executor, whose
tools call :func:`editor_call`.

The endpoint's protocol: one TCP connection per call; the caller writes one JSON line
``{"token", "method", "params"}`` and reads one line back, ``{"result": ...}`` or
``{"error": {"code", "message"}}``. Closing the connection before the answer abandons the
call (the agent then ends what it started for it: a terminal waited on is killed and
released). Frames are bounded both ways (:data:`MAX_EDITOR_FRAME_BYTES`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
from typing import Any, Final

import msgspec

from lemon_core.errors import LemonCoreError
from lemon_core.execution.errors import ExecutionContractError

__all__ = [
    "EDITOR_METHODS",
    "MAX_EDITOR_FRAME_BYTES",
    "EditorCallError",
    "EditorHandle",
    "editor_call",
]

#: The largest frame either way (a file's text, JSON-escaped, fits: the tools read at most
#: 10 MiB files).
MAX_EDITOR_FRAME_BYTES: Final = 32 * 1024 * 1024
#: What a run may ask the editor.
EDITOR_METHODS: Final = frozenset(
    {
        "fs/read_text_file",
        "fs/write_text_file",
        "terminal/create",
        "terminal/output",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/release",
    }
)


class EditorCallError(LemonCoreError, RuntimeError):
    """A call to the editor failed: the editor's own error (``code`` set), or the connection
    to the agent serving it (``code`` ``None``)."""

    def __init__(self, message: str, *, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class EditorHandle(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where a session's editor is served (a loopback ``host`` and ``port``, with the
    session's ``token``) and what it offers: ``read`` (``fs/read_text_file``), ``write``
    (``fs/write_text_file``), ``terminal`` (``terminal/*``)."""

    host: str
    port: int
    token: str
    read: bool = False
    write: bool = False
    terminal: bool = False

    def __post_init__(self) -> None:
        try:
            loopback = ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ExecutionContractError(
                f"the editor's endpoint must be a loopback address, got {self.host!r}"
            )
        if isinstance(self.port, bool) or not 0 < self.port < 65536:
            raise ExecutionContractError(f"the editor's port must be 1-65535, got {self.port!r}")
        if not self.token or len(self.token) > 256:
            raise ExecutionContractError("the editor's token must be 1-256 characters")


async def editor_call(
    handle: EditorHandle, method: str, params: dict[str, Any], *, within_s: float = 60.0
) -> Any:
    """Ask the editor ``method`` with ``params``; its result. :class:`EditorCallError` when
    it answers an error, the agent is gone, or no answer comes within ``within_s`` seconds.
    Cancelling the caller closes the connection (the call is abandoned)."""
    if method not in EDITOR_METHODS:
        raise EditorCallError(f"{method!r} is not a call a run may make to the editor")
    frame = json.dumps({"token": handle.token, "method": method, "params": params})
    data = frame.encode() + b"\n"
    if len(data) > MAX_EDITOR_FRAME_BYTES:
        raise EditorCallError(f"the request is larger than {MAX_EDITOR_FRAME_BYTES} bytes")
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(within_s):
            reader, writer = await asyncio.open_connection(
                handle.host, handle.port, limit=MAX_EDITOR_FRAME_BYTES
            )
            writer.write(data)
            await writer.drain()
            line = await reader.readline()
    except TimeoutError:
        raise EditorCallError(f"the editor did not answer {method} within {within_s:g} s") from None
    except (OSError, ValueError, asyncio.IncompleteReadError) as exc:
        raise EditorCallError(f"the editor's connection is gone ({method}): {exc}") from None
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.shield(writer.wait_closed())
    if not line:
        raise EditorCallError(f"the editor's connection closed before answering {method}")
    try:
        answer = json.loads(line)
    except ValueError:
        raise EditorCallError(f"the editor's answer to {method} is not JSON") from None
    if not isinstance(answer, dict):
        raise EditorCallError(f"the editor's answer to {method} is not an object")
    error = answer.get("error")
    if error is not None:
        error = error if isinstance(error, dict) else {}
        code = error.get("code")
        raise EditorCallError(
            f"the editor answered {method} with an error: "
            f"{error.get('message') or 'no reason given'}",
            code=code if isinstance(code, int) else None,
        )
    return answer.get("result")
