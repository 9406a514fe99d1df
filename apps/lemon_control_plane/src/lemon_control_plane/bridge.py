"""The EventBridge: the one projection from the session port's events to wire events.

The bridge follows every session: one :meth:`~lemon_core.sessions.SessionPort.watch_all`
stream (one bounded delivery) read by one pump task, opened when the bridge starts, so a
connection that never touched a session still gets its events (the wire's default). Each
session event becomes at most one wire event, written field by field:

================  ==============================================================
port event        wire event
================  ==============================================================
RunPhaseNotice    ``agent`` ``started`` (once per run, when it reaches the engine)
TextDelta         ``chat`` ``delta`` (``seq`` strictly increasing per run)
ToolCard          ``agent`` ``tool_use`` (same ``action.id`` from started to completed)
ApprovalAsked     ``exec.approval.requested``
ApprovalEnded     ``exec.approval.resolved``
RunEnded          ``agent`` ``completed``
StreamOverflow    ``stream.resync`` carrying the session's snapshot (then watched again)
================  ==============================================================

A ``started`` is also sent before a run's first delta or card when no phase notice said so.
Other session events (queue notices) are logged once per type and dropped.

Given the runtime's bus, the bridge also subscribes (one bounded delivery, one pump task) to
the topics of :data:`BUS_EVENTS`, the table of registered bus event types the wire carries
(seed 003 §6), one row per type, each projected field by field and sent to every operator
(no session subscription needed):

=======================================================  ====================================
bus event (topic)                                        wire event
=======================================================  ====================================
``channel_delivery`` (``channels``)                      ``channel.delivery``
``cron_run_started`` / ``_completed`` (``cron``)         ``cron`` (``type``: ``run_started``,
                                                         ``run_completed``)
``cron_job_*`` (``cron``)                                ``cron.job`` (``created``...)
``cron_lifecycle_action`` (``cron``)                     ``cron.audit``
``heartbeat_alert`` / ``_suppressed`` (``cron``)         ``heartbeat`` (``alert``, ``suppressed``)
``cron_tick`` (``cron``)                                 ``tick``
``goal_*`` (``goals``)                                   ``goal`` (``type``: ``set``, ``paused``...)
=======================================================  ====================================

The subagent task events (``task_*``, ``run_graph_changed``: untyped, on run topics) become
``task.*`` and ``run.graph.changed`` for the parent's session: :mod:`._task_events`.

The MCP servers' state changes (``mcp_server_status`` on the ``mcp`` topic: untyped, lemon_mcp's
versioned mapping) become ``mcp.server``, projected field by field with their types checked
(:func:`mcp_server_event`; a payload without a server name is logged once and dropped). That
event is opt-in (:data:`TOPIC_EVENTS`): only a connection that asked for the ``mcp`` topic
with ``events.subscribe {topics: ["mcp"]}`` (admin scope, as ``mcp.status``) gets it.

A type registered later that operators should see is one row. Registered types with no row
(``run_failed``, ``config_reloaded``, ``routing_feedback``...) are not subscribed to; a row's
event whose payload is not (and cannot be coerced into) its record is logged once and dropped.
These are observations with no snapshot behind them: after an overflow the bus handle is
replaced and the lost ones are only counted (``resyncs``).

A run the runtime retries streams under the run id it was submitted with (the id
``chat.send`` answered): the retry attempt's first phase notice names it (``retry_of``), and
so does a snapshot; one ``started``, and delta ``seq`` keeps increasing across the attempts.

On ``StreamOverflow`` the bridge watches every session again, then sends each session it
knows to be in flight (a run started, an approval pending), and each of the last 32 sessions a
client touched (with a shared bus another daemon's run may have come and gone meanwhile), a
``stream.resync`` carrying that session's snapshot, and drops the deltas the snapshot already
holds.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType, TracebackType
from typing import Any, Final

import msgspec

from lemon_control_plane._task_events import TaskEvents
from lemon_control_plane._wire import (
    _name,
    agent_id_of,
    model_parts,
    pending_approval,
    snapshot_payload,
    usage_payload,
)
from lemon_control_plane.errors import WireError
from lemon_core.bus import CHANNELS, CRON, GOALS, Bus, ConsumerClass, Delivery, Overflow, Tagged
from lemon_core.errors import DeliveryClosedError
from lemon_core.events import (
    ChannelDelivery,
    CronJobChanged,
    CronLifecycleAction,
    CronRunCompleted,
    CronRunStarted,
    CronTick,
    Event,
    GoalChanged,
    HeartbeatAlert,
    HeartbeatSuppressed,
    RunPhase,
    coerce,
    payload_class,
)
from lemon_core.sessions import (
    ApprovalAsked,
    ApprovalEnded,
    RunEnded,
    RunPhaseNotice,
    SessionEvent,
    SessionPort,
    SessionSnapshot,
    SessionStream,
    SessionStreamClosedError,
    StreamOverflow,
    TextDelta,
    ToolCard,
)

__all__ = [
    "BUS_EVENTS",
    "BUS_TOPICS",
    "MCP_STATUS_EVENT",
    "MCP_TOPIC",
    "TOPIC_EVENTS",
    "TOPIC_SCOPES",
    "BridgeStatistics",
    "Broadcast",
    "BusRow",
    "EventBridge",
    "mcp_origin",
    "mcp_server_event",
    "web_card",
]

_log = logging.getLogger(__name__)

Broadcast = Callable[[str, dict[str, Any], "str | None"], None]
"""``broadcast(event_name, payload, session_key)``: hand one wire event to the connections."""

#: The bus event types that bump ``stateVersion.cron`` (and every ``cron_job_*``).
_CRON_VERSIONED: Final = frozenset(
    {"cron_tick", "cron_run_started", "cron_run_completed", "cron_lifecycle_action"}
)
_REMEMBERED_RUNS: Final = 1024
_REMEMBERED_APPROVALS: Final = 1024
_MAX_ANSWER_CHARS: Final = 256 * 1024
_SNAPSHOT_TRIES: Final = 5
#: Sessions clients touched lately: resynced too after an overflow (with a shared bus, a run
#: of another daemon may have come and gone while this bridge's stream was fenced).
_RECENT_SESSIONS: Final = 32
#: The web tools' card fields the wire carries (``detail.web``), each with its JSON type.
_WEB_CARD_FIELDS: Final[Mapping[str, tuple[type, ...]]] = MappingProxyType({
    "url": (str,), "final_url": (str,), "status": (int,), "kind": (str,),
    "content_type": (str,), "bytes": (int,), "title": (str,), "elapsed_s": (int, float),
    "cached": (bool,), "flagged": (bool,), "action": (str,), "provider": (str,),
    "query": (str,), "results": (int,), "hidden_removed": (int,), "invisible_removed": (int,),
})  # fmt: skip
_WEB_TEXT_CHARS: Final = 2048
_MAX_THUMBNAIL_CHARS: Final = 160 * 1024
_THUMBNAIL: Final = re.compile(r"data:image/png;base64,[A-Za-z0-9+/]+={0,2}")
_ENGINE_PHASES: Final = frozenset(
    {RunPhase.DISPATCHED_TO_GATEWAY, RunPhase.STARTING_ENGINE, RunPhase.STREAMING}
)


@dataclass(slots=True)
class _Run:
    session_key: str
    started: bool = False
    started_at: float = field(default_factory=time.monotonic)
    started_at_ms: int = 0
    wire_seq: int = 0
    port_seq: int = 0
    tools: dict[str, str] = field(default_factory=dict)  # action id -> tool name


@dataclass(frozen=True, kw_only=True, slots=True)
class BridgeStatistics:
    followed: int
    max_sessions: int
    events_in: int
    events_out: int
    dropped_types: tuple[str, ...]
    resyncs: int
    active_runs: int
    pending_approvals: int


class EventBridge:
    """See the module docstring. Use as ``async with EventBridge(port, broadcast) as bridge``."""

    def __init__(
        self,
        port: SessionPort,
        broadcast: Broadcast,
        *,
        max_sessions: int = 256,
        default_model: str | None = None,
        bus: Bus | None = None,
    ) -> None:
        self._provider, self._model = model_parts(default_model)
        self._port = port
        self._bus = bus
        self._bus_delivery: Delivery | None = None
        self._broadcast = broadcast
        self._state: dict[str, int] = {"presence": 0, "health": 0, "cron": 0}
        self._state_json: bytes | None = None
        self._max_sessions = max_sessions
        self._stream: SessionStream | None = None
        self._task: asyncio.Task[None] | None = None
        self._bus_task: asyncio.Task[None] | None = None
        self._tasks: TaskEvents | None = None
        self._tasks_task: asyncio.Task[None] | None = None
        self._tg: asyncio.TaskGroup | None = None
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._active: dict[str, str] = {}  # run id -> session key
        # (session key, approval id) -> its wire payload: a child task's approval is relayed to
        # its parent's session under the same id, and ends in each.
        self._approvals: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        # session key -> its own model ("provider:model"), as sessions.patch / session.detail
        # last saw it: what `agent started` names (else the runtime's default).
        self._models: OrderedDict[str, tuple[str | None, str | None]] = OrderedDict()
        self._recent: OrderedDict[str, None] = OrderedDict()
        # retry attempt id -> the run as submitted (the id the wire shows)
        self._attempts: OrderedDict[str, str] = OrderedDict()
        self._idle = asyncio.Event()
        self._idle.set()
        self._dropped_types: set[str] = set()
        self._in = 0
        self._out = 0
        self._resyncs = 0
        self._closing = False

    async def __aenter__(self) -> EventBridge:
        self._tg = asyncio.TaskGroup()
        await self._tg.__aenter__()
        self._stream = self._port.watch_all()
        self._task = self._tg.create_task(self._pump())
        if self._bus is not None:
            self._bus_delivery = self._subscribe_bus(self._bus)
            self._bus_task = self._tg.create_task(self._bus_pump())
            self._tasks = TaskEvents(self._bus, self._emit)
            self._tasks_task = self._tg.create_task(self._tasks.pump(lambda: self._closing))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing = True
        if self._stream is not None:
            self._stream.close()
        if self._bus_delivery is not None:
            self._bus_delivery.close()
        if self._task is not None:
            self._task.cancel()
        if self._bus_task is not None:
            self._bus_task.cancel()
        if self._tasks is not None:
            self._tasks.close()
        if self._tasks_task is not None:
            self._tasks_task.cancel()
        assert self._tg is not None
        await self._tg.__aexit__(None, None, None)

    # -- following ----------------------------------------------------------------------------

    def follow(self, session_key: str) -> None:
        """Every session is followed; this only refuses once the bridge is shutting down, and
        remembers the session (bounded) so an overflow resyncs it even when nothing of it is in
        flight here."""
        if self._tg is None or self._closing:
            raise WireError("UNAVAILABLE", "the control plane is shutting down")
        self._recent[session_key] = None
        self._recent.move_to_end(session_key)
        while len(self._recent) > _RECENT_SESSIONS:
            self._recent.popitem(last=False)

    def note_settings(
        self, session_key: str, model: str | None, thinking_level: str | None = None
    ) -> None:
        """The session's own model and thinking level (``None``: not set), as
        ``agent started`` names them."""
        if model is None and thinking_level is None:
            self._models.pop(session_key, None)
            return
        self._models[session_key] = (model, thinking_level)
        self._models.move_to_end(session_key)
        while len(self._models) > _REMEMBERED_RUNS:
            self._models.popitem(last=False)

    async def _pump(self) -> None:
        while True:
            stream = self._stream
            assert stream is not None
            try:
                item = await stream.get()
            except SessionStreamClosedError:
                if self._closing:
                    return
                await self._recover("the bridge's stream ended")
                continue
            self._in += 1
            if isinstance(item, StreamOverflow):
                await self._recover(item.reason)
                continue
            self._project(item)

    # -- the bus rows -------------------------------------------------------------------------

    @staticmethod
    def _subscribe_bus(bus: Bus) -> Delivery:
        delivery = Delivery.for_consumer(ConsumerClass.EVENT_BRIDGE)
        for topic in (*BUS_TOPICS, MCP_TOPIC):
            bus.subscribe(topic, delivery=delivery)
        return delivery

    async def _bus_pump(self) -> None:
        """The registered events of :data:`BUS_EVENTS`' topics, one wire event each. These are
        observations with no snapshot behind them: after an overflow the handle is replaced
        (later events flow again) and the lost ones are counted in ``resyncs``."""
        while True:
            delivery = self._bus_delivery
            assert delivery is not None
            assert self._bus is not None
            try:
                item = await delivery.get()
            except DeliveryClosedError:
                if self._closing:
                    return
                self._bus_delivery = self._subscribe_bus(self._bus)
                continue
            if isinstance(item, Overflow):
                _log.warning("the bridge's bus subscription overflowed; events were lost")
                delivery.close()
                self._resyncs += 1
                self._bus_delivery = self._subscribe_bus(self._bus)
                continue
            if isinstance(item, Tagged):
                if item.epoch != delivery.epoch:
                    continue
                item = item.item
            if isinstance(item, Event):
                self._in += 1
                self._project_bus(item)

    def state_version(self) -> dict[str, int]:
        """The counters every event frame carries as ``stateVersion`` (seed 003 §4.2)."""
        return dict(self._state)

    def state_version_json(self) -> bytes:
        if self._state_json is None:
            self._state_json = msgspec.json.encode(self._state)
        return self._state_json

    def _project_bus(self, event: Event) -> None:
        if event.type in _CRON_VERSIONED or event.type.startswith("cron_job_"):
            # bumped before mapping, even when the event is then dropped
            self._state["cron"] += 1
            self._state_json = None
        if event.type == MCP_STATUS_EVENT:
            self._project_mcp(event)
            return
        row = BUS_EVENTS.get(event.type)
        if row is None:
            return  # another type on a followed topic: the wire has no event for it
        payload = coerce(event.type, event.payload)
        if not isinstance(payload, payload_class(event.type) or ()):
            kind = f"{event.type} (malformed payload)"
            if kind not in self._dropped_types:
                self._dropped_types.add(kind)
                _log.warning("a %s event carried %r; such events are dropped", event.type, payload)
            return
        # Every operator sees these (no session subscription needed), as the seed says.
        self._emit(row.wire, row.project(payload), None)

    def _project_mcp(self, event: Event) -> None:
        payload = mcp_server_event(event.payload, event.ts_ms)
        if payload is None:
            kind = f"{event.type} (malformed payload)"
            if kind not in self._dropped_types:
                self._dropped_types.add(kind)
                _log.warning(
                    "a %s event carried %r; such events are dropped", event.type, event.payload
                )
            return
        # No session: every connection that asked for the topic (TOPIC_EVENTS) gets it.
        self._emit(MCP_SERVER_WIRE, payload, None)

    async def _recover(self, reason: str) -> None:
        """Watch again first (nothing is missed), then resync each session in flight."""
        self._stream = self._port.watch_all()
        self._resyncs += 1
        sessions = dict.fromkeys(
            [
                *self._active.values(),
                *(a["sessionKey"] for a in self._approvals.values()),
                *self._recent,
            ]
        )
        for session_key in sessions:
            if not isinstance(session_key, str):
                continue
            snapshot = await self.snapshot(session_key)
            if snapshot.active is not None:
                active = snapshot.active
                if active.attempt_id != active.run_id:
                    self._remember_attempt(active.attempt_id, active.run_id)
                run = self._run(active.attempt_id, session_key)
                run.port_seq = max(run.port_seq, active.text_seq)
            for pending in snapshot.pending_approvals:
                self._remember_approval(pending_approval(session_key, pending))
            self._emit(
                "stream.resync",
                {
                    "reason": reason,
                    "scope": "session",
                    "sessionKey": session_key,
                    "snapshot": snapshot_payload(snapshot),
                },
                session_key,
            )

    async def snapshot(self, session_key: str) -> SessionSnapshot:
        """The port's snapshot, asked again while it says ``retry`` (bounded)."""
        snapshot = await self._port.snapshot(session_key)
        for _ in range(_SNAPSHOT_TRIES - 1):
            if snapshot.status != "retry":
                break
            await asyncio.sleep(0)
            snapshot = await self._port.snapshot(session_key)
        return snapshot

    # -- the projection -------------------------------------------------------------------

    def _run(self, run_id: str, session_key: str) -> _Run:
        run = self._runs.get(run_id)
        if run is None:
            run = self._runs[run_id] = _Run(session_key=session_key)
            while len(self._runs) > _REMEMBERED_RUNS:
                self._runs.popitem(last=False)
        return run

    def _emit(self, name: str, payload: dict[str, Any], session_key: str | None) -> None:
        self._out += 1
        self._broadcast(name, payload, session_key)

    def _remember_attempt(self, attempt_id: str, run_id: str) -> None:
        self._attempts[attempt_id] = run_id
        while len(self._attempts) > _REMEMBERED_RUNS:
            self._attempts.popitem(last=False)

    def _wire_id(self, attempt_id: str) -> str:
        """The run id the wire shows for ``attempt_id``: the run as submitted."""
        return self._attempts.get(attempt_id, attempt_id)

    def _start(self, run_id: str, session_key: str) -> _Run:
        run = self._run(run_id, session_key)
        if not run.started:
            run.started = True
            run.started_at = time.monotonic()
            run.started_at_ms = int(time.time() * 1000)
            self._active[run_id] = session_key
            self._idle.clear()
            if self._tasks is not None and not self._closing:
                self._tasks.follow(run_id)  # the task events of the children it starts
            own, level = self._models.get(session_key, (None, None))
            provider, model = model_parts(own) if own else (self._provider, self._model)
            self._emit(
                "agent",
                {
                    "type": "started",
                    "runId": run_id,
                    "sessionKey": session_key,
                    "engine": "lemon",
                    "parentRunId": None,
                    "model": model,
                    "provider": provider,
                    "thinkingLevel": level,
                },
                session_key,
            )
        return run

    def _project(self, item: SessionEvent) -> None:
        key = item.session_key
        if isinstance(item, TextDelta):
            wire_id = self._wire_id(item.run_id)
            run = self._start(wire_id, key)
            # ``seq`` orders one attempt's deltas; the wire's increases across attempts.
            attempt = run if wire_id == item.run_id else self._run(item.run_id, key)
            if item.seq <= attempt.port_seq:
                return
            attempt.port_seq = item.seq
            run.wire_seq += 1
            self._emit(
                "chat",
                {
                    "type": "delta",
                    "runId": wire_id,
                    "sessionKey": key,
                    "seq": run.wire_seq,
                    "text": item.text,
                },
                key,
            )
        elif isinstance(item, ToolCard):
            self._tool(item)
        elif isinstance(item, RunPhaseNotice):
            if item.retry_of is not None:
                self._remember_attempt(item.run_id, item.retry_of)
            if item.phase in _ENGINE_PHASES:
                self._start(self._wire_id(item.run_id), key)
        elif isinstance(item, ApprovalAsked):
            payload = {
                "approvalId": item.approval_id,
                "runId": None if item.run_id is None else self._wire_id(item.run_id),
                "sessionKey": key,
                "agentId": agent_id_of(key),
                "tool": item.tool,
                "action": item.action if item.action is not None else {},
                "rationale": item.rationale,
                "requestedAtMs": int(time.time() * 1000),
                "expiresAtMs": item.expires_at_ms,
            }
            self._remember_approval(payload)
            self._emit("exec.approval.requested", payload, key)
        elif isinstance(item, ApprovalEnded):
            asked = self._approvals.pop((key, item.approval_id), None)
            self._emit(
                "exec.approval.resolved",
                {
                    "approvalId": item.approval_id,
                    "decision": _name(item.decision),
                    "runId": asked["runId"] if asked else None,
                    "sessionKey": key,
                    "agentId": agent_id_of(key),
                    "tool": asked["tool"] if asked else None,
                },
                key,
            )
        elif isinstance(item, RunEnded):
            self._ended(item)
        else:
            kind = type(item).__name__
            if kind not in self._dropped_types:
                self._dropped_types.add(kind)
                _log.info("the wire has no event for %s; such events are dropped", kind)

    def _tool(self, card: ToolCard) -> None:
        wire_id = self._wire_id(card.run_id)
        run = self._start(wire_id, card.session_key)
        detail = card.detail
        name = detail.get("tool")
        if isinstance(name, str):
            run.tools[card.action_id] = name
        else:
            name = run.tools.get(card.action_id, card.title)
        wire_detail: dict[str, Any] = {"name": name}
        args = detail.get("arguments")
        if isinstance(args, dict):
            wire_detail["args"] = args
        mcp = mcp_origin(detail.get("mcp"))
        if mcp is not None:
            wire_detail["mcp"] = mcp
        if card.phase == "completed":
            wire_detail["result"] = card.message
            wire_detail["isError"] = card.ok is False
            web = web_card(detail.get("web"))
            if web is not None:
                wire_detail["web"] = web
        self._emit(
            "agent",
            {
                "type": "tool_use",
                "runId": wire_id,
                "sessionKey": card.session_key,
                "action": {
                    "id": card.action_id,
                    "kind": _name(card.kind),
                    "title": card.title,
                    "detail": wire_detail,
                },
                "phase": card.phase,
                "ok": card.ok,
                "message": card.message,
            },
            card.session_key,
        )

    def _ended(self, end: RunEnded) -> None:
        run = self._runs.get(end.run_id) or self._runs.get(end.attempt_id)
        started_at = run.started_at if run is not None else time.monotonic()
        self._active.pop(end.attempt_id, None)
        self._active.pop(end.run_id, None)
        if not self._active:
            self._idle.set()
        answer = end.answer
        if not end.ok and not answer:
            answer = end.error or "run failed"
        self._emit(
            "agent",
            {
                "type": "completed",
                "runId": end.run_id,
                "sessionKey": end.session_key,
                "ok": end.ok,
                "answer": answer[:_MAX_ANSWER_CHARS],
                "durationMs": int((time.monotonic() - started_at) * 1000),
                "usage": usage_payload(end.usage),
                "model": end.usage.model if end.usage is not None else None,
                "errorCode": None if end.error_code is None else _name(end.error_code),
                "error": end.error,
            },
            end.session_key,
        )

    def _remember_approval(self, payload: dict[str, Any]) -> None:
        self._approvals[(payload["sessionKey"], payload["approvalId"])] = payload
        while len(self._approvals) > _REMEMBERED_APPROVALS:
            self._approvals.popitem(last=False)

    # -- reading ----------------------------------------------------------------------------

    def pending_approvals(self) -> list[dict[str, Any]]:
        """The approvals asked and not yet ended, oldest first (as the wire shows them)."""
        return list(self._approvals.values())

    def active_runs(self) -> dict[str, str]:
        """Run id -> session key of the runs started and not ended."""
        return dict(self._active)

    def active_run_rows(self) -> list[dict[str, Any]]:
        """The runs in flight as ``runs.active.list`` shows them, oldest first."""
        now = time.monotonic()
        rows = []
        for run_id, session_key in self._active.items():
            run = self._runs.get(run_id)
            rows.append(
                {
                    "runId": run_id,
                    "status": "running",
                    "engine": "lemon",
                    "sessionKey": session_key,
                    "startedAtMs": run.started_at_ms if run else None,
                    "durationMs": int((now - run.started_at) * 1000) if run else None,
                }
            )
        return rows

    async def wait_idle(self, grace_s: float) -> bool:
        """Wait until no followed run is active; ``False`` on timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), grace_s)
        except TimeoutError:
            return False
        return True

    def statistics(self) -> BridgeStatistics:
        return BridgeStatistics(
            followed=0 if self._stream is None else 1,
            max_sessions=self._max_sessions,
            events_in=self._in,
            events_out=self._out,
            dropped_types=tuple(sorted(self._dropped_types)),
            resyncs=self._resyncs + (self._tasks.resyncs if self._tasks is not None else 0),
            active_runs=len(self._active),
            pending_approvals=len(self._approvals),
        )


# -- bus rows: the registered events of the ``channels``, ``cron`` and ``goals`` topics ------------


def _channel_delivery(p: Any) -> dict[str, Any]:
    assert isinstance(p, ChannelDelivery)
    return {
        "intentId": p.intent_id,
        "runId": p.run_id,
        "sessionKey": p.session_key,
        "channelId": p.channel_id,
        "accountId": p.account_id,
        "peerKind": p.peer_kind,
        "peerId": p.peer_id,
        "threadId": p.thread_id,
        "kind": p.kind,
        "textPreview": p.text_preview,
        "ok": p.ok,
        "error": p.error,
        "durationMs": p.duration_ms,
        "tsMs": p.ts_ms,
    }


def _cron_tick(p: Any) -> dict[str, Any]:
    assert isinstance(p, CronTick)
    return {"timestampMs": p.timestamp_ms}


def _cron_run_started(p: Any) -> dict[str, Any]:
    assert isinstance(p, CronRunStarted)
    return {
        "type": "run_started",
        "cronRunId": p.cron_run_id,
        "runId": p.router_run_id,
        "jobId": p.job_id,
        "jobName": p.job_name,
        "agentId": p.agent_id,
        "sessionKey": p.session_key,
        "triggeredBy": p.triggered_by,
        "startedAtMs": p.started_at_ms,
    }


def _cron_run_completed(p: Any) -> dict[str, Any]:
    assert isinstance(p, CronRunCompleted)
    return {
        "type": "run_completed",
        "cronRunId": p.cron_run_id,
        "runId": p.router_run_id,
        "jobId": p.job_id,
        "agentId": p.agent_id,
        "sessionKey": p.session_key,
        "status": p.status,
        "durationMs": p.duration_ms,
        "output": None if p.output is None else p.output[:_MAX_ANSWER_CHARS],
        "error": p.error,
        "suppressed": p.suppressed,
    }


def _cron_job_changed(p: Any) -> dict[str, Any]:
    assert isinstance(p, CronJobChanged)
    action = _name(p.action)
    if p.job is None:
        return {"type": action, "jobId": p.job_id, "name": p.name}
    job = p.job
    return {
        "type": action,
        "jobId": job.get("id") or p.job_id,
        "name": job.get("name"),
        "schedule": job.get("schedule"),
        "enabled": job.get("enabled"),
        "agentId": job.get("agent_id"),
        "sessionKey": job.get("session_key"),
        "nextRunAtMs": job.get("next_run_at_ms"),
    }


def _cron_lifecycle_action(p: Any) -> dict[str, Any]:
    assert isinstance(p, CronLifecycleAction)
    a = p.audit
    return {
        "type": a.get("action"),
        "auditId": a.get("id"),
        "jobId": a.get("job_id"),
        "cronRunId": a.get("run_id"),
        "runId": a.get("router_run_id") or a.get("run_id"),
        "source": a.get("source"),
        "status": a.get("status"),
        "triggeredBy": a.get("triggered_by"),
        "reason": a.get("reason"),
        "changedFields": a.get("changed_fields") or [],
        "tsMs": a.get("ts_ms"),
    }


def _heartbeat_alert(p: Any) -> dict[str, Any]:
    assert isinstance(p, HeartbeatAlert)
    return {
        "type": "alert",
        "status": "alert",
        "timestampMs": time.time_ns() // 1_000_000,
        "agentId": p.agent_id,
        "jobId": p.job_id,
        "jobName": p.job_name,
        "runId": p.run_id,
        "response": p.response,
        "severity": p.severity,
    }


def _heartbeat_suppressed(p: Any) -> dict[str, Any]:
    assert isinstance(p, HeartbeatSuppressed)
    return {
        "type": "suppressed",
        "status": "suppressed",
        "timestampMs": time.time_ns() // 1_000_000,
        "agentId": p.agent_id,
        "jobId": p.job_id,
        "jobName": p.job_name,
        "runId": p.run_id,
    }


def _goal(kind: str) -> Callable[[Any], dict[str, Any]]:
    def project(p: Any) -> dict[str, Any]:
        assert isinstance(p, GoalChanged)
        return {
            "type": kind,
            "goalId": p.goal_id,
            "agentId": p.agent_id,
            "sessionKey": p.session_key,
            "status": p.status,
            "objectiveBytes": p.objective_bytes,
            "continuationCount": p.continuation_count,
            "lastRunId": p.last_run_id,
            "loopVerdict": p.loop_verdict,
            "loopStatus": p.loop_status,
            "loopAutoEnabled": p.loop_auto_enabled,
        }

    return project


@dataclass(frozen=True, slots=True)
class BusRow:
    """One registered bus event type on the wire: its topic, the wire event name, and the
    field-by-field projection of its payload record (wire JSON is never derived from keys)."""

    topic: str
    wire: str
    project: Callable[[Any], dict[str, Any]]


_GOAL_KINDS: Final = (
    "set",
    "paused",
    "resumed",
    "completed",
    "cleared",
    "continuation_submitted",
    "loop_verdict",
    "loop_status",
)

#: Registered bus event type -> its wire row (seed 003 §6): one row per type, so an app that
#: starts publishing a registered type needs no bridge change, and a new type is one row.
BUS_EVENTS: Final[Mapping[str, BusRow]] = MappingProxyType(
    {
        "channel_delivery": BusRow(CHANNELS, "channel.delivery", _channel_delivery),
        "cron_tick": BusRow(CRON, "tick", _cron_tick),
        "cron_run_started": BusRow(CRON, "cron", _cron_run_started),
        "cron_run_completed": BusRow(CRON, "cron", _cron_run_completed),
        "cron_job_created": BusRow(CRON, "cron.job", _cron_job_changed),
        "cron_job_updated": BusRow(CRON, "cron.job", _cron_job_changed),
        "cron_job_deleted": BusRow(CRON, "cron.job", _cron_job_changed),
        "cron_lifecycle_action": BusRow(CRON, "cron.audit", _cron_lifecycle_action),
        "heartbeat_alert": BusRow(CRON, "heartbeat", _heartbeat_alert),
        "heartbeat_suppressed": BusRow(CRON, "heartbeat", _heartbeat_suppressed),
        **{f"goal_{kind}": BusRow(GOALS, "goal", _goal(kind)) for kind in _GOAL_KINDS},
    }
)

#: The topics the bridge subscribes to on the bus (every row's).
BUS_TOPICS: Final = tuple(dict.fromkeys(row.topic for row in BUS_EVENTS.values()))


# -- the MCP servers' state (lemon_mcp's untyped ``mcp_server_status``) ---------------------------

#: The bus topic lemon_mcp publishes its servers' state changes on, and the event type.
MCP_TOPIC: Final = "mcp"
MCP_STATUS_EVENT: Final = "mcp_server_status"
#: The wire event they become.
MCP_SERVER_WIRE: Final = "mcp.server"
#: Wire events a connection gets only once it asked for their topic (``events.subscribe
#: {topics: [...]}``), each with the scope that asking takes.
TOPIC_EVENTS: Final[Mapping[str, str]] = MappingProxyType({MCP_SERVER_WIRE: MCP_TOPIC})
#: Each opt-in topic and the scope asking for it takes (``mcp``: as the ``mcp.status`` method).
TOPIC_SCOPES: Final[Mapping[str, str]] = MappingProxyType({MCP_TOPIC: "admin"})
_MCP_STATES: Final = frozenset({"starting", "connected", "disconnected", "failed", "needs_login"})
_MCP_TEXT_CHARS: Final = 2048


def mcp_origin(raw: object) -> dict[str, str] | None:
    """The wire form of an MCP tool's card origin (``detail.mcp``): ``{server, tool}``, both
    non-empty strings (clipped), else ``None`` (a built-in tool)."""
    if not isinstance(raw, Mapping):
        return None
    server, tool = raw.get("server"), raw.get("tool")
    if not isinstance(server, str) or not server or not isinstance(tool, str):
        return None
    return {"server": server[:_MCP_TEXT_CHARS], "tool": tool[:_MCP_TEXT_CHARS]}


def mcp_server_event(raw: object, ts_ms: int | None = None) -> dict[str, Any] | None:
    """The wire form of one ``mcp_server_status`` payload (lemon_mcp's version 1 mapping):
    ``{version, name, state, change, transport, detail, tools, error, timestampMs}``, each
    field of its type (a wrong one is ``null``, text clipped), or ``None`` when it names no
    server. A ``state`` that is not one of lemon_mcp's five is ``"unknown"``."""
    if not isinstance(raw, Mapping):
        return None
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        return None

    def text(key: str) -> str | None:
        value = raw.get(key)
        return value[:_MCP_TEXT_CHARS] if isinstance(value, str) else None

    state = raw.get("state")
    tools = raw.get("tools")
    version = raw.get("version")
    return {
        "version": version if isinstance(version, int) and not isinstance(version, bool) else 1,
        "name": name[:_MCP_TEXT_CHARS],
        "state": state if state in _MCP_STATES else "unknown",
        "change": text("change"),
        "transport": text("transport"),
        "detail": text("detail"),
        "tools": tools if isinstance(tools, int) and not isinstance(tools, bool) else None,
        "error": text("error"),
        "timestampMs": ts_ms,
    }


def web_card(raw: object) -> dict[str, Any] | None:
    """The wire form of a web tool's card (``detail.web``): the known fields with their
    types only (text clipped), the flag rules, and the screenshot thumbnail only when it is a
    ``data:image/png;base64`` URL (what the browser tool drew; never page or model text)."""
    if not isinstance(raw, Mapping):
        return None
    out: dict[str, Any] = {}
    for name, kinds in _WEB_CARD_FIELDS.items():
        value = raw.get(name)
        if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds):
            out[name] = value[:_WEB_TEXT_CHARS] if isinstance(value, str) else value
    flags = raw.get("flags")
    if isinstance(flags, list):
        out["flags"] = [str(f.get("rule", ""))[:64] for f in flags[:10] if isinstance(f, Mapping)]
    shot = raw.get("screenshot")
    if isinstance(shot, Mapping):
        out["screenshot"] = {
            k: shot[k] for k in ("bytes", "width", "height")
            if isinstance(shot.get(k), int) and not isinstance(shot.get(k), bool)
        }  # fmt: skip
    thumb = raw.get("thumbnail")
    if (
        isinstance(thumb, str)
        and len(thumb) <= _MAX_THUMBNAIL_CHARS
        and _THUMBNAIL.fullmatch(thumb)
    ):
        out["thumbnail"] = thumb
    return out
