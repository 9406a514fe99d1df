"""The wire's params, one msgspec :class:`Params` struct per method, decoded once at the edge.

Each struct names its fields in camelCase on the wire (``rename="camel"``): the terminal
client's dialect (``chat.*``, ``sessions.*``) and the typed clients' ``port.*`` methods take the
same structs, and :class:`~lemon_control_plane.WebSocketSessionPort` builds its requests with
them. A ``null`` is an absent field (as the reference server reads one), except in a struct
whose ``keeps_nulls`` is set (a patch: ``null`` clears a setting).

:func:`decode` turns msgspec's refusal into the wire's own messages: a missing (or empty)
required field is ``INVALID_REQUEST`` ``Missing required fields: <name>``, a mistyped one
``INVALID_REQUEST`` ``Type errors: <name>: expected <type>, got <type>``, any other refused value
(an unknown enum member, a constraint) ``INVALID_PARAMS`` naming the field.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Final, TypeVar

import msgspec

from lemon_control_plane.errors import WireError

__all__ = [
    "AbortParams",
    "ApprovalParams",
    "CancelParams",
    "ChatSendParams",
    "CompactParams",
    "HistoryParams",
    "KeyParams",
    "LimitParams",
    "LogsTailParams",
    "NoParams",
    "Params",
    "PatchParams",
    "ResumeParams",
    "RunRequestParams",
    "RunsParams",
    "SteerParams",
    "SubmitParams",
    "SubscribeParams",
    "UsageCostParams",
    "WatchParams",
    "decode",
    "wire_params",
]

P = TypeVar("P", bound="Params")

#: A string that must be given and not be empty (an empty one reads as missing).
Required = Annotated[str, msgspec.Meta(min_length=1)]


class Params(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    """Base of every method's params (unknown fields are ignored, as the reference does)."""

    keeps_nulls: ClassVar[bool] = False
    #: Other spellings a client may send (legacy name -> wire name), read when the wire
    #: name is absent.
    aliases: ClassVar[dict[str, str]] = {}


class NoParams(Params):
    pass


class LimitParams(Params):
    limit: int | None = None


class KeyParams(Params):
    session_key: Required


class HistoryParams(Params):
    """``chat.history`` and ``port.transcript``."""

    session_key: Required
    limit: int | None = None
    before: int | None = None


class RunsParams(Params):
    limit: int | None = None
    since_ms: int | None = None


class UsageCostParams(Params):
    start_date: str | None = None
    end_date: str | None = None


class LogsTailParams(Params):
    limit: int | None = None
    level: str | None = None


class ChatSendParams(Params):
    """``chat.send``: ``message`` is the reference's other name of ``prompt``."""

    session_key: str | None = None
    prompt: str | None = None
    message: str | None = None
    queue_mode: str | None = None
    agent_id: str | None = None


class AbortParams(Params):
    """``chat.abort``: a run, else every run of a session."""

    run_id: str | None = None
    session_key: str | None = None


class CancelParams(Params):
    """``port.cancel``: exactly one of ``runId`` and ``sessionKey`` (the port says so)."""

    run_id: str | None = None
    session_key: str | None = None
    include_queued: bool = True


class SteerParams(Params):
    session_key: Required
    text: Required


class CompactParams(Params):
    session_key: Required
    instructions: str | None = None


class ApprovalParams(Params):
    """``exec.approval.resolve`` and ``port.resolveApproval``."""

    approval_id: Required
    decision: Required


class PatchParams(Params):
    """``sessions.patch`` and ``port.patch``: a field given sets the setting, ``null`` clears
    it, an absent one keeps it. ``toolPolicy`` and the legacy engine keys are refused by the
    handler (named, so the answer says which)."""

    keeps_nulls: ClassVar[bool] = True
    aliases: ClassVar[dict[str, str]] = {
        "thinking_level": "thinkingLevel",
        "engine_id": "engineId",
        "session_key": "sessionKey",
    }

    session_key: Required
    model: str | msgspec.UnsetType | None = msgspec.UNSET
    thinking_level: str | msgspec.UnsetType | None = msgspec.UNSET
    label: str | msgspec.UnsetType | None = msgspec.UNSET
    workspace: str | msgspec.UnsetType | None = msgspec.UNSET
    tool_policy: Any = msgspec.UNSET
    engine: Any = msgspec.UNSET
    engine_id: Any = msgspec.UNSET
    provider: Any = msgspec.UNSET


class SubscribeParams(Params):
    """``events.subscribe`` / ``events.unsubscribe``."""

    all: bool | None = None
    session_keys: list[Required] | None = None
    topics: list[Required] | None = None


