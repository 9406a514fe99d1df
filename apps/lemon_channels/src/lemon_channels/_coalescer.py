"""Coalescers: a session's event stream turned into a few delivery intents per run.

One :class:`SessionPump` per chat session follows ``SessionPort.watch`` and feeds a bounded,
tagged ingress (:class:`~lemon_core.bus.Delivery` of the ``router_coalescer`` class: 256
entries, 65,536 bytes per event, admitted before it is queued; a reader task offers, the
coalescing loop takes). From it:

* :class:`AnswerCoalescer` keeps a run's answer so far and emits a ``stream_snapshot`` at most
  every ``edit_interval_s`` (the platform's edit rate per chat), then the ``final_text``.
* :class:`StatusCoalescer` keeps one compact line of the run's tool calls (``tool_status``).
* approvals become ``approval_prompt`` / ``approval_resolved``.

Guarantees under overflow (the ingress refused an event, or the port's stream overflowed):

* transient rendering of every run in flight is fenced: no more snapshots or status edits for
  it; the session is asked to resync (the stream is watched again and a snapshot read);
* the final answer after an overflow is the canonical text of the run's completion (the
  ``RunEnded`` answer, kept aside when the fenced ingress refused it; the transcript's last
  answer, which may be shortened, when the stream itself lost it), never a concatenation
  of the deltas that happened to arrive; the final answer is always that canonical text;
* a status finalised after an overflow says that some steps were not shown (interruption hint)
  instead of claiming a complete list;
* a finalised run's gate rejects delayed events of that run, and the last 128 terminal run ids
  (:class:`TerminalRuns`) fence late intents for runs that already ended;
* events of an old ingress epoch (before a resync) are rejected (tagged admission);
* approvals follow the snapshot after a resync: one asked in the gap is prompted, one that
  ended in the gap has its prompt edited to say it is no longer pending.

A streaming answer keeps at most ``MAX_SNAPSHOT_CHARS`` for its snapshots (a flood of deltas
costs bounded memory; the final text is the canonical answer anyway).

Not guaranteed: the memory of a run with arbitrarily many distinct tool calls (the status line
keeps the last ``MAX_STATUS_ITEMS`` only and counts the rest).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

import msgspec

from lemon_core.bus import ConsumerClass, Delivery, Overflow, Tagged, TerminalNotice, measure
from lemon_core.channels import DeliveryIntent, DeliveryRoute, IntentKind
from lemon_core.errors import DeliveryClosedError, UnencodableItemError
from lemon_core.sessions import (
    ApprovalAsked,
    ApprovalEnded,
    RunEnded,
    SessionEvent,
    SessionPort,
    SessionStream,
    SessionStreamClosedError,
    StreamOverflow,
    TextDelta,
    ToolCard,
)

__all__ = [
    "MAX_SNAPSHOT_CHARS",
    "MAX_STATUS_ITEMS",
    "TERMINAL_RUNS",
    "AnswerCoalescer",
    "PumpStatistics",
    "SessionPump",
    "StatusCoalescer",
    "TerminalRuns",
    "approval_outcome_text",
]

_log = logging.getLogger("lemon_channels.coalescer")

#: How many recent terminal run ids fence late intents.
TERMINAL_RUNS: Final = 128
#: How many tool calls the compact status line names (the rest are counted).
MAX_STATUS_ITEMS: Final = 8
#: The most of a streaming answer kept for its snapshots: a chat shows only the head of a
#: transient message, so a flood of deltas costs bounded memory (and snapshot work).
MAX_SNAPSHOT_CHARS: Final = 16_384
INTERRUPTION_HINT: Final = "(some steps were not shown: the live stream fell behind)"

Emit = Callable[[DeliveryIntent], Awaitable[None]]


class TerminalRuns:
    """The last ``bound`` run ids that ended (oldest forgotten first)."""

    def __init__(self, bound: int = TERMINAL_RUNS) -> None:
        self._bound = bound
        self._ids: OrderedDict[str, None] = OrderedDict()

    def add(self, run_id: str) -> None:
        self._ids[run_id] = None
        self._ids.move_to_end(run_id)
        while len(self._ids) > self._bound:
            self._ids.popitem(last=False)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)


@dataclass(slots=True)
class AnswerCoalescer:
    """One run's answer: the text so far (transient), then the canonical final text."""

    run_id: str
    text: list[str] = field(default_factory=list)
    last_seq: int = 0
    dirty: bool = False
    fenced: bool = False
    """Overflow happened: no more snapshots; the final text comes from the completion."""
    finalised: bool = False
    snapshots: int = 0

    size: int = 0
    clipped: bool = False
    """More arrived than ``MAX_SNAPSHOT_CHARS``: the rest is not kept (the final text is the
    run's canonical answer, never this)."""

    def add(self, delta: TextDelta) -> bool:
        """Take a delta; False when it is refused (finalised, fenced, or out of order)."""
        seq = delta.seq
        if seq <= self.last_seq or self.finalised or self.fenced:
            return False
        self.last_seq = seq
        text = delta.text
        if text:
            size = len(text)
            room = MAX_SNAPSHOT_CHARS - self.size
            if size > room:
                self.clipped = True
                text = text[:room]
                size = len(text)
            if size:
                self.text.append(text)
                self.size += size
                self.dirty = True
        return True

    def snapshot(self) -> str:
        self.dirty = False
        self.snapshots += 1
        return "".join(self.text)


