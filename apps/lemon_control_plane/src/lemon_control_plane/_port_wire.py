"""The session port itself on the wire (``port.*`` methods, ``port.event`` events), for typed
clients (:class:`~lemon_control_plane.client.WebSocketSessionPort`).

The terminal client's methods are a projection; these carry the port's own records, encoded by
their msgspec schema (the records are the port's public, versioned types): ``port.submit``,
``port.steer``, ``port.cancel``, ``port.resolveApproval``, ``port.snapshot``, ``port.sessions``,
``port.transcript``, ``port.statistics``, ``port.settings``, ``port.patch``, ``port.reset``,
``port.delete``, ``port.runs``, ``port.watch`` / ``port.unwatch``. A watch is one
``SessionPort.watch`` (``SessionPort.watch_all`` for the session key ``"*"``) on the server,
pumped to this connection only as ``port.event`` frames ``{watchId, event}``; it ends after a
``StreamOverflow`` (as the port's streams do) or when the connection closes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any, Final

import msgspec

from lemon_control_plane._connection import Connection
from lemon_control_plane._frames import encode
from lemon_control_plane._params import ResumeParams, RunRequestParams, wire_params
from lemon_control_plane.errors import WireError
from lemon_core.execution import (
    EditorHandle,
    ExecutionContractError,
    McpServerSpec,
    Receipt,
    ResumeToken,
    RunRequest,
    ToolPolicy,
    check_mcp_servers,
    check_preapproved,
)
from lemon_core.sessions import (
    ALL_SESSIONS,
    SessionPort,
    SessionStream,
    SessionStreamClosedError,
    StreamOverflow,
)

__all__ = [
    "PORT_METHODS",
    "PortWatches",
    "decode_request",
    "encode_receipt",
    "encode_request",
    "request_params",
]

_EVENT: Final = encode("port.event")
PORT_METHODS: Final = (
    "port.cancel",
    "port.compact",
    "port.delete",
    "port.patch",
    "port.reset",
    "port.resolveApproval",
    "port.runs",
    "port.sessions",
    "port.settings",
    "port.snapshot",
    "port.statistics",
    "port.steer",
    "port.submit",
    "port.transcript",
    "port.unwatch",
    "port.watch",
)
_MAX_WATCHES: Final = 64


def request_params(r: RunRequest) -> RunRequestParams:
    """``r`` as ``port.submit``'s ``request`` struct (what the typed client sends)."""
    policy = r.tool_policy
    return RunRequestParams(
        origin=r.origin,
        session_key=r.session_key,
        prompt=r.prompt,
        agent_id=r.agent_id,
        queue_mode=r.queue_mode,
        model=r.model,
        images=[dict(i) for i in r.images],
        run_id=r.run_id,
        cwd=r.cwd,
        resume=None
        if r.resume is None
        else ResumeParams(engine=r.resume.engine, value=r.resume.value),
        tool_policy=None
        if policy is None
        else {
            "allow": None if policy.allow is None else sorted(policy.allow),
            "deny": sorted(policy.deny),
            "require_approval": sorted(policy.require_approval),
        },
        preapproved=sorted(r.preapproved),
        meta=dict(r.meta),
        mcp_servers=[msgspec.to_builtins(s) for s in r.mcp_servers] or None,
        editor=None if r.editor is None else msgspec.to_builtins(r.editor),
    )


def encode_request(r: RunRequest) -> dict[str, Any]:
    """``r`` as wire JSON (``port.submit``'s ``request``)."""
    return wire_params(request_params(r))


def decode_request(data: RunRequestParams) -> RunRequest:
    """The :class:`RunRequest` ``data`` describes; a value the contract refuses raises its
    own error (``ExecutionContractError``, mapped to ``INVALID_PARAMS``)."""
    resume = data.resume
    return RunRequest(
        origin=data.origin or "control_plane",
        session_key=data.session_key,
        prompt=data.prompt,
        agent_id=data.agent_id or "default",
        queue_mode=data.queue_mode or "collect",  # type: ignore[arg-type]  # RunRequest checks it
        model=data.model,
        images=tuple(data.images or ()),
        run_id=data.run_id,
        cwd=data.cwd,
        resume=None if resume is None else ResumeToken(engine=resume.engine, value=resume.value),
        tool_policy=None if data.tool_policy is None else ToolPolicy.from_mapping(data.tool_policy),
        preapproved=check_preapproved(data.preapproved or ()),
        meta=dict(data.meta or {}),
        mcp_servers=_mcp_servers(data.mcp_servers or ()),
        editor=_editor(data.editor),
    )


def _editor(value: Mapping[str, Any] | None) -> EditorHandle | None:
    """``editor`` as a record; a bad one raises ``ExecutionContractError`` (``INVALID_PARAMS``)."""
    if value is None:
        return None
    try:
        return msgspec.convert(value, EditorHandle)
    except msgspec.ValidationError as exc:
        raise ExecutionContractError(f"editor: {exc}") from None


def _mcp_servers(values: Sequence[Mapping[str, Any]]) -> tuple[McpServerSpec, ...]:
    """``mcpServers`` as records; a bad definition raises ``ExecutionContractError`` naming
    the server and the field (mapped to ``INVALID_PARAMS``)."""
    out: list[McpServerSpec] = []
    for index, value in enumerate(values):
        try:
            out.append(msgspec.convert(value, McpServerSpec))
        except msgspec.ValidationError as exc:
            raise ExecutionContractError(f"mcpServers[{index}]: {exc}") from None
    return check_mcp_servers(out)


def encode_receipt(r: Receipt) -> dict[str, Any]:
    return asdict(r)


class PortWatches:
    """The ``port.watch`` streams of one connection, each pumped by a task this object owns."""

    def __init__(self, port: SessionPort, conn: Connection) -> None:
        self._port = port
        self._conn = conn
        self._watches: dict[str, tuple[SessionStream, asyncio.Task[None]]] = {}

    def watch(self, watch_id: str, session_key: str) -> None:
        """Loop-only and without awaiting: the subscription exists when this returns."""
        if watch_id in self._watches:
            raise WireError("CONFLICT", f"watch {watch_id!r} exists")
        if len(self._watches) >= _MAX_WATCHES:
            raise WireError("RATE_LIMITED", f"at most {_MAX_WATCHES} watches per connection")
        stream = (
            self._port.watch_all() if session_key == ALL_SESSIONS else self._port.watch(session_key)
        )
        task = asyncio.get_running_loop().create_task(self._pump(watch_id, stream))
        self._watches[watch_id] = (stream, task)

    def unwatch(self, watch_id: str) -> bool:
        found = self._watches.pop(watch_id, None)
        if found is None:
            return False
        found[0].close()
        found[1].cancel()
        return True

    async def _pump(self, watch_id: str, stream: SessionStream) -> None:
        wid = encode(watch_id)
        try:
            while True:
                try:
                    event = await stream.get()
                except SessionStreamClosedError:
                    return
                body = (
                    b'{"watchId":' + wid + b',"event":' + encode(msgspec.to_builtins(event)) + b"}"
                )
                self._conn.push_event(_EVENT, body)
                if isinstance(event, StreamOverflow):
                    return
        finally:
            self._watches.pop(watch_id, None)
            stream.close()

    async def aclose(self) -> None:
        tasks = []
        for stream, task in self._watches.values():
            stream.close()
            task.cancel()
            tasks.append(task)
        self._watches.clear()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)


def port_payload(value: object) -> Any:
    """A port record (msgspec struct, or a list of them) as wire JSON, by its schema."""
    return msgspec.to_builtins(value)
