"""The methods the wire offers, each over the session port only.

The table is one :class:`Method` per name: its scope, its params struct
(:mod:`lemon_control_plane._params`, decoded once by the server before the handler runs) and the
handler, which takes the connection and the typed params and returns the ``res`` payload. Errors
are not caught here: the server maps whatever a handler raises once, by class
(:mod:`lemon_control_plane._error_map`).

Two dialects share the operations: the terminal client's (``chat.*``, ``sessions.*``,
``session.detail``, ``exec.approval.resolve``: Lemon's wire, camelCase projections) and the
typed clients' ``port.*`` (the port's own records). Both take the same params structs and call
the same operations (:meth:`Methods.patch`, :meth:`Methods.submit`, :meth:`Methods.resolve`...);
a dialect only shapes the answer.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, Generic, TypeVar

import msgspec

from lemon_control_plane._connection import Connection
from lemon_control_plane._params import (
    AbortParams,
    ApprovalParams,
    CancelParams,
    ChatSendParams,
    CompactParams,
    HistoryParams,
    KeyParams,
    LimitParams,
    LogsTailParams,
    NoParams,
    Params,
    PatchParams,
    RunsParams,
    SteerParams,
    SubmitParams,
    SubscribeParams,
    UsageCostParams,
)
from lemon_control_plane._port_wire import decode_request, encode_receipt, port_payload
from lemon_control_plane._results import (
    ApprovalResolved,
    ChatSent,
    DetailSummary,
    Health,
    PatchSummary,
    SentSummary,
    SessionDetail,
    SessionPatched,
    SettingsView,
)
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
from lemon_control_plane.bridge import TOPIC_SCOPES, EventBridge
from lemon_control_plane.config import ControlPlaneConfig
from lemon_control_plane.errors import WireError
from lemon_core.approvals import ExecApprovals
from lemon_core.capabilities import ModelCatalog, ModelInfo
from lemon_core.cwd import is_within
from lemon_core.events import ApprovalDecision
from lemon_core.execution import Receipt, RunRequest, ToolPolicy
from lemon_core.run_aborts import RunAborts
from lemon_core.sessions import (
    THINKING_LEVELS,
    ApprovalResult,
    CancelResult,
    SessionPort,
    SessionSettings,
    SessionSummary,
    check_session_key,
)
from lemon_core.store import StoreError

__all__ = ["LIMITS", "MAX_POSITION", "SCOPES", "Method", "Methods"]

_log = logging.getLogger(__name__)

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
_QUEUE_MODES: Final = ("collect", "followup", "steer", "steer_backlog", "interrupt")
#: ``session.detail``'s runs: at most this many of the session's, found among the daemon's
#: newest ``_DETAIL_RUNS_SCANNED`` runs (``runCount`` is exact: it is the session index's).
_DETAIL_RUNS: Final = 20
_DETAIL_RUNS_SCANNED: Final = 200

P = TypeVar("P", bound=Params)


@dataclass(frozen=True, slots=True)
class Method(Generic[P]):
    """One method: its ``name``, the ``scope`` a connection needs (``None``: public), the
    ``params`` struct its request is decoded into and the ``handler`` taking them."""

    name: str
    scope: str | None
    params: type[P]
    handler: Callable[[Connection, P], Awaitable[Any]]


def _missing(*fields: tuple[str, object]) -> None:
    absent = [name for name, value in fields if value in (None, "")]
    if absent:
        raise WireError("INVALID_REQUEST", f"Missing required fields: {', '.join(absent)}")


def _inside(path: str, root: str) -> bool:
    """Whether ``path``, an absolute path (resolved, links followed), is ``root`` or below it
    (:func:`lemon_core.cwd.is_within`; a relative or ``~`` path is refused)."""
    return os.path.isabs(path) and is_within(path, root)


def _limit(value: int | None, method: str) -> int:
    """``params.limit`` of ``method`` (:data:`LIMITS`): absent is the default, above the
    maximum is the maximum, below 1 ``INVALID_PARAMS`` (a non-integer never decodes)."""
    default, top = LIMITS[method]
    if value is None:
        return default
    if value < 1:
        raise WireError("INVALID_PARAMS", f"limit must be at least 1, got {_short_int(value)}")
    return min(top, value)


def _position(value: int | None, name: str) -> int | None:
    """An optional index or time (``before``, ``sinceMs``): at least 0, and above
    :data:`MAX_POSITION` taken as :data:`MAX_POSITION` (a store's integers are 64-bit)."""
    if value is None:
        return None
    if value < 0:
        raise WireError("INVALID_PARAMS", f"{name} must be at least 0, got {_short_int(value)}")
    return min(MAX_POSITION, value)


def _short_int(value: int) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"{text[:12]}...({len(text)} digits)"


def _decision(raw: str) -> ApprovalDecision:
    decision = _DECISIONS.get(raw)
    if decision is None:
        raise WireError(
            "INVALID_REQUEST",
            "Invalid decision. Must be one of: approve_once, approve_session, "
            "approve_agent, approve_global, deny",
        )
    return decision


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
        approvals: ExecApprovals | None = None,
        run_aborts: Callable[[], RunAborts | None] | None = None,
    ) -> None:
        self._config_view = config_view
        self._run_aborts = run_aborts or (lambda: None)
        self._approvals = approvals
        self._port = port
        self._models = models
        self._bridge = bridge
        self._config = config
        self._status = status
        self._cwd = config.cwd or os.getcwd()
        self._started = time.monotonic()
        methods: list[Method[Any]] = [
            Method("health", None, NoParams, self.health),
            Method("status", "read", NoParams, self.status),
            Method("usage.status", "read", NoParams, self.usage_status),
            Method("usage.cost", "read", UsageCostParams, self.usage_cost),
            Method("runs.active.list", "read", LimitParams, self.runs_active_list),
            Method("runs.recent.list", "read", LimitParams, self.runs_recent_list),
            Method("logs.tail", "read", LogsTailParams, self.logs_tail),
            # Lemon's dialect (the terminal client's wire).
            Method("chat.send", "write", ChatSendParams, self.chat_send),
            Method("chat.abort", "write", AbortParams, self.chat_abort),
            Method("chat.history", "read", HistoryParams, self.chat_history),
            Method("sessions.list", "read", LimitParams, self.sessions_list),
            Method("sessions.active.list", "read", NoParams, self.sessions_active_list),
            Method("sessions.active", "read", NoParams, self.sessions_active_list),
            Method("session.detail", "read", KeyParams, self.session_detail),
            Method("sessions.snapshot", "read", KeyParams, self.sessions_snapshot),
            Method("sessions.patch", "admin", PatchParams, self.sessions_patch),
            Method("sessions.reset", "admin", KeyParams, self.sessions_reset),
            Method("sessions.delete", "admin", KeyParams, self.sessions_delete),
            Method("exec.approval.resolve", "approvals", ApprovalParams, self.approval_resolve),
            Method("exec.approvals.get", "approvals", NoParams, self.approvals_get),
            Method("events.subscribe", "read", SubscribeParams, self.events_subscribe),
            Method("events.unsubscribe", "read", SubscribeParams, self.events_unsubscribe),
            # The port's own dialect (typed clients).
            Method("port.submit", "write", SubmitParams, self.port_submit),
            Method("port.steer", "write", SteerParams, self.port_steer),
            Method("port.cancel", "write", CancelParams, self.port_cancel),
            Method("port.resolveApproval", "approvals", ApprovalParams, self.port_resolve),
            Method("port.snapshot", "read", KeyParams, self.port_snapshot),
            Method("port.sessions", "read", LimitParams, self.port_sessions),
            Method("port.transcript", "read", HistoryParams, self.port_transcript),
            Method("port.statistics", "read", NoParams, self.port_statistics),
            Method("port.compact", "write", CompactParams, self.port_compact),
            Method("port.settings", "read", KeyParams, self.port_settings),
            Method("port.runs", "read", RunsParams, self.port_runs),
            Method("port.patch", "admin", PatchParams, self.port_patch),
            Method("port.reset", "admin", KeyParams, self.port_reset),
            Method("port.delete", "admin", KeyParams, self.port_delete),
            # Answered by the connection's reader itself (no await between the request and
            # the subscription): see ControlPlane._read.
            Method("port.watch", "read", NoParams, self._inline),
            Method("port.unwatch", "read", NoParams, self._inline),
        ]
        if models is not None:  # advertised only where the runtime knows its models
            methods.append(Method("models.list", "read", NoParams, self.models_list))
        if config_view is not None:
            methods.append(Method("config.get", "admin", NoParams, self.config_get))
        self.table: dict[str, Method[Any]] = {m.name: m for m in methods}

    # -- public -------------------------------------------------------------------------------

    async def health(self, conn: Connection, params: NoParams) -> Health:
        return Health(ok=True, uptime_ms=int((time.monotonic() - self._started) * 1000))

    async def status(self, conn: Connection, params: NoParams) -> Any:
        status = self._status()
        today = await self._port.runs(
            limit=MAX_USAGE_RUNS, since_ms=day_start_ms(dt.datetime.now(dt.UTC).date())
        )
        status["runs"]["completed_today"] = len(today)
        status["runs"]["completedToday"] = len(today)
        return status

    # -- usage and runs -----------------------------------------------------------------------

    async def usage_status(self, conn: Connection, params: NoParams) -> Any:
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

    async def usage_cost(self, conn: Connection, params: UsageCostParams) -> Any:
        """``{startDate?, endDate?}`` (UTC dates, default the last 30 days): total cost, by
        day and by provider."""
        first, last = day_range(params.start_date, params.end_date)
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

    async def runs_active_list(self, conn: Connection, params: LimitParams) -> Any:
        rows = self._bridge.active_run_rows()[: _limit(params.limit, "runs.active.list")]
        return {"runs": rows, "total": len(rows)}

    async def runs_recent_list(self, conn: Connection, params: LimitParams) -> Any:
        rows = [
            run_row(r)
            for r in await self._port.runs(limit=_limit(params.limit, "runs.recent.list"))
        ]
        return {"runs": rows, "total": len(rows)}

    async def logs_tail(self, conn: Connection, params: LogsTailParams) -> Any:
        """``{limit?, level?}``: the end of the daemon log, oldest first, secrets redacted."""
        path = Path(self._config.log_file) if self._config.log_file else None
        limit = _limit(params.limit, "logs.tail")
        return await asyncio.to_thread(log_lines, path, limit=limit, level=params.level)

    async def config_get(self, conn: Connection, params: NoParams) -> Any:
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

    async def models_list(self, conn: Connection, params: NoParams) -> Any:
        """The wire's ``models.list``: ``{models: [{id, provider, name, contextWindow,
        maxOutput, supportsThinking, supportsVision, supportsStreaming, available,
        unavailableReason?}], summary}``; ``id`` is the ``provider:model`` reference
        ``chat.send``'s ``model`` takes (every configured provider's models are listed); a
        model that cannot run as configured has ``available: false`` and says why (the
        missing key's variable)."""
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
                "available": not m.unavailable,
                **({"unavailableReason": m.unavailable} if m.unavailable else {}),
            }
            for m in self._models.models()
        ]
        default = next((r["id"] for r in rows if r["default"]), None)
        return {"models": rows, "summary": {"count": len(rows), "default": default}}

    # -- the operations both dialects share -------------------------------------------------

    async def submit(self, request: RunRequest) -> Receipt:
        """Submit ``request`` through the port (``submit_timeout_s`` bounds the answer)."""
        return await asyncio.wait_for(self._port.submit(request), self._config.submit_timeout_s)

    async def patch(self, params: PatchParams) -> SessionSettings:
        """Change a session's settings (``params``: a field given sets, ``null`` clears);
        the legacy engine keys and ``toolPolicy`` are refused by name."""
        check_session_key(params.session_key)
        legacy = [
            wire
            for wire, value in (
                ("engine", params.engine),
                ("engineId", params.engine_id),
                ("provider", params.provider),
            )
            if value is not msgspec.UNSET
        ]
        if legacy:
            raise WireError(
                "INVALID_PARAMS",
                f"{', '.join(legacy)} cannot be patched: pick the model with `model` "
                "('<provider>:<model>', as models.list names it)",
            )
        if params.tool_policy is not msgspec.UNSET:
            raise WireError("NOT_IMPLEMENTED", "toolPolicy cannot be patched on this daemon yet")
        level = params.thinking_level
        if isinstance(level, str) and level not in THINKING_LEVELS:
            raise WireError(
                "INVALID_PARAMS",
                f"Invalid thinkingLevel {level!r}: unknown thinking level. Must be one of: "
                + ", ".join(THINKING_LEVELS),
            )
        settings = await self._port.patch(
            params.session_key,
            model=params.model,
            label=params.label,
            thinking_level=level,  # type: ignore[arg-type]  # checked above
            workspace=params.workspace,
        )
        self._bridge.note_settings(params.session_key, settings.model, settings.thinking_level)
        return settings

    async def resolve(self, approval_id: str, decision: ApprovalDecision | str) -> ApprovalResult:
        return await self._port.resolve_approval(approval_id, decision)

    async def settings(self, session_key: str) -> SessionSettings:
        check_session_key(session_key)
        settings = await self._port.settings(session_key)
        self._bridge.note_settings(session_key, settings.model, settings.thinking_level)
        return settings

    async def workspace(self, session_key: str) -> str:
        """Where the session's runs start: its own workspace (``sessions.patch``, admin),
        else the daemon's (``cwd``). A store that cannot be read leaves the daemon's: the run
        then reports the store itself (as the router does for a session's model)."""
        try:
            settings = await self.settings(session_key)
        except StoreError:
            return self._cwd
        return settings.workspace or self._cwd

    # -- chat (Lemon's dialect) ---------------------------------------------------------------

    async def chat_send(self, conn: Connection, params: ChatSendParams) -> Any:
        prompt = params.prompt or params.message
        _missing(("sessionKey", params.session_key), ("prompt", prompt))
        key = params.session_key
        assert key is not None
        assert prompt is not None
        check_session_key(key)
        mode = params.queue_mode or "collect"
        agent_id = params.agent_id or self._config.agent_id
        if len(prompt.encode("utf-8", "surrogatepass")) > _MAX_PROMPT_BYTES:
            raise WireError(
                "INVALID_PARAMS", f"the prompt is larger than {_MAX_PROMPT_BYTES} bytes"
            )
        if mode not in _QUEUE_MODES:
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
            cwd=await self.workspace(key),
            tool_policy=ToolPolicy(require_approval=self._config.require_approval),
        )
        receipt = await self.submit(request)
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
    def _sent(run_id: str, key: str, agent_id: str, mode: str, prompt: str) -> ChatSent:
        return ChatSent(
            run_id=run_id,
            session_key=key,
            summary=SentSummary(
                run_id=run_id,
                session_key=key,
                agent_id=agent_id,
                queue_mode=mode,
                prompt_bytes=len(prompt.encode("utf-8", "surrogatepass")),
            ),
        )

    async def _cancel_run(self, run_id: str) -> CancelResult:
        """Cancel ``run_id``: through the app that started it when it says it is one of its
        runs (``RUN_ABORTS``: a cron run another daemon executes), else on this router."""
        aborts = self._run_aborts()
        if aborts is not None:
            done = await aborts.abort(run_id)
            if done is not None:
                return CancelResult(cancelled=done, run_ids=(run_id,) if done else ())
        return await self._port.cancel(run_id=run_id)

    async def chat_abort(self, conn: Connection, params: AbortParams) -> Any:
        if params.run_id:
            result = await self._cancel_run(params.run_id)
            return {"aborted": True, "runId": params.run_id, "cancelled": result.cancelled}
        key = params.session_key
        if not key:
            raise WireError("INVALID_REQUEST", "Missing required fields: runId or sessionKey")
        check_session_key(key)
        result = await self._port.cancel(session_key=key)
        return {"aborted": True, "sessionKey": key, "cancelled": result.cancelled}

    async def chat_history(self, conn: Connection, params: HistoryParams) -> Any:
        key = params.session_key
        check_session_key(key)
        limit = _limit(params.limit, "chat.history")
        before = _position(params.before, "before")
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

    # -- sessions (Lemon's dialect) -----------------------------------------------------------

    async def sessions_list(self, conn: Connection, params: LimitParams) -> Any:
        limit = _limit(params.limit, "sessions.list")
        rows = [session_row(s) for s in await self._port.sessions(limit=limit)]
        return {
            "sessions": rows,
            "total": len(rows),
            "filters": {},
            "summary": {"count": len(rows)},
        }

    async def sessions_active_list(self, conn: Connection, params: NoParams) -> Any:
        found = await self._port.sessions(limit=500)
        rows = [session_row(s) for s in found if s.active]
        return {
            "sessions": rows,
            "total": len(rows),
            "filters": {"active": True},
            "summary": {"count": len(rows)},
        }

    async def session_detail(self, conn: Connection, params: KeyParams) -> Any:
        """The session's settings, its row (``runCount``, ``active``, ``updatedAtMs``...) and
        its recent runs, newest first (those among the daemon's newest runs)."""
        key = params.session_key
        check_session_key(key)
        self._bridge.follow(key)
        settings = await self.settings(key)
        ref = settings.model or self._config.default_model or self._catalog_default()
        provider, model = model_parts(ref)
        listed = await self._port.sessions(limit=500)
        found = next((s for s in listed if s.session_key == key), None)
        row = session_row(found or SessionSummary(session_key=key, runs=0))
        recent = await self._port.runs(limit=_DETAIL_RUNS_SCANNED)
        runs = [run_row(r) for r in recent if r.session_key == key][:_DETAIL_RUNS]
        info = self._model_info(ref)
        session = {
            **row,
            "sessionKey": key,
            "model": model,
            "provider": provider,
            "contextWindow": None if info is None else info.context_window,
            "maxOutput": None if info is None or not info.max_output else info.max_output,
            "modelSource": "session" if settings.model else "default",
            "modelOverride": settings.model,
            "thinkingLevel": settings.thinking_level,
            "label": settings.label,
            "workspace": settings.workspace or self._cwd,
            "workspaceSource": "session" if settings.workspace else "default",
            "engine": "lemon",
        }
        return SessionDetail(
            session_key=key,
            session=session,
            runs=runs,
            run_count=row["runCount"],
            summary=DetailSummary(run_count=row["runCount"], active=bool(row["active"])),
        )

    def _catalog_default(self) -> str | None:
        if self._models is None:
            return None
        return next((m.ref for m in self._models.models() if m.default), None)

    def _model_info(self, ref: str | None) -> ModelInfo | None:
        if ref is None or self._models is None:
            return None
        return next((m for m in self._models.models() if m.ref == ref), None)

    async def sessions_patch(self, conn: Connection, params: PatchParams) -> Any:
        """``{sessionKey, model?, thinkingLevel?, label?, workspace?}``: a key given sets the
        setting (``null`` clears it); ``{success, sessionKey, summary: {patchedKeys}, session}``.
        The method needs the admin scope (a workspace moves where the session's runs read and
        write, for every ingress)."""
        changed = [
            wire
            for wire, value in (
                ("label", params.label),
                ("model", params.model),
                ("thinkingLevel", params.thinking_level),
                ("workspace", params.workspace),
            )
            if value is not msgspec.UNSET
        ]
        if not changed and params.tool_policy is msgspec.UNSET:
            check_session_key(params.session_key)
            if all(v is msgspec.UNSET for v in (params.engine, params.engine_id, params.provider)):
                raise WireError(
                    "INVALID_REQUEST",
                    "Missing required fields: one of model, thinkingLevel, label, workspace",
                )
        settings = await self.patch(params)
        return SessionPatched(
            success=True,
            session_key=params.session_key,
            session=_settings_view(settings),
            summary=PatchSummary(patched_keys=changed),
        )

    async def sessions_reset(self, conn: Connection, params: KeyParams) -> Any:
        key = params.session_key
        check_session_key(key)
        change = await self._port.reset(key)
        if not change.done:
            raise WireError("CONFLICT", change.reason or "the session could not be reset")
        return {"success": True, "sessionKey": key, "summary": {"reset": True}}

    async def sessions_delete(self, conn: Connection, params: KeyParams) -> Any:
        key = params.session_key
        check_session_key(key)
        change = await self._port.delete(key)
        if not change.done:
            raise WireError("CONFLICT", change.reason or "the session could not be deleted")
        return {"deleted": True, "sessionKey": key, "summary": {"deleted": True}}

    async def sessions_snapshot(self, conn: Connection, params: KeyParams) -> Any:
        key = params.session_key
        check_session_key(key)
        self._bridge.follow(key)
        return snapshot_payload(await self._bridge.snapshot(key))

    # -- approvals ----------------------------------------------------------------------------

    async def approval_resolve(self, conn: Connection, params: ApprovalParams) -> Any:
        decision = _decision(params.decision)
        result = await self.resolve(params.approval_id, decision)
        if not result.resolved:
            raise WireError("CONFLICT", result.reason or "the approval is no longer pending")
        return ApprovalResolved(
            resolved=True, approval_id=params.approval_id, decision=decision.value
        )

    async def approvals_get(self, conn: Connection, params: NoParams) -> Any:
        """The pending requests and the standing grants (the runtime's live set, read afresh:
        what ``lemon approvals revoke`` removed is gone). The terminal client's resync reads
        ``approvals[]`` entries with an ``approvalId`` (the pending ones); its ``/approvals``
        prints the rest as the standing policy, so a grant carries no approval id."""
        pending = self._bridge.pending_approvals()
        standing: list[dict[str, Any]] = []
        unreadable = False
        try:
            grants = await self._approvals.list_grants() if self._approvals is not None else ()
        except StoreError:  # the pending requests still answer; the listing says why not
            _log.warning("exec.approvals.get: the grant store cannot be read", exc_info=True)
            grants, unreadable = (), True
        if grants:
            for grant in grants:
                standing.append(
                    {
                        "tool": grant.tool,
                        "actionHash": grant.key,
                        "scope": grant.scope,
                        "owner": grant.owner,
                        "approved": True,
                        "approvedAtMs": grant.granted_at_ms,
                    }
                )
        return {
            "policy": {},
            "approvals": [*pending, *standing],
            "pending": pending,
            "summary": {
                "pending": len(pending),
                "grants": len(standing),
                **({"grantsUnavailable": "the grant store cannot be read"} if unreadable else {}),
            },
        }

    # -- subscriptions ------------------------------------------------------------------------

    async def events_subscribe(self, conn: Connection, params: SubscribeParams) -> Any:
        """Narrow this connection to some sessions (``sessionKeys``); ``all: true`` widens it
        back to every event. ``topics`` adds opt-in topics (``mcp``: the MCP servers' state,
        admin scope as ``mcp.status``), with or without a session change."""
        topics = self._topics(conn, params.topics)
        if params.all is True:
            conn.sessions = None
        elif params.session_keys:
            keys = params.session_keys
            if len(keys) > self._config.max_sessions:
                raise WireError("INVALID_PARAMS", f"at most {self._config.max_sessions} sessions")
            for key in keys:
                self._bridge.follow(key)
            conn.sessions = (conn.sessions or frozenset()) | frozenset(keys)
        elif topics is None:
            raise WireError(
                "INVALID_REQUEST", "Type errors: sessionKeys: expected a non-empty list of strings"
            )
        if topics is not None:
            conn.topics = conn.topics | topics
        return self._subscription(conn, topics is not None)

    async def events_unsubscribe(self, conn: Connection, params: SubscribeParams) -> Any:
        topics = self._topics(conn, params.topics, asking=False)
        if topics is not None:
            conn.topics = conn.topics - topics
        if conn.sessions is not None and (topics is None or params.session_keys is not None):
            keys = params.session_keys
            if keys is not None:
                conn.sessions = conn.sessions - frozenset(keys)
            else:
                conn.sessions = frozenset()
        return self._subscription(conn, topics is not None)

    @staticmethod
    def _subscription(conn: Connection, named: bool) -> dict[str, Any]:
        """The answer; ``topics`` only when the request named some or the connection has
        some (the terminal client's answer is unchanged)."""
        answer: dict[str, Any] = (
            {"mode": "all", "sessionKeys": None}
            if conn.sessions is None
            else {"mode": "sessions", "sessionKeys": sorted(conn.sessions)}
        )
        if named or conn.topics:
            answer["topics"] = sorted(conn.topics)
        return answer

    @staticmethod
    def _topics(
        conn: Connection, names: list[str] | None, *, asking: bool = True
    ) -> frozenset[str] | None:
        """The opt-in topics named (each known; asking for one takes its scope), or ``None``."""
        if names is None:
            return None
        if not names:
            raise WireError("INVALID_REQUEST", "Type errors: topics: expected a non-empty list")
        for name in names:
            scope = TOPIC_SCOPES.get(name)
            if scope is None:
                known = ", ".join(sorted(TOPIC_SCOPES))
                raise WireError("INVALID_PARAMS", f"unknown topic {name!r} (known: {known})")
            if asking and scope not in conn.scopes:
                raise WireError("FORBIDDEN", f"the {name!r} topic needs the {scope} scope")
        return frozenset(names)

    # -- the port itself (typed clients) -----------------------------------------------------

    async def _inline(self, conn: Connection, params: NoParams) -> Any:
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
        if request.editor is not None and "admin" not in scopes:
            raise WireError(
                "FORBIDDEN",
                "an editor's file system and terminal (editor) send the run's file and shell "
                "tools to another endpoint: they need a token with the admin scope",
            )
        if request.mcp_servers and "admin" not in scopes:
            raise WireError(
                "FORBIDDEN",
                "a session's own MCP servers (mcpServers) start a command or a connection on "
                "the daemon: they need a token with the admin scope",
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
            return request  # the session's workspace (set by an admin), else the daemon's
        if not _inside(request.cwd, self._cwd):
            raise WireError(
                "FORBIDDEN",
                f"cwd {request.cwd!r} is outside the daemon's workspace {self._cwd}; only a "
                "token with the admin scope runs elsewhere",
            )
        return request

    async def port_submit(self, conn: Connection, params: SubmitParams) -> Any:
        request = self._authorised(conn, decode_request(params.request))
        if request.cwd is None:
            request = replace(request, cwd=await self.workspace(request.session_key))
        return encode_receipt(await self._port.submit(request))

    async def port_steer(self, conn: Connection, params: SteerParams) -> Any:
        check_session_key(params.session_key)
        return port_payload(await self._port.steer(params.session_key, params.text))

    async def port_cancel(self, conn: Connection, params: CancelParams) -> Any:
        if params.run_id and params.session_key is None:
            return port_payload(await self._cancel_run(params.run_id))
        result = await self._port.cancel(
            run_id=params.run_id,
            session_key=params.session_key,
            include_queued=params.include_queued,
        )
        return port_payload(result)

    async def port_resolve(self, conn: Connection, params: ApprovalParams) -> Any:
        return port_payload(await self.resolve(params.approval_id, params.decision))

    async def port_snapshot(self, conn: Connection, params: KeyParams) -> Any:
        check_session_key(params.session_key)
        return port_payload(await self._port.snapshot(params.session_key))

    async def port_sessions(self, conn: Connection, params: LimitParams) -> Any:
        return port_payload(await self._port.sessions(limit=_limit(params.limit, "port.sessions")))

    async def port_transcript(self, conn: Connection, params: HistoryParams) -> Any:
        key = params.session_key
        check_session_key(key)
        limit = _limit(params.limit, "port.transcript")
        before = _position(params.before, "before")
        return port_payload(await self._port.transcript(key, limit=limit, before=before))

    async def port_compact(self, conn: Connection, params: CompactParams) -> Any:
        key = params.session_key
        check_session_key(key)
        return port_payload(await self._port.compact(key, instructions=params.instructions))

    async def port_runs(self, conn: Connection, params: RunsParams) -> Any:
        since = _position(params.since_ms, "sinceMs")
        runs = await self._port.runs(limit=_limit(params.limit, "port.runs"), since_ms=since)
        return port_payload(runs)

    async def port_settings(self, conn: Connection, params: KeyParams) -> Any:
        return port_payload(await self.settings(params.session_key))

    async def port_patch(self, conn: Connection, params: PatchParams) -> Any:
        return port_payload(await self.patch(params))

    async def port_reset(self, conn: Connection, params: KeyParams) -> Any:
        check_session_key(params.session_key)
        return port_payload(await self._port.reset(params.session_key))

    async def port_delete(self, conn: Connection, params: KeyParams) -> Any:
        check_session_key(params.session_key)
        return port_payload(await self._port.delete(params.session_key))

    async def port_statistics(self, conn: Connection, params: NoParams) -> Any:
        return port_payload(self._port.statistics())


def _settings_view(s: SessionSettings) -> SettingsView:
    return SettingsView(
        model=s.model,
        thinking_level=s.thinking_level,
        label=s.label,
        workspace=s.workspace,
        updated_at_ms=s.updated_at_ms,
    )