class WatchParams(Params):
    """``port.watch`` (``sessionKey``: a session, or ``"*"`` for all) / ``port.unwatch``."""

    watch_id: Required
    session_key: str | None = None


class ResumeParams(Params):
    engine: str
    value: str


class RunRequestParams(Params):
    """A :class:`~lemon_core.execution.RunRequest` on the wire (``port.submit``'s
    ``request``); ``toolPolicy`` keeps the policy's own keys (``allow``, ``deny``,
    ``require_approval``), checked by :meth:`~lemon_core.execution.ToolPolicy.from_mapping`."""

    session_key: str
    prompt: str
    origin: str | None = None
    agent_id: str | None = None
    queue_mode: str | None = None
    model: str | None = None
    images: list[dict[str, Any]] | None = None
    run_id: str | None = None
    cwd: str | None = None
    resume: ResumeParams | None = None
    tool_policy: dict[str, Any] | None = None
    preapproved: list[str] | None = None
    meta: dict[str, Any] | None = None
    mcp_servers: list[dict[str, Any]] | None = None
    """The session's own MCP servers (:class:`~lemon_core.execution.McpServerSpec` fields),
    checked by :func:`~lemon_control_plane._port_wire.decode_request`."""
    editor: dict[str, Any] | None = None
    """The submitting editor's file system and terminal
    (:class:`~lemon_core.execution.EditorHandle` fields)."""


class SubmitParams(Params):
    request: RunRequestParams


def wire_params(params: Params) -> dict[str, Any]:
    """``params`` as a request frame's ``params`` object (absent fields left out)."""
    out: dict[str, Any] = msgspec.to_builtins(params)
    return out


# -- msgspec's refusals as the wire's messages -------------------------------------------------

_MISSING: Final = re.compile(
    r"^Object missing required field `(?P<name>[^`]+)`(?: - at `\$(?P<at>[^`]*)`)?$"
)
_EMPTY: Final = re.compile(r"^Expected `str` of length >= 1 - at `\$(?P<at>[^`]*)`$")
_TYPE: Final = re.compile(
    r"^Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`(?: - at `\$(?P<at>[^`]*)`)?$"
)
_AT: Final = re.compile(r" - at `\$(?P<at>[^`]*)`$")
_WANT: Final = {
    "str": "string",
    "int": "integer",
    "bool": "boolean",
    "float": "number",
    "array": "array",
    "object": "object",
}
_GOT: Final = {
    "str": "string",
    "int": "int",
    "bool": "bool",
    "float": "float",
    "array": "list",
    "object": "dict",
    "null": "null",
}


def _field(at: str | None, name: str | None = None) -> str:
    """``$.request.sessionKey`` -> ``request.sessionKey`` (``[0]`` indices kept)."""
    path = (at or "").lstrip(".")
    if name is not None:
        path = f"{path}.{name}" if path else name
    return path or "params"


def _label(want: str) -> str:
    kinds = [k.strip() for k in want.split("|") if k.strip() not in ("null", "")]
    return " or ".join(_WANT.get(k, k) for k in kinds) or want


def refusal(exc: msgspec.ValidationError) -> WireError:
    """The wire's error for params msgspec refused (see the module docstring)."""
    text = str(exc)
    if found := _MISSING.match(text):
        return WireError(
            "INVALID_REQUEST", f"Missing required fields: {_field(found['at'], found['name'])}"
        )
    if found := _EMPTY.match(text):
        return WireError("INVALID_REQUEST", f"Missing required fields: {_field(found['at'])}")
    if (found := _TYPE.match(text)) and found["got"] == "null":
        return WireError("INVALID_REQUEST", f"Missing required fields: {_field(found['at'])}")
    if found := _TYPE.match(text):
        got = _GOT.get(found["got"], found["got"])
        return WireError(
            "INVALID_REQUEST",
            f"Type errors: {_field(found['at'])}: expected {_label(found['want'])}, got {got}",
        )
    at = _AT.search(text)
    reason = _AT.sub("", text)
    where = _field(at["at"]) if at else "params"
    return WireError("INVALID_PARAMS", f"{where}: {reason}")


def decode(params: dict[str, Any], kind: type[P]) -> P:
    """``params`` (a request frame's object) as ``kind``, or the wire's refusal."""
    for legacy, name in kind.aliases.items():
        if legacy in params and name not in params:
            params = {**params, name: params[legacy]}
    if not kind.keeps_nulls:
        params = {k: v for k, v in params.items() if v is not None}
    try:
        return msgspec.convert(params, kind)
    except msgspec.ValidationError as exc:
        raise refusal(exc) from None