@dataclass(slots=True)
class StatusCoalescer:
    """One run's compact tool-status line."""

    run_id: str
    order: list[str] = field(default_factory=list)
    state: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (title, mark)
    dirty: bool = False
    fenced: bool = False
    finalised: bool = False
    interrupted: bool = False

    def update(self, card: ToolCard) -> bool:
        if self.finalised or self.fenced:
            return False
        if card.action_id not in self.state:
            self.order.append(card.action_id)
        mark = "…"
        if card.phase == "completed":
            mark = "✓" if card.ok is not False else "✗"
        self.state[card.action_id] = (card.title, mark)
        self.dirty = True
        return True

    def line(self) -> str:
        self.dirty = False
        shown = self.order[-MAX_STATUS_ITEMS:]
        items = [f"{self.state[i][0]} {self.state[i][1]}" for i in shown]
        hidden = len(self.order) - len(shown)
        text = "🔧 " + " · ".join(items)
        if hidden:
            text = f"🔧 (+{hidden} more) · " + " · ".join(items)
        if self.interrupted:
            text += " " + INTERRUPTION_HINT
        return text


def approval_outcome_text(tool: str, decision: str) -> str:
    """The words an approval prompt is edited to once the approval ended."""
    words = {
        "approve_once": "approved (once)",
        "approve_session": "approved for this session",
        "approve_agent": "approved (always)",
        "approve_global": "approved (always, every agent)",
        "deny": "denied",
        "timeout": "not answered in time (denied)",
        "cancelled": "the run ended",
        "expired": "the run ended",
    }.get(decision, decision)
    return f"{tool}: {words}"


class PumpStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """Counters of one session pump."""

    session_key: str
    events: int
    intents: int
    overflows: int
    resyncs: int
    stale_rejected: int
    late_rejected: int
    ingress_refused: int
    active_runs: int
    handed_over: int = 0
    """Text deltas the reader added directly while the consumer waited (counted in
    ``events`` too)."""


