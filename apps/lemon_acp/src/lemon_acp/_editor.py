"""The editor's file system and terminal, served to this agent's runs on loopback.

When the editor advertises ``fs.readTextFile`` / ``fs.writeTextFile`` / ``terminal`` in
``initialize``, each of its sessions' run requests carries an
:class:`~lemon_core.execution.EditorHandle` naming this bridge's loopback endpoint and the
session's own token. The run's file and shell tools (in the daemon, or the in-process
runtime) connect here for each call (:func:`lemon_core.execution.editor_call`); the bridge
checks the call (the token's session, a method the editor offers, an absolute path inside the
session's workspace, a terminal this session created), sends it to the editor as a JSON-RPC
request with the session's id, and writes the editor's answer back.

A call whose caller goes away before the answer (the run was cancelled: its tool's
connection closed) is withdrawn; a terminal it was about is killed and released (not for a
withdrawn ``terminal/output``: the progress polls of a running command end that way).
``session/cancel`` kills and releases every terminal the session still holds. When the editor
disconnects, every call in flight and every later one is an error saying so. Bounds: at most
:data:`MAX_CALLS` calls at once (more are refused), a request frame read within
:data:`READ_TIMEOUT_S`, frames of :data:`~lemon_core.execution.MAX_EDITOR_FRAME_BYTES`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from lemon_acp.errors import INTERNAL_ERROR, INVALID_PARAMS, RpcError
from lemon_core.execution import EDITOR_METHODS, MAX_EDITOR_FRAME_BYTES, EditorHandle

__all__ = ["MAX_CALLS", "READ_TIMEOUT_S", "EditorBridge", "editor_offers"]

log = logging.getLogger("lemon_acp.editor")

MAX_CALLS: Final = 32
READ_TIMEOUT_S: Final = 10.0
_HOST: Final = "127.0.0.1"
_TERMINAL_METHODS: Final = frozenset(m for m in EDITOR_METHODS if m.startswith("terminal/"))

Request = Callable[[str, dict[str, Any]], Awaitable[Any]]
"""Ask the editor: ``(method, params) -> result`` (raises :class:`RpcError`)."""


def editor_offers(capabilities: dict[str, Any]) -> tuple[bool, bool, bool]:
    """What the editor's ``clientCapabilities`` offer: (read, write, terminal)."""
    fs = capabilities.get("fs")
    fs = fs if isinstance(fs, dict) else {}
    return (
        fs.get("readTextFile") is True,
        fs.get("writeTextFile") is True,
        capabilities.get("terminal") is True,
    )


@dataclass(kw_only=True, slots=True)
class _Session:
    key: str
    cwd: str
    read: bool
    write: bool
    terminal: bool
    terminals: set[str] = field(default_factory=set)
    """The terminals created for this session and not released yet."""


