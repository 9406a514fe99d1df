"""The in-process :class:`~lemon_core.sessions.SessionStream`: one bounded delivery on
``session:<key>``, projected into the typed session events.

Projection: ``delta`` -> TextDelta; ``engine_action`` -> ToolCard (approval actions are left
out: the approval events carry them); ``approval_requested`` / ``approval_resolved`` ->
ApprovalAsked / ApprovalEnded; ``queue_outcome`` -> QueueNotice; the router's
``run_phase_changed`` -> RunPhaseNotice; ``run_completed`` -> RunEnded (approvals of that attempt
still open end as ``expired`` right after it); ``run_events_overflow`` or an overflow of this
stream's own delivery -> one StreamOverflow, then the stream ends. Events of an attempt that
already ended are rejected (counted in ``late_rejected``), and so are items of a replaced
delivery epoch.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from typing import Any, Final, Self

from lemon_core.bus import Bus, ConsumerClass, Delivery, Overflow, Tagged, TerminalNotice
from lemon_core.bus import session_topic as _session_topic
from lemon_core.errors import DeliveryClosedError
from lemon_core.events import (
    ActionKind,
    ApprovalDecision,
    ApprovalRequested,
    ApprovalResolved,
    Delta,
    EngineAction,
    Event,
    QueueOutcome,
    RunCompleted,
    RunPhaseChanged,
)
from lemon_core.sessions._events import (
    ApprovalAsked,
    ApprovalEnded,
    QueueNotice,
    RunEnded,
    RunPhaseNotice,
    SessionEvent,
    StreamOverflow,
    TextDelta,
    ToolCard,
)
from lemon_core.sessions.errors import SessionStreamClosedError

__all__ = ["BusAllSessionsStream", "BusSessionStream", "SessionStreamBase", "project"]

_REMEMBERED: Final = 1024  # ended attempts and approvals, per stream; oldest forgotten first


def project(session_key: str, event: Event) -> SessionEvent | None:
    """The session event ``event`` stands for, or ``None`` when it is not one."""
    payload: Any = event.payload
    kind = event.type
    if kind == "delta" and isinstance(payload, Delta):
        return TextDelta(
            session_key=session_key, run_id=payload.run_id, seq=payload.seq, text=payload.text
        )
    if kind == "engine_action" and isinstance(payload, EngineAction):
        action = payload.action
        if action.kind is ActionKind.APPROVAL:
            return None
        run_id = event.meta.get("run_id")
        return ToolCard(
            session_key=session_key,
            run_id=run_id if isinstance(run_id, str) else "",
            action_id=action.id,
            phase=payload.phase.value,
            kind=action.kind,
            title=action.title,
            detail=dict(action.detail),
            ok=payload.ok,
            message=payload.message,
        )
    if kind == "approval_requested" and isinstance(payload, ApprovalRequested):
        pending = payload.pending
        if pending.session_key not in (None, session_key):
            return None
        return ApprovalAsked(
            session_key=session_key,
            approval_id=payload.approval_id,
            run_id=pending.run_id,
            tool=pending.tool,
            action=None if pending.action is None else dict(pending.action),
            rationale=pending.rationale,
            expires_at_ms=pending.expires_at_ms,
        )
    if kind == "approval_resolved" and isinstance(payload, ApprovalResolved):
        return ApprovalEnded(
            session_key=session_key, approval_id=payload.approval_id, decision=payload.decision
        )
    if kind == "queue_outcome" and isinstance(payload, QueueOutcome):
        return QueueNotice(
            session_key=session_key,
            run_id=payload.run_id,
            outcome=payload.outcome,
            into_run_id=payload.into_run_id,
            position=payload.position,
            reason=payload.reason,
        )
    if kind == "run_phase_changed" and isinstance(payload, RunPhaseChanged):
        if payload.source != "router":
            return None
        retry_of = event.meta.get("retry_of")
        return RunPhaseNotice(
            session_key=session_key,
            run_id=payload.run_id,
            phase=payload.phase,
            previous=payload.previous_phase,
            retry_of=retry_of if isinstance(retry_of, str) and retry_of else None,
        )
    if kind == "run_completed" and isinstance(payload, RunCompleted):
        done = payload.completed
        attempt = done.run_id or _meta_run_id(event) or ""
        return RunEnded(
            session_key=session_key,
            run_id=done.retry_of or attempt,
            attempt_id=attempt,
            ok=done.ok,
            error_code=done.error_code,
            error=done.error,
            answer=done.answer or "",
            usage=done.usage,
            synthetic=done.synthetic,
            warning=done.warning,
        )
    if kind == "run_events_overflow":
        return StreamOverflow(
            session_key=session_key, reason="the run's events overflowed on their way here"
        )
    return None


def _meta_run_id(event: Event) -> str | None:
    value = event.meta.get("run_id")
    return value if isinstance(value, str) else None


def _attempt_of(item: SessionEvent) -> str | None:
    if isinstance(item, RunEnded):
        return item.attempt_id
    if isinstance(item, TextDelta | ToolCard | RunPhaseNotice):
        return item.run_id
    if isinstance(item, ApprovalAsked):
        return item.run_id
    return None


class SessionStreamBase:
    """What every :class:`~lemon_core.sessions.SessionStream` shares: a queue of projected
    events, one terminal :class:`StreamOverflow` after which the stream ends, and the
    end-of-stream error. A subclass supplies :meth:`_more` (wait for, and queue, more events)
    and may hook :meth:`_on_overflow` and :meth:`_on_close`."""

    def __init__(self, session_key: str) -> None:
        self.session_key = session_key
        self._ready: deque[SessionEvent] = deque()
        self._finished = False  # the terminal StreamOverflow was queued
        self._closed = False
        self.overflowed = False

    @property
    def closed(self) -> bool:
        return self._closed

    async def _more(self) -> None:
        """Wait until more events are queued (or the stream ended)."""
        raise NotImplementedError

    def _on_overflow(self) -> None:
        """Called once, when the terminal overflow is queued."""

    def _on_close(self) -> None:
        """Called once, when the stream is closed."""

    def _overflow(self, reason: str) -> None:
        if self._finished or self._closed:
            return
        self.overflowed = True
        self._finished = True
        self._ready.append(StreamOverflow(session_key=self.session_key, reason=reason))
        self._on_overflow()

    async def get(self) -> SessionEvent:
        while True:
            if self._ready:
                item = self._ready.popleft()
                if isinstance(item, StreamOverflow):
                    self.close()
                return item
            if self._closed or self._finished:
                raise SessionStreamClosedError(
                    f"the stream of session {self.session_key!r} has ended"
                    + ("; recover with snapshot() and watch again" if self.overflowed else "")
                )
            await self._more()

    def __aiter__(self) -> AsyncIterator[SessionEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[SessionEvent]:
        while True:
            try:
                yield await self.get()
            except SessionStreamClosedError:
                return

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._on_close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class BusSessionStream(SessionStreamBase):
    """See the module docstring. ``max_entries`` / ``max_message_bytes`` default to the seed's
    ``session_subscriber`` class."""

    def __init__(
        self,
        bus: Bus,
        session_key: str,
        *,
        max_entries: int | None = None,
        max_message_bytes: int | None = None,
        on_close: Any = None,
        subscribe: bool = True,
    ) -> None:
        super().__init__(session_key)
        overrides: dict[str, Any] = {"tagged": True, "bind_current_task": False}
        if max_entries is not None:
            overrides["max_entries"] = max_entries
        if max_message_bytes is not None:
            overrides["max_message_bytes"] = max_message_bytes
        self._delivery = Delivery.for_consumer(ConsumerClass.SESSION_SUBSCRIBER, **overrides)
        if subscribe:
            bus.subscribe(_session_topic(session_key), delivery=self._delivery)
        self._ended_attempts: OrderedDict[str, None] = OrderedDict()
        # Keyed by (session, approval id): a child task's approval is relayed to its parent's
        # session under the same id, and a stream following both sees it end in each.
        self._open_approvals: OrderedDict[tuple[str, str], str | None] = OrderedDict()
        self._ended_approvals: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._closed_callback = on_close
        self.late_rejected = 0

    async def _more(self) -> None:
        try:
            raw = await self._delivery.get()
        except DeliveryClosedError:
            self.close()
            return
        self._take(raw)

    def _take(self, raw: Any) -> None:
        if isinstance(raw, Overflow):
            self._overflow("this stream fell behind (its bounded delivery overflowed)")
            return
        if isinstance(raw, TerminalNotice):
            if raw.event is None:
                self._overflow("this stream fell behind (its bounded delivery overflowed)")
                return
            event: Any = raw.event
        elif isinstance(raw, Tagged):
            if not self._delivery.accepts(raw):
                return
            event = raw.item
        else:
            event = raw
        if not isinstance(event, Event):
            return
        key = self._key_of(event)
        if key is None:
            return
        projected = project(key, event)
        if projected is None:
            return
        if isinstance(projected, StreamOverflow):
            self._overflow(projected.reason)
            return
        attempt = _attempt_of(projected)
        if attempt is not None and attempt in self._ended_attempts:
            self.late_rejected += 1
            return
        if isinstance(projected, ApprovalAsked):
            approval = (projected.session_key, projected.approval_id)
            self._remember(self._open_approvals, approval, projected.run_id)
        elif isinstance(projected, ApprovalEnded):
            approval = (projected.session_key, projected.approval_id)
            if approval in self._ended_approvals:
                self.late_rejected += 1
                return
            self._open_approvals.pop(approval, None)
            self._remember(self._ended_approvals, approval, None)
        self._ready.append(projected)
        if isinstance(projected, RunEnded):
            self._remember(self._ended_attempts, projected.attempt_id, None)
            for approval, run_id in list(self._open_approvals.items()):
                if run_id == projected.attempt_id:
                    del self._open_approvals[approval]
                    self._remember(self._ended_approvals, approval, None)
                    self._ready.append(
                        ApprovalEnded(
                            session_key=approval[0],
                            approval_id=approval[1],
                            decision=ApprovalDecision.EXPIRED,
                        )
                    )

    def _key_of(self, event: Event) -> str | None:
        """The session ``event`` belongs to (this stream's own)."""
        return self.session_key

    def _on_overflow(self) -> None:
        self._delivery.close()

    @staticmethod
    def _remember(table: OrderedDict[Any, Any], key: Any, value: Any) -> None:
        table[key] = value
        while len(table) > _REMEMBERED:
            table.popitem(last=False)

    def _on_close(self) -> None:
        self._delivery.close()
        if self._closed_callback is not None:
            self._closed_callback(self)


_MAX_RUN_KEYS: Final = 4096


class BusAllSessionsStream(BusSessionStream):
    """Every session's events on one bounded delivery (the session port's ``watch_all``):
    the same projection, late-event rejection and overflow as :class:`BusSessionStream`, each
    event naming its own session. The stream's ``session_key`` is ``"*"``.

    The owner subscribes it to each session with :meth:`add` before that session's first
    publication (the router does so whenever a session changes); at most ``max_sessions``
    stay subscribed, the least recently added (or re-added) let go first, and added again as
    soon as it changes again. An event's session is read from
    its meta (``session_key``), else its payload, else the session its run was last seen in.
    """

    def __init__(
        self,
        bus: Bus,
        *,
        max_entries: int | None = None,
        max_message_bytes: int | None = None,
        max_sessions: int = 4096,
        on_close: Any = None,
    ) -> None:
        super().__init__(
            bus,
            "*",
            max_entries=max_entries,
            max_message_bytes=max_message_bytes,
            on_close=on_close,
            subscribe=False,
        )
        self._bus = bus
        self._max_sessions = max_sessions
        self._subscriptions: OrderedDict[str, Any] = OrderedDict()
        self._run_keys: OrderedDict[str, str] = OrderedDict()

    def add(self, session_key: str) -> None:
        """Follow ``session_key`` too (idempotent; subscribed when this returns)."""
        if self._closed or self._finished:
            return
        if session_key in self._subscriptions:
            self._subscriptions.move_to_end(session_key)
            return
        self._subscriptions[session_key] = self._bus.subscribe(
            _session_topic(session_key), delivery=self._delivery
        )
        while len(self._subscriptions) > self._max_sessions:
            self._subscriptions.popitem(last=False)[1].cancel()

    @property
    def sessions(self) -> tuple[str, ...]:
        return tuple(self._subscriptions)

    def _key_of(self, event: Event) -> str | None:
        meta = event.meta
        key = meta.get("session_key")
        if type(key) is str and key:
            if event.type == "run_phase_changed":  # every attempt's first event names both
                run_id = meta.get("run_id")
                if isinstance(run_id, str) and run_id:
                    self._run_keys[run_id] = key
                    while len(self._run_keys) > _MAX_RUN_KEYS:
                        self._run_keys.popitem(last=False)
            return key
        payload: Any = event.payload
        found = getattr(payload, "session_key", None)
        if not isinstance(found, str) or not found:
            found = getattr(getattr(payload, "pending", None), "session_key", None)
        if isinstance(found, str) and found:
            return found
        run_id = meta.get("run_id")
        if not isinstance(run_id, str):
            run_id = getattr(payload, "run_id", None)
        return self._run_keys.get(run_id) if isinstance(run_id, str) else None

    def _on_close(self) -> None:
        for subscription in self._subscriptions.values():
            subscription.cancel()
        self._subscriptions.clear()
        super()._on_close()
