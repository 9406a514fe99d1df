"""The methods the wire offers, each over the session port only.

Every handler takes the connection and the request's params and returns the ``res`` payload,
or raises :class:`~lemon_control_plane.WireError`. Params are checked before anything runs
(missing or mistyped fields are ``INVALID_REQUEST``, as the reference server answers).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from lemon_control_plane._connection import Connection
from lemon_control_plane._port_wire import decode_request, encode_receipt, port_payload
from lemon_control_plane._secondary import (
    MAX_USAGE_RUNS,
    ConfigView,
    day_range,
    day_start_ms,
    log_lines,
    redacted,
    run_row,
    usage_totals,
)
from lemon_control_plane._wire import history_message, model_parts, session_row, snapshot_payload
from lemon_control_plane.bridge import EventBridge
from lemon_control_plane.config import ControlPlaneConfig
from lemon_control_plane.errors import WireError
from lemon_core.events import ApprovalDecision
from lemon_core.execution import RouterUnavailableError, RunRequest, ToolPolicy
from lemon_core.runtime import ModelCatalog
from lemon_core.sessions import (
    THINKING_LEVELS,
    InvalidSessionKeyError,
    SessionPort,
    SessionSettings,
    check_session_key,
)

__all__ = ["LIMITS", "MAX_POSITION", "SCOPES", "Method", "Methods"]

SCOPES: Final = ("admin", "read", "write", "approvals", "pairing")
_DECISIONS: Final = {
    "approve_once": ApprovalDecision.APPROVE_ONCE,
    "approveOnce": ApprovalDecision.APPROVE_ONCE,
    "approve_session": ApprovalDecision.APPROVE_SESSION,
    "approveSession": ApprovalDecision.APPROVE_SESSION,
    "approve_agent": ApprovalDecision.APPROVE_AGENT,
    "approveAgent": ApprovalDecision.APPROVE_AGENT,
    "approve_global": ApprovalDecision.APPROVE_GLOBAL,
    "approveGlobal": ApprovalDecision.APPROVE_GLOBAL,
    "deny": ApprovalDecision.DENY,
}
_MAX_PROMPT_BYTES: Final = 512 * 1024
#: The origins a token without the admin scope may submit as (the daemon's own ingress,
#: webhook, cron, channels, names itself otherwise).
_CLIENT_ORIGINS: Final = frozenset({"cli", "control_plane", "tui", "web"})
#: Each listing method's ``limit``: (default, maximum). A larger limit answers the maximum.
LIMITS: Final = {
    "chat.history": (50, 200),
    "logs.tail": (100, 1000),
    "port.runs": (50, MAX_USAGE_RUNS),
    "port.sessions": (50, 500),
    "port.transcript": (50, 500),
    "runs.active.list": (50, 500),
    "runs.recent.list": (20, 500),
    "sessions.list": (50, 500),
}
#: The largest ``before`` / ``sinceMs`` passed on (the largest integer a JSON number holds
#: exactly); a larger one means the same "everything".
MAX_POSITION: Final = 2**53 - 1
#: ``sessions.patch`` keys the reference server refuses (engine selection moved elsewhere).
_LEGACY_PATCH_KEYS: Final = ("engine", "engineId", "engine_id", "provider")

Handler = Callable[[Connection, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Method:
    name: str
    scope: str | None  # None: public
    handler: Handler


def _missing(params: dict[str, Any], *names: str) -> None:
    absent = [n for n in names if params.get(n) in (None, "")]
    if absent:
        raise WireError("INVALID_REQUEST", f"Missing required fields: {', '.join(absent)}")


def _typed(params: dict[str, Any], name: str, kind: type | tuple[type, ...], label: str) -> Any:
    value = params.get(name)
    if value is None:
        return None
    if (isinstance(value, bool) and kind is int) or not isinstance(value, kind):
        got = type(value).__name__ if not isinstance(value, str) else "string"
        raise WireError("INVALID_REQUEST", f"Type errors: {name}: expected {label}, got {got}")
    return value


def _session_key(params: dict[str, Any]) -> str:
    _missing(params, "sessionKey")
    key = _typed(params, "sessionKey", str, "string")
    try:
        check_session_key(key)
    except ValueError as exc:
        raise WireError("INVALID_PARAMS", str(exc)) from None
    return str(key)


def _any_key(params: dict[str, Any]) -> str:
    """A session key as the port takes it: a malformed one is ``INVALID_PARAMS`` (the reason
    says what is wrong), never a failed method."""
    _missing(params, "sessionKey")
    key = str(_typed(params, "sessionKey", str, "string"))
    try:
        check_session_key(key)
    except InvalidSessionKeyError as exc:
        raise WireError("INVALID_PARAMS", str(exc)) from None
    return key


def _inside(path: str, root: str) -> bool:
    """Whether ``path`` (resolved, links followed) is ``root`` or below it."""
    if not os.path.isabs(path):
        return False
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def _limit(params: dict[str, Any], method: str) -> int:
    """``params.limit`` of ``method`` (:data:`LIMITS`): absent is the default, above the
    maximum is the maximum; a non-integer (a bool too) is ``INVALID_REQUEST`` (a type error, as
    the reference answers), below 1 ``INVALID_PARAMS``."""
    default, top = LIMITS[method]
    value: int | None = _typed(params, "limit", int, "integer")
    if value is None:
        return default
    if value < 1:
        raise WireError("INVALID_PARAMS", f"limit must be at least 1, got {_short_int(value)}")
    return min(top, value)


def _position(params: dict[str, Any], name: str) -> int | None:
    """An optional index or time (``before``, ``sinceMs``): at least 0, and above
    :data:`MAX_POSITION` taken as :data:`MAX_POSITION` (a store's integers are 64-bit)."""
    value: int | None = _typed(params, name, int, "integer")
    if value is None:
        return None
    if value < 0:
        raise WireError("INVALID_PARAMS", f"{name} must be at least 0, got {_short_int(value)}")
    return min(MAX_POSITION, value)


def _short_int(value: int) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"{text[:12]}...({len(text)} digits)"


class Methods:
    """The method table of one control plane (see the module docstring)."""

    def __init__(
        self,
        port: SessionPort,
        bridge: EventBridge,
        config: ControlPlaneConfig,
        status: Callable[[], dict[str, Any]],
        models: ModelCatalog | None = None,
        *,
        config_view: ConfigView | None = None,
    ) -> None:
        self._config_view = config_view
        self._port = port
        self._models = models
        self._bridge = bridge
        self._config = config
        self._status = status
        self._cwd = config.cwd or os.getcwd()
        self._started = time.monotonic()
        self.table: dict[str, Method] = {
            m.name: m
            for m in (
                Method("health", None, self.health),
                Method("status", "read", self.status),
                Method("usage.status", "read", self.usage_status),
                Method("usage.cost", "read", self.usage_cost),
                Method("runs.active.list", "read", self.runs_active_list),
                Method("runs.recent.list", "read", self.runs_recent_list),
                Method("logs.tail", "read", self.logs_tail),
                Method("chat.send", "write", self.chat_send),
                Method("chat.abort", "write", self.chat_abort),
                Method("chat.history", "read", self.chat_history),
                Method("sessions.list", "read", self.sessions_list),
                Method("sessions.active.list", "read", self.sessions_active_list),
                Method("sessions.active", "read", self.sessions_active_list),
                Method("session.detail", "read", self.session_detail),
                Method("sessions.snapshot", "read", self.sessions_snapshot),
                Method("sessions.patch", "admin", self.sessions_patch),
                Method("sessions.reset", "admin", self.sessions_reset),
                Method("sessions.delete", "admin", self.sessions_delete),
                Method("exec.approval.resolve", "approvals", self.approval_resolve),
                Method("exec.approvals.get", "approvals", self.approvals_get),
                Method("events.subscribe", "read", self.events_subscribe),
                Method("events.unsubscribe", "read", self.events_unsubscribe),
                Method("port.submit", "write", self.port_submit),
                Method("port.steer", "write", self.port_steer),
                Method("port.cancel", "write", self.port_cancel),
                Method("port.resolveApproval", "approvals", self.port_resolve),
                Method("port.snapshot", "read", self.port_snapshot),
                Method("port.sessions", "read", self.port_sessions),
                Method("port.transcript", "read", self.port_transcript),
                Method("port.statistics", "read", self.port_statistics),
                Method("port.compact", "write", self.port_compact),
                Method("port.settings", "read", self.port_settings),
                Method("port.runs", "read", self.port_runs),
                Method("port.patch", "admin", self.port_patch),
                Method("port.reset", "admin", self.port_reset),
                Method("port.delete", "admin", self.port_delete),
                # Answered by the connection's reader itself (no await between the request and
                # the subscription): see ControlPlane._read.
                Method("port.watch", "read", self._inline),
                Method("port.unwatch", "read", self._inline),
            )
        }
        if models is not None:  # advertised only where the runtime knows its models
            self.table["models.list"] = Method("models.list", "read", self.models_list)
        if config_view is not None:
            self.table["config.get"] = Method("config.get", "admin", self.config_get)

    # -- public -------------------------------------------------------------------------------

    async def health(self, conn: Connection, params: dict[str, Any]) -> Any:
        return {"ok": True, "uptime_ms": int((time.monotonic() - self._started) * 1000)}

    async def status(self, conn: Connection, params: dict[str, Any]) -> Any:
        status = self._status()
        today = await self._port.runs(
            limit=MAX_USAGE_RUNS, since_ms=day_start_ms(dt.datetime.now(dt.UTC).date())
        )
        status["runs"]["completed_today"] = len(today)
        status["runs"]["completedToday"] = len(today)
        return status

    # -- usage and runs -----------------------------------------------------------------------

    async def usage_status(self, conn: Connection, params: dict[str, Any]) -> Any:
        """Today's (UTC) runs, tokens, cost and providers, from the run history."""
        today = dt.datetime.now(dt.UTC).date()
        start = day_start_ms(today)
        runs = await self._port.runs(limit=MAX_USAGE_RUNS, since_ms=start)
        totals = usage_totals(runs)
        last = next((r.usage for r in runs if r.usage is not None), None)
        context = (
            None
            if last is None
            else last.input_tokens + last.cache_read_tokens + last.cache_write_tokens
        )
        tokens = totals["tokens"]
        return {
            "period": "today",
            "periodStart": start,
            "runs": totals["runs"],
            "tokens": tokens,
            "cost": totals["cost"],
            "quotas": None,
            "providers": totals["providers"],
            "contextTokens": context,
            "summary": {
                "status": "ok",
                "totalTokens": sum(tokens.values()),
                "contextTokens": context,
                "truncated": len(runs) >= MAX_USAGE_RUNS,
            },
        }

    async def usage_cost(self, conn: Connection, params: dict[str, Any]) -> Any:
        """``{startDate?, endDate?}`` (UTC dates, default the last 30 days): total cost, by
        day and by provider."""
        first, last = day_range(params.get("startDate"), params.get("endDate"))
        start, end = day_start_ms(first), day_start_ms(last + dt.timedelta(days=1))
        runs = [
            r
            for r in await self._port.runs(limit=MAX_USAGE_RUNS, since_ms=start)
            if r.finished_at_ms < end
        ]
        by_day: dict[str, list[Any]] = {}
        for run in runs:
            day = dt.datetime.fromtimestamp(run.finished_at_ms / 1000, dt.UTC).date().isoformat()
            by_day.setdefault(day, []).append(run)
        totals = usage_totals(runs)
        breakdown = [
            {"date": day, "cost": usage_totals(rs)["cost"], "runs": len(rs)}
            for day, rs in sorted(by_day.items())
        ]
        return {
            "startDate": first.isoformat(),
            "endDate": last.isoformat(),
            "totalCost": totals["cost"],
            "runs": totals["runs"],
            "tokens": totals["tokens"],
            "breakdown": breakdown,
            "providers": totals["providers"],
            "summary": {"total": totals["cost"], "truncated": len(runs) >= MAX_USAGE_RUNS},
        }

    async def runs_active_list(self, conn: Connection, params: dict[str, Any]) -> Any:
        rows = self._bridge.active_run_rows()[: _limit(params, "runs.active.list")]
        return {"runs": rows, "total": len(rows)}

    async def runs_recent_list(self, conn: Connection, params: dict[str, Any]) -> Any:
        rows = [run_row(r) for r in await self._port.runs(limit=_limit(params, "runs.recent.list"))]
        return {"runs": rows, "total": len(rows)}

    async def logs_tail(self, conn: Connection, params: dict[str, Any]) -> Any:
        """``{limit?, level?}``: the end of the daemon log, oldest first, secrets redacted."""
        path = Path(self._config.log_file) if self._config.log_file else None
        limit = _limit(params, "logs.tail")
        return await asyncio.to_thread(log_lines, path, limit=limit, level=params.get("level"))

    async def config_get(self, conn: Connection, params: dict[str, Any]) -> Any:
        """The effective configuration (secrets redacted) and the control plane's own."""
        assert self._config_view is not None
        cp = self._config
        return {
            "config": redacted(dict(self._config_view())),
            "controlPlane": {
                "host": cp.host,
                "port": cp.port,
                "cwd": self._cwd,
                "tokens": len(cp.token_hashes),
                "extraOrigins": sorted(cp.extra_origins),
                "requireApproval": sorted(cp.require_approval),
                "maxPayload": cp.max_payload,
                "connectionQueue": cp.connection_queue,
            },
        }

    async def models_list(self, conn: Connection, params: dict[str, Any]) -> Any:
        """The wire's ``models.list``: ``{models: [{id, provider, name, contextWindow,
        maxOutput, supportsThinking, supportsVision, supportsStreaming}], summary}``; ``id`` is
        the ``provider:model`` reference ``chat.send``'s ``model`` takes."""
        assert self._models is not None
        rows = [
            {
                "id": m.ref,
                "provider": m.provider,
                "name": m.name or m.id,
                "contextWindow": m.context_window,
                "maxOutput": m.max_output,
                "supportsThinking": m.reasoning,
                "supportsVision": False,
                "supportsStreaming": True,
                "default": m.default,
            }
            for m in self._models.models()
        ]
        default = next((r["id"] for r in rows if r["default"]), None)
        return {"models": rows, "summary": {"count": len(rows), "default": default}}

    # -- chat ---------------------------------------------------------------------------------

    async def chat_send(self, conn: Connection, params: dict[str, Any]) -> Any:
        if params.get("prompt") in (None, "") and isinstance(params.get("message"), str):
            params = {**params, "prompt": params["message"]}
        _missing(params, "sessionKey", "prompt")
        key = _session_key(params)
        prompt = _typed(params, "prompt", str, "string")
        mode = _typed(params, "queueMode", str, "string") or "collect"
        agent_id = _typed(params, "agentId", str, "string") or self._config.agent_id
        if len(prompt.encode("utf-8", "surrogatepass")) > _MAX_PROMPT_BYTES:
            raise WireError(
                "INVALID_PARAMS", f"the prompt is larger than {_MAX_PROMPT_BYTES} bytes"
            )
        if mode not in ("collect", "followup", "steer", "steer_backlog", "interrupt"):
            mode = "collect"
        self._bridge.follow(key)
        if mode == "steer":
            steered = await asyncio.wait_for(
                self._port.steer(key, prompt), self._config.submit_timeout_s
            )
            if steered.status == "accepted":
                # Taken by the running answer: its own id never completes, so answer with
                # the run that carries the text (the client leaves `busy` on that id's end).
                carrier = await self._carrier(key)
                return self._sent(carrier or steered.run_id or "", key, agent_id, mode, prompt)
            if steered.status == "queued" and steered.run_id is not None:
                return self._sent(steered.run_id, key, agent_id, mode, prompt)
            # Nothing runs: the prompt becomes a plain message.
            mode = "collect"
        request = RunRequest(
            origin="control_plane",
            session_key=key,
            prompt=prompt,
            agent_id=agent_id,
            queue_mode=mode,  # type: ignore[arg-type]  # checked against the modes above
            cwd=self._cwd,
            tool_policy=ToolPolicy(require_approval=self._config.require_approval),
        )
        try:
            receipt = await asyncio.wait_for(
                self._port.submit(request), self._config.submit_timeout_s
            )
        except TimeoutError:
            raise WireError("TIMEOUT", "the router did not answer the submission in time") from None
        except RouterUnavailableError as exc:
            raise WireError("UNAVAILABLE", str(exc)) from None
        except ValueError as exc:
            raise WireError("INVALID_PARAMS", str(exc)) from None
        if receipt.status == "rejected":
            raise WireError("CONFLICT", receipt.reason or "the session refused the message")
        return self._sent(receipt.merged_into or receipt.run_id, key, agent_id, mode, prompt)

    async def _carrier(self, key: str) -> str | None:
        """The run now active in ``key`` (as the bridge saw it start, else the snapshot)."""
        for run_id, session in self._bridge.active_runs().items():
            if session == key:
                return run_id
        snapshot = await self._bridge.snapshot(key)
        return snapshot.active.run_id if snapshot.active is not None else None

    @staticmethod
    def _sent(run_id: str, key: str, agent_id: str, mode: str, prompt: str) -> dict[str, Any]:
        return {
            "runId": run_id,
            "sessionKey": key,
            "summary": {
                "runId": run_id,
                "sessionKey": key,
                "agentId": agent_id,
                "queueMode": mode,
                "promptBytes": len(prompt.encode("utf-8", "surrogatepass")),
            },
        }

    async def chat_abort(self, conn: Connection, params: dict[str, Any]) -> Any:
        run_id = _typed(params, "runId", str, "string")
        if run_id:
            result = await self._port.cancel(run_id=run_id)
            return {"aborted": True, "runId": run_id, "cancelled": result.cancelled}
        if params.get("sessionKey") in (None, ""):
            raise WireError("INVALID_REQUEST", "Missing required fields: runId or sessionKey")
        key = _session_key(params)
        result = await self._port.cancel(session_key=key)
        return {"aborted": True, "sessionKey": key, "cancelled": result.cancelled}

    async def chat_history(self, conn: Connection, params: dict[str, Any]) -> Any:
        key = _session_key(params)
        limit = _limit(params, "chat.history")
        before = _position(params, "before")
        self._bridge.follow(key)
        page = await self._port.transcript(key, limit=limit, before=before)
        messages = [history_message(key, e) for e in page.entries]
        return {
            "sessionKey": key,
            "messages": messages,
            "more": page.more,
            "notice": page.notice,
            "summary": {"count": len(messages), "more": page.more},
        }

    # -- sessions -----------------------------------------------------------------------------

    async def sessions_list(self, conn: Connection, params: dict[str, Any]) -> Any:
        rows = [
            session_row(s) for s in await self._port.sessions(limit=_limit(params, "sessions.list"))
        ]
        return {
            "sessions": rows,
            "total": len(rows),
            "filters": {},
            "summary": {"count": len(rows)},
        }

    async def sessions_active_list(self, conn: Connection, params: dict[str, Any]) -> Any:
        found = await self._port.sessions(limit=500)
        rows = [session_row(s) for s in found if s.active]
        return {
            "sessions": rows,
            "total": len(rows),
            "filters": {"active": True},
            "summary": {"count": len(rows)},
        }

    async def session_detail(self, conn: Connection, params: dict[str, Any]) -> Any:
        key = _session_key(params)
        self._bridge.follow(key)
        settings = await self._port.settings(key)
        self._bridge.note_settings(key, settings.model, settings.thinking_level)
        ref = settings.model or self._config.default_model or self._catalog_default()
        provider, model = model_parts(ref)
        return {
            "sessionKey": key,
            "session": {
                "sessionKey": key,
                "model": model,
                "provider": provider,
                "contextWindow": self._context_window(ref),
                "modelSource": "session" if settings.model else "default",
                "modelOverride": settings.model,
                "thinkingLevel": settings.thinking_level,
                "label": settings.label,
                "engine": "lemon",
            },
        }

    def _catalog_default(self) -> str | None:
        if self._models is None:
            return None
        return next((m.ref for m in self._models.models() if m.default), None)

    def _context_window(self, ref: str | None) -> int | None:
        if ref is None or self._models is None:
            return None
        found = next((m for m in self._models.models() if m.ref == ref), None)
        return None if found is None else found.context_window

    async def sessions_patch(self, conn: Connection, params: dict[str, Any]) -> Any:
        """``{sessionKey, model?, thinkingLevel?, label?}``: a key given sets the setting
        (``null`` clears it); ``{success, sessionKey, summary: {patchedKeys}, session}``."""
        key = _session_key(params)
        legacy = [k for k in _LEGACY_PATCH_KEYS if k in params]
        if legacy:
            raise WireError(
                "INVALID_PARAMS",
                f"{', '.join(legacy)} cannot be patched: pick the model with `model` "
                "('<provider>:<model>', as models.list names it)",
            )
        changes: dict[str, Any] = {}
        for wire, name, label in (
            ("model", "model", "string"),
            ("thinkingLevel", "thinking_level", "string"),
            ("label", "label", "string"),
        ):
            if wire in params:
                changes[name] = _typed(params, wire, str, label)
        if "toolPolicy" in params:
            raise WireError("NOT_IMPLEMENTED", "toolPolicy cannot be patched on this daemon yet")
        if not changes:
            raise WireError(
                "INVALID_REQUEST", "Missing required fields: one of model, thinkingLevel, label"
            )
        level = changes.get("thinking_level")
        if level is not None and level not in THINKING_LEVELS:
            raise WireError(
                "INVALID_PARAMS",
                f"Invalid thinkingLevel {level!r}. Must be one of: {', '.join(THINKING_LEVELS)}",
            )
        try:
            settings = await self._port.patch(key, **changes)
        except ValueError as exc:
            raise WireError("INVALID_PARAMS", str(exc)) from None
        self._bridge.note_settings(key, settings.model, settings.thinking_level)
        wire_keys = {"model": "model", "thinking_level": "thinkingLevel", "label": "label"}
        return {
            "success": True,
            "sessionKey": key,
            "session": _settings_payload(settings),
            "summary": {"patchedKeys": sorted(wire_keys[k] for k in changes)},
        }

    async def sessions_reset(self, conn: Connection, params: dict[str, Any]) -> Any:
        key = _session_key(params)
        change = await self._port.reset(key)
        if not change.done:
            raise WireError("CONFLICT", change.reason or "the session could not be reset")
        return {"success": True, "sessionKey": key, "summary": {"reset": True}}

    async def sessions_delete(self, conn: Connection, params: dict[str, Any]) -> Any:
        key = _session_key(params)
        change = await self._port.delete(key)
        if not change.done:
            raise WireError("CONFLICT", change.reason or "the session could not be deleted")
        return {"deleted": True, "sessionKey": key, "summary": {"deleted": True}}

    async def sessions_snapshot(self, conn: Connection, params: dict[str, Any]) -> Any:
        key = _session_key(params)
        self._bridge.follow(key)
        return snapshot_payload(await self._bridge.snapshot(key))

    # -- approvals ----------------------------------------------------------------------------

    async def approval_resolve(self, conn: Connection, params: dict[str, Any]) -> Any:
        _missing(params, "approvalId", "decision")
        approval_id = _typed(params, "approvalId", str, "string")
        raw = _typed(params, "decision", str, "string")
        decision = _DECISIONS.get(raw)
        if decision is None:
            raise WireError(
                "INVALID_REQUEST",
                "Invalid decision. Must be one of: approve_once, approve_session, "
                "approve_agent, approve_global, deny",
            )
        result = await self._port.resolve_approval(approval_id, decision)
        if not result.resolved:
            raise WireError("CONFLICT", result.reason or "the approval is no longer pending")
        return {"resolved": True, "approvalId": approval_id, "decision": decision.value}

    # -- subscriptions ------------------------------------------------------------------------

    async def events_subscribe(self, conn: Connection, params: dict[str, Any]) -> Any:
        """Narrow this connection to some sessions (``sessionKeys``); ``all: true`` widens it
        back to every event."""
        if params.get("all") is True:
            conn.sessions = None
            return {"mode": "all", "sessionKeys": None}
        keys = params.get("sessionKeys")
        if (
            not isinstance(keys, list)
            or not keys
            or not all(isinstance(k, str) and k for k in keys)
        ):
            raise WireError(
                "INVALID_REQUEST", "Type errors: sessionKeys: expected a non-empty list of strings"
            )
        if len(keys) > self._config.max_sessions:
            raise WireError("INVALID_PARAMS", f"at most {self._config.max_sessions} sessions")
        for key in keys:
            self._bridge.follow(key)
        conn.sessions = (conn.sessions or frozenset()) | frozenset(keys)
        return {"mode": "sessions", "sessionKeys": sorted(conn.sessions)}

    async def events_unsubscribe(self, conn: Connection, params: dict[str, Any]) -> Any:
        keys = params.get("sessionKeys")
        if conn.sessions is None:
            return {"mode": "all", "sessionKeys": None}
        if isinstance(keys, list):
            conn.sessions = conn.sessions - frozenset(k for k in keys if isinstance(k, str))
        else:
            conn.sessions = frozenset()
        return {"mode": "sessions", "sessionKeys": sorted(conn.sessions)}

    # -- the port itself (typed clients) -----------------------------------------------------

    async def _inline(self, conn: Connection, params: dict[str, Any]) -> Any:
        raise WireError("INTERNAL_ERROR", "answered by the reader")

    def _authorised(self, conn: Connection, request: RunRequest) -> RunRequest:
        """``request`` as this connection may submit it, else ``FORBIDDEN``: a client's
        tool policy only narrows the daemon's (the executor takes it so); skipping approval
        questions (``preapproved``) needs the approvals or admin scope; without admin the
        run stays in the daemon's workspace, under the daemon's agent, as a client origin."""
        scopes = conn.scopes
        if request.preapproved and not scopes & {"approvals", "admin"}:
            raise WireError(
                "FORBIDDEN",
                "skipping approval questions (preapproved) needs a token with the approvals "
                "or admin scope",
            )
        if "admin" in scopes:
            return request
        if request.origin not in _CLIENT_ORIGINS:
            raise WireError(
                "FORBIDDEN",
                f"origin {request.origin!r} is the daemon's own; a token without the admin "
                f"scope submits as one of {', '.join(sorted(_CLIENT_ORIGINS))}",
            )
        if request.agent_id != self._config.agent_id:
            raise WireError(
                "FORBIDDEN",
                f"agent {request.agent_id!r} needs a token with the admin scope (this "
                f"daemon's agent is {self._config.agent_id!r})",
            )
        if request.cwd is None:
            return replace(request, cwd=self._cwd)
        if not _inside(request.cwd, self._cwd):
            raise WireError(
                "FORBIDDEN",
                f"cwd {request.cwd!r} is outside the daemon's workspace {self._cwd}; only a "
                "token with the admin scope runs elsewhere",
            )
        return request

    async def port_submit(self, conn: Connection, params: dict[str, Any]) -> Any:
        request = self._authorised(conn, decode_request(params.get("request")))
        try:
            receipt = await self._port.submit(request)
        except RouterUnavailableError as exc:
            raise WireError("UNAVAILABLE", str(exc)) from None
        except ValueError as exc:
            raise WireError("INVALID_PARAMS", str(exc)) from None
        return encode_receipt(receipt)

    async def port_steer(self, conn: Connection, params: dict[str, Any]) -> Any:
        key = _any_key(params)
        _missing(params, "text")
        text = _typed(params, "text", str, "string")
        return port_payload(await self._port.steer(key, text))

    async def port_cancel(self, conn: Connection, params: dict[str, Any]) -> Any:
        run_id = _typed(params, "runId", str, "string")
        key = _typed(params, "sessionKey", str, "string")
        include = _typed(params, "includeQueued", bool, "boolean")
        try:
            result = await self._port.cancel(
                run_id=run_id, session_key=key, include_queued=True if include is None else include
            )
        except ValueError as exc:
            raise WireError("INVALID_PARAMS", str(exc)) from None
        return port_payload(result)

    async def port_resolve(self, conn: Connection, params: dict[str, Any]) -> Any:
        _missing(params, "approvalId", "decision")
        approval_id = _typed(params, "approvalId", str, "string")
        decision = _typed(params, "decision", str, "string")
        try:
            result = await self._port.resolve_approval(approval_id, decision)
        except ValueError as exc:
            raise WireError("INVALID_PARAMS", str(exc)) from None
        return port_payload(result)

    async def port_snapshot(self, conn: Connection, params: dict[str, Any]) -> Any:
        return port_payload(await self._port.snapshot(_any_key(params)))

    async def port_sessions(self, conn: Connection, params: dict[str, Any]) -> Any:
        return port_payload(await self._port.sessions(limit=_limit(params, "port.sessions")))

    async def port_transcript(self, conn: Connection, params: dict[str, Any]) -> Any:
        key = _any_key(params)
        limit = _limit(params, "port.transcript")
        before = _position(params, "before")
        page = await self._port.transcript(key, limit=limit, before=before)
        return port_payload(page)

    async def port_compact(self, conn: Connection, params: dict[str, Any]) -> Any:
        key = _any_key(params)
        instructions = _typed(params, "instructions", str, "string")
        return port_payload(await self._port.compact(key, instructions=instructions))

    async def port_runs(self, conn: Connection, params: dict[str, Any]) -> Any:
        since = _position(params, "sinceMs")
        runs = await self._port.runs(limit=_limit(params, "port.runs"), since_ms=since)
        return port_payload(runs)

    async def port_settings(self, conn: Connection, params: dict[str, Any]) -> Any:
        return port_payload(await self._port.settings(_any_key(params)))

    async def port_patch(self, conn: Connection, params: dict[str, Any]) -> Any:
        key = _any_key(params)
        changes: dict[str, Any] = {}
        for name in ("model", "label", "thinking_level"):
            if name in params:
                changes[name] = _typed(params, name, str, "string")
        try:
            settings = await self._port.patch(key, **changes)
        except ValueError as exc:
            raise WireError("INVALID_PARAMS", str(exc)) from None
        self._bridge.note_settings(key, settings.model, settings.thinking_level)
        return port_payload(settings)

    async def port_reset(self, conn: Connection, params: dict[str, Any]) -> Any:
        return port_payload(await self._port.reset(_any_key(params)))

    async def port_delete(self, conn: Connection, params: dict[str, Any]) -> Any:
        return port_payload(await self._port.delete(_any_key(params)))

    async def port_statistics(self, conn: Connection, params: dict[str, Any]) -> Any:
        return port_payload(self._port.statistics())

    async def approvals_get(self, conn: Connection, params: dict[str, Any]) -> Any:
        pending = self._bridge.pending_approvals()
        # The terminal client's resync reads `approvals[]` entries with an approvalId.
        return {"policy": {}, "approvals": pending, "pending": pending}


def _settings_payload(s: SessionSettings) -> dict[str, Any]:
    return {
        "model": s.model,
        "thinkingLevel": s.thinking_level,
        "label": s.label,
        "updatedAtMs": s.updated_at_ms,
    }