class EditorBridge:
    """See the module docstring."""

    def __init__(self, request: Request) -> None:
        self._request = request
        self._server: asyncio.Server | None = None
        self._port = 0
        self._by_token: dict[str, _Session] = {}
        self._by_key: dict[str, str] = {}
        self._calls = 0
        self._closed = False
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, _HOST, 0, limit=MAX_EDITOR_FRAME_BYTES
        )
        self._port = int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop serving: calls in flight are withdrawn (their callers see the editor gone)."""
        self._closed = True
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)

    def handle(
        self, key: str, cwd: str, *, read: bool, write: bool, terminal: bool
    ) -> EditorHandle | None:
        """The handle for session ``key``'s runs (``None``: the editor offers nothing, or the
        bridge is not serving). The session's token is made once and kept."""
        if self._server is None or not (read or write or terminal):
            return None
        token = self._by_key.get(key)
        if token is None:
            token = secrets.token_urlsafe(24)
            self._by_key[key] = token
            self._by_token[token] = _Session(
                key=key, cwd=cwd, read=read, write=write, terminal=terminal
            )
        session = self._by_token[token]
        session.cwd, session.read, session.write, session.terminal = cwd, read, write, terminal
        return EditorHandle(
            host=_HOST, port=self._port, token=token, read=read, write=write, terminal=terminal
        )

    async def end_terminals(self, key: str) -> None:
        """Kill and release every terminal session ``key`` still holds (``session/cancel``)."""
        token = self._by_key.get(key)
        session = self._by_token.get(token) if token is not None else None
        if session is None:
            return
        for terminal in list(session.terminals):
            await self._end_terminal(session, terminal)

    async def _end_terminal(self, session: _Session, terminal: str) -> None:
        if terminal not in session.terminals:
            return
        session.terminals.discard(terminal)
        params = {"sessionId": session.key, "terminalId": terminal}
        for method in ("terminal/kill", "terminal/release"):
            try:
                await self._request(method, params)
            except RpcError as exc:
                log.warning("%s %s: %s", method, terminal, exc.message)

    # -- one call ----------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            answer = await self._answer(reader)
            if answer is not None:
                writer.write(json.dumps(answer, ensure_ascii=False).encode() + b"\n")
                with contextlib.suppress(OSError):
                    await writer.drain()
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug: the caller sees its connection close (a tool error)
            log.exception("an editor call failed")
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader) -> dict[str, Any] | None:
        """The answer frame, or ``None`` when the caller went away."""
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                line = await reader.readline()
        except (TimeoutError, ValueError, OSError):
            return _error(INVALID_PARAMS, "no request frame (or one too large)")
        if not line:
            return None
        try:
            frame = json.loads(line)
        except ValueError:
            return _error(INVALID_PARAMS, "the request frame is not JSON")
        if not isinstance(frame, dict):
            return _error(INVALID_PARAMS, "the request frame is not an object")
        token, method, params = frame.get("token"), frame.get("method"), frame.get("params")
        session = self._by_token.get(token) if isinstance(token, str) else None
        if session is None:
            return _error(INVALID_PARAMS, "unknown editor token")
        if not isinstance(method, str) or not isinstance(params, dict):
            return _error(INVALID_PARAMS, "method must be a string, params an object")
        if self._closed:
            return _error(INTERNAL_ERROR, "the editor disconnected")
        if self._calls >= MAX_CALLS:
            return _error(INTERNAL_ERROR, f"the editor has {MAX_CALLS} calls in flight already")
        self._calls += 1
        try:
            return await self._forward(reader, session, method, params)
        finally:
            self._calls -= 1

    async def _forward(
        self,
        reader: asyncio.StreamReader,
        session: _Session,
        method: str,
        params: dict[str, Any],
    ) -> dict[str, Any] | None:
        problem = _check(session, method, params)
        if problem is not None:
            return _error(INVALID_PARAMS, problem)
        terminal = params.get("terminalId")
        held = method == "terminal/create" or terminal in session.terminals
        if method in _TERMINAL_METHODS and not held:
            if method == "terminal/release":
                return {"result": None}  # ended already (session/cancel)
            return _error(INVALID_PARAMS, f"no open terminal {terminal!r} in this session")
        call = asyncio.ensure_future(self._request(method, {**params, "sessionId": session.key}))
        gone = asyncio.ensure_future(reader.read(1))  # the caller writes nothing more: EOF
        try:
            await asyncio.wait({call, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if not call.done() and method == "terminal/create":
            # The caller went away while the terminal was being made: end it once it exists.
            with contextlib.suppress(BaseException):
                async with asyncio.timeout(READ_TIMEOUT_S):
                    made = await call
                if isinstance(made, dict) and isinstance(made.get("terminalId"), str):
                    session.terminals.add(made["terminalId"])
                    await self._end_terminal(session, made["terminalId"])
            return None
        if not call.done():  # the caller went away (its run was cancelled): withdraw
            call.cancel()
            with contextlib.suppress(BaseException):
                await call
            if isinstance(terminal, str) and method != "terminal/output":
                await self._end_terminal(session, terminal)  # (a withdrawn poll is not)
            return None
        try:
            result = call.result()
        except RpcError as exc:
            return _error(exc.code, exc.message)
        if method == "terminal/create" and isinstance(result, dict):
            created = result.get("terminalId")
            if isinstance(created, str):
                session.terminals.add(created)
        elif method == "terminal/release" and isinstance(terminal, str):
            session.terminals.discard(terminal)
        return {"result": result}


def _check(session: _Session, method: str, params: dict[str, Any]) -> str | None:
    """Why the call is refused (``None``: it may go to the editor)."""
    if method not in EDITOR_METHODS:
        return f"{method!r} is not a call a run may make to the editor"
    offered = {
        "fs/read_text_file": session.read,
        "fs/write_text_file": session.write,
    }.get(method, session.terminal)
    if not offered:
        return f"the editor does not offer {method}"
    if method.startswith("fs/"):
        return _inside(session.cwd, params.get("path"), "path")
    if method == "terminal/create":
        cwd = params.get("cwd")
        return None if cwd is None else _inside(session.cwd, cwd, "cwd")
    return None


def _inside(root: str, path: object, name: str) -> str | None:
    if not isinstance(path, str) or not os.path.isabs(path):
        return f"{name} must be an absolute path"
    real = os.path.realpath(path)
    if os.path.commonpath([real, root]) != root:
        return f"{path} is outside the session's workspace {root}"
    return None


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}