class SessionPump:
    """Follows one session and emits its intents (see the module docstring).

    ``run()`` is the pump's one task (its owner cancels it); ``emit`` admits an intent
    (durably: the outbox) and may wait; ``edit_interval_s`` is the least time between two
    transient edits of a run.
    """

    def __init__(
        self,
        *,
        port: SessionPort,
        session_key: str,
        route: DeliveryRoute,
        emit: Emit,
        terminal: TerminalRuns,
        edit_interval_s: float = 1.0,
        ingress: Callable[[], Delivery] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.session_key = session_key
        self.route = route
        self._port = port
        self._emit = emit
        self._terminal = terminal
        self._interval = edit_interval_s
        self._make_ingress = ingress or (
            lambda: Delivery.for_consumer(ConsumerClass.ROUTER_COALESCER, claim_on_get=False)
        )
        self._clock = clock
        self._answers: dict[str, AnswerCoalescer] = {}
        self._statuses: dict[str, StatusCoalescer] = {}
        self._approval_tools: OrderedDict[str, str] = OrderedDict()
        self._last_edit = float("-inf")
        self._fenced_runs: set[str] = set()
        self._lost_ends: OrderedDict[str, RunEnded] = OrderedDict()
        self._ready = asyncio.Event()
        self._events = 0
        self._intents = 0
        self._overflows = 0
        self._resyncs = 0
        self._stale = 0
        self._late = 0
        self._refused = 0
        self._handed_over = 0
        # The consumer waits on an empty ingress (see _read: the hand-over).
        self._parked = False

    @property
    def watching(self) -> bool:
        """Whether the pump watches the session (``ready()`` has returned or would)."""
        return self._ready.is_set()

    async def ready(self) -> None:
        """Returns once the pump watches the session (submit after this: nothing is missed)."""
        await self._ready.wait()

    @property
    def events_handled(self) -> int:
        """How many session events the pump took from its ingress (cheap to read)."""
        return self._events

    def statistics(self) -> PumpStatistics:
        return PumpStatistics(
            session_key=self.session_key,
            events=self._events,
            intents=self._intents,
            overflows=self._overflows,
            resyncs=self._resyncs,
            stale_rejected=self._stale,
            late_rejected=self._late,
            ingress_refused=self._refused,
            active_runs=len(self._answers),
            handed_over=self._handed_over,
        )

    # -- the loop --------------------------------------------------------------------------

    async def run(self) -> None:
        ingress = self._make_ingress()
        first = True
        while True:
            stream = self._port.watch(self.session_key)
            reader = asyncio.ensure_future(self._read(stream, ingress))
            try:
                if not first:
                    await self._resync()
                first = False
                self._ready.set()
                await self._consume(ingress)
            finally:
                stream.close()
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
            self._resyncs += 1
            ingress = ingress.replace()

    async def _read(self, stream: SessionStream, ingress: Delivery) -> None:
        """Offer every event of the stream to the ingress (never waits on the consumer), or
        hand a text delta over: add it to its answer here, as the consumer would have.

        A delta is handed over only while the consumer waits on an empty ingress (``_parked``:
        set by the consumer right before it waits, cleared when it wakes and by every offer),
        so nothing is queued ahead of it and the consumer is between two events: the add
        happens in stream order. Only the plain case is handed over: a delta the ingress
        would admit (measured the same way: the same byte bound, the same refusal of what
        cannot be encoded), in order, for an open run whose answer is already dirty, with no
        edit due. Such a delta changes neither the consumer's flush timer (armed when it
        parked, since the answer was dirty; its deadline is the last edit's) nor any counter
        but ``events_handled`` (and ``handed_over``); every other case (a new or clean
        answer, a late or refused delta, an edit due, an oversized one) goes through the
        ingress to the consumer."""
        get = stream.get
        offer = ingress.offer
        max_bytes = ingress.limits.max_message_bytes
        answers = self._answers
        ended = self._terminal._ids  # this module's own record, read per delta
        clock = self._clock
        try:
            while True:
                event = await get()
                try:
                    if type(event) is TextDelta:  # the hot path: never terminal, never the end
                        if self._parked:
                            # The hand-over (see above), inline: no call per delta.
                            answer = answers.get(event.run_id)
                            if (
                                answer is not None
                                and answer.dirty
                                and not answer.fenced
                                and not answer.finalised
                                and event.seq > answer.last_seq
                                and event.run_id not in ended
                                and clock() < self._last_edit + self._interval
                                and measure(event) <= max_bytes
                            ):
                                text = event.text
                                if len(text) <= MAX_SNAPSHOT_CHARS - answer.size:  # add(), inline
                                    answer.last_seq = event.seq
                                    if text:
                                        answer.text.append(text)
                                        answer.size += len(text)
                                else:
                                    answer.add(event)  # in order and open: clips, never refuses
                                self._events += 1
                                self._handed_over += 1
                                continue
                        self._parked = False  # anything queued: what follows queues behind it
                        if not offer(event, terminal=False):
                            self._refused += 1
                        continue
                    self._parked = False
                    if not offer(event, terminal=isinstance(event, RunEnded)):
                        self._refused += 1
                        if isinstance(event, RunEnded):
                            # The port delivered the run's canonical end; the fenced ingress could
                            # not queue it. Keep it for the resync (bounded like the terminal ids).
                            self._lost_ends[event.run_id] = event
                            while len(self._lost_ends) > TERMINAL_RUNS:
                                self._lost_ends.popitem(last=False)
                    if isinstance(event, StreamOverflow):
                        return
                except UnencodableItemError as exc:
                    # Not deliverable anywhere (the real bus refuses it at publish; a port
                    # may still hand one over): skipped, counted, the session still followed.
                    self._refused += 1
                    _log.warning("%s: a session event was skipped: %s", self.session_key, exc)
        except SessionStreamClosedError:
            return

    async def _consume(self, ingress: Delivery) -> None:
        """Take from the ingress until it overflows (then return for a resync)."""
        epoch = ingress.epoch  # a handle's epoch never changes: tested inline on the hot path
        get_nowait = ingress.get_nowait
        answers = self._answers
        ended = self._terminal._ids  # this module's own record, read per delta
        clock = self._clock
        while True:
            try:
                try:
                    item = get_nowait()  # the common case under load: no wait at all
                except asyncio.QueueEmpty:
                    timeout = self._flush_due()
                    # Parked on an empty ingress: the reader may hand deltas over (see _read).
                    self._parked = True
                    try:
                        if timeout is None:
                            item = await ingress.get()
                        else:
                            # One timer for this wait (no task per wait as wait_for makes).
                            async with asyncio.timeout(timeout):
                                item = await ingress.get()
                    finally:
                        self._parked = False
            except TimeoutError:
                await self._flush()
                continue
            except DeliveryClosedError:
                return
            if type(item) is Tagged:
                if item.epoch != epoch:
                    self._stale += 1
                    continue
                event: SessionEvent = item.item
                self._events += 1
                if type(event) is TextDelta:  # the hot path: no call per delta but the add
                    # What _take_delta does, inline.
                    run_id = event.run_id
                    if run_id in ended:
                        self._late += 1
                        continue
                    answer = answers.get(run_id)
                    if answer is None:
                        answer = answers[run_id] = AnswerCoalescer(run_id)
                    # What AnswerCoalescer.add does, inline for the common case: in order,
                    # open, room left for all of the text.
                    seq = event.seq
                    text = event.text
                    if (
                        seq > answer.last_seq
                        and not answer.finalised
                        and not answer.fenced
                        and len(text) <= MAX_SNAPSHOT_CHARS - answer.size
                    ):
                        answer.last_seq = seq
                        if text:
                            answer.text.append(text)
                            answer.size += len(text)
                            answer.dirty = True
                    elif not answer.add(event):
                        self._late += 1
                        continue
                    if clock() >= self._last_edit + self._interval:
                        await self._flush_if_due()
                    continue
                if isinstance(event, StreamOverflow):
                    self._fence_all()
                    return
                await self._handle(event)
            elif isinstance(item, Overflow):
                if ingress.accepts(item):
                    self._fence_all()
                    return
                self._stale += 1
            elif isinstance(item, TerminalNotice):
                # The end of a run arrived after the fence: resync reads it from authority.
                continue

    def _fence_all(self) -> None:
        self._overflows += 1
        for answer in self._answers.values():
            answer.fenced = True
            self._fenced_runs.add(answer.run_id)
        for status in self._statuses.values():
            status.fenced = True
            status.interrupted = True
            self._fenced_runs.add(status.run_id)

    async def _resync(self) -> None:
        """After an overflow: the stream is watched again; read what authority says now and
        finalise the fenced runs that ended meanwhile from their canonical text."""
        snapshot = await self._port.snapshot(self.session_key)
        for _ in range(3):
            if snapshot.status == "ok":
                break
            snapshot = await self._port.snapshot(self.session_key)
        active = snapshot.active.run_id if snapshot.active is not None else None
        for run_id, end in list(self._lost_ends.items()):
            del self._lost_ends[run_id]
            if run_id not in self._terminal:
                await self._handle(end)  # the canonical end the port delivered
        for run_id in sorted(self._fenced_runs):
            if run_id == active or run_id in self._terminal:
                continue
            # The end itself was never seen: the transcript holds the canonical answer.
            answer = ""
            if snapshot.last_run_id == run_id and snapshot.last_ok is False:
                answer = "The run failed."
            else:
                page = await self._port.transcript(self.session_key, limit=1)
                for entry in reversed(page.entries):
                    if entry.role == "assistant":
                        answer = entry.text
                        break
            await self._finalise(
                run_id, answer or "(the run ended; its answer is in the transcript)"
            )
        self._fenced_runs = {r for r in self._fenced_runs if r == active}
        # Approvals: the snapshot is the owner's word. One asked in the gap gets its prompt;
        # one that ended in the gap has its prompt edited (an old card is no evidence).
        pending = {a.approval_id: a for a in snapshot.pending_approvals}
        for approval_id, tool in list(self._approval_tools.items()):
            if approval_id not in pending:
                del self._approval_tools[approval_id]
                await self._send(
                    IntentKind.APPROVAL_RESOLVED,
                    slot=f"approval:{approval_id}",
                    text=f"{tool}: no longer pending",
                    approval_id=approval_id,
                )
        for approval_id, approval in pending.items():
            if approval_id not in self._approval_tools:
                await self._handle(
                    ApprovalAsked(
                        session_key=self.session_key,
                        approval_id=approval_id,
                        run_id=approval.run_id,
                        tool=approval.tool,
                        action=approval.action,
                        rationale=approval.rationale,
                        expires_at_ms=approval.expires_at_ms,
                    )
                )

    # -- events ----------------------------------------------------------------------------

    def _take_delta(self, event: TextDelta) -> bool:
        """Add a delta to its run's answer; whether an edit may be due now (the interval since
        the last edit has passed), so the caller flushes only then."""
        run_id = event.run_id
        if run_id in self._terminal:
            self._late += 1
            return False
        answer = self._answers.get(run_id)
        if answer is None:
            answer = self._answers[run_id] = AnswerCoalescer(run_id)
        if not answer.add(event):
            self._late += 1
            return False
        return self._clock() >= self._last_edit + self._interval

    async def _handle(self, event: SessionEvent) -> None:
        if isinstance(event, TextDelta):
            if self._take_delta(event):
                await self._flush_if_due()
        elif isinstance(event, ToolCard):
            if event.run_id in self._terminal:
                self._late += 1
                return
            status = self._statuses.get(event.run_id)
            if status is None:
                status = self._statuses[event.run_id] = StatusCoalescer(event.run_id)
            if not status.update(event):
                self._late += 1
                return
            await self._flush_if_due()
        elif isinstance(event, ApprovalAsked):
            self._approval_tools[event.approval_id] = event.tool
            while len(self._approval_tools) > 1024:
                self._approval_tools.popitem(last=False)
            await self._flush()  # what happened before the question shows first
            await self._send(
                IntentKind.APPROVAL_PROMPT,
                slot=f"approval:{event.approval_id}",
                text=_approval_text(event),
                run_id=event.run_id,
                approval_id=event.approval_id,
                choices=("approve_once", "approve_session", "approve_agent", "deny"),
            )
        elif isinstance(event, ApprovalEnded):
            tool = self._approval_tools.pop(event.approval_id, "the tool call")
            await self._send(
                IntentKind.APPROVAL_RESOLVED,
                slot=f"approval:{event.approval_id}",
                text=approval_outcome_text(tool, str(event.decision)),
                approval_id=event.approval_id,
            )
        elif isinstance(event, RunEnded):
            if event.run_id in self._terminal:
                self._late += 1
                return
            if event.ok:
                text = event.answer
            else:
                text = event.answer or f"⚠️ {event.error or 'the run failed'}"
                if event.answer and event.error:
                    text = f"{event.answer}\n\n⚠️ {event.error}"
            await self._finalise(event.run_id, text or "(no answer)")

    async def _finalise(self, run_id: str, canonical: str) -> None:
        status = self._statuses.pop(run_id, None)
        if status is not None and status.order:
            status.finalised = True
            await self._send(
                IntentKind.TOOL_STATUS, slot=f"{run_id}:status", text=status.line(), run_id=run_id
            )
        answer = self._answers.pop(run_id, None)
        if answer is not None:
            answer.finalised = True
        self._terminal.add(run_id)
        self._fenced_runs.discard(run_id)
        await self._send(
            IntentKind.FINAL_TEXT, slot=f"{run_id}:answer", text=canonical, run_id=run_id
        )

    # -- rate-limited transient edits ------------------------------------------------------

    def _flush_due(self) -> float | None:
        dirty = any(a.dirty and not a.fenced for a in self._answers.values()) or any(
            s.dirty and not s.fenced for s in self._statuses.values()
        )
        if not dirty:
            return None
        return max(0.0, self._last_edit + self._interval - self._clock())

    async def _flush_if_due(self) -> None:
        due = self._flush_due()
        if due is not None and due <= 0:
            await self._flush()

    async def _flush(self) -> None:
        sent = False
        for status in list(self._statuses.values()):
            if status.dirty and not status.fenced and status.run_id not in self._terminal:
                sent = True
                await self._send(
                    IntentKind.TOOL_STATUS,
                    slot=f"{status.run_id}:status",
                    text=status.line(),
                    run_id=status.run_id,
                )
        for answer in list(self._answers.values()):
            if answer.dirty and not answer.fenced and answer.run_id not in self._terminal:
                sent = True
                await self._send(
                    IntentKind.STREAM_SNAPSHOT,
                    slot=f"{answer.run_id}:answer",
                    text=answer.snapshot(),
                    run_id=answer.run_id,
                )
        if sent:
            self._last_edit = self._clock()

    async def _send(
        self,
        kind: IntentKind,
        *,
        slot: str,
        text: str,
        run_id: str | None = None,
        approval_id: str | None = None,
        choices: tuple[str, ...] = (),
    ) -> None:
        intent = DeliveryIntent(
            intent_id=f"int_{uuid.uuid4().hex}",
            kind=kind,
            route=self.route,
            slot=slot,
            text=text,
            run_id=run_id,
            session_key=self.session_key,
            approval_id=approval_id,
            choices=choices,
        )
        self._intents += 1
        await self._emit(intent)


def _approval_text(event: ApprovalAsked) -> str:
    detail = ""
    if event.action:
        command = event.action.get("command") or event.action.get("path")
        if isinstance(command, str):
            detail = f"\n`{command[:500]}`"
        else:
            detail = "\n" + msgspec.json.encode(event.action).decode()[:500]
    why = f"\n{event.rationale[:300]}" if event.rationale else ""
    return f"🔐 **{event.tool}** asks to run:{detail}{why}"
