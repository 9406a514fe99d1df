"""The per-conversation queue: queue-mode rules as a pure state machine (no I/O, no clock).

One :class:`ConversationQueue` exists per conversation key. The router feeds it submissions and
run lifecycle facts, and it answers with a :class:`Receipt` plus a list of effects for the driver
to carry out (start a run, send a steer to the active run, cancel the active run, report a
submission's terminal outcome). Time is passed in (``now_ms``) so tests control it exactly.

Guarantees (checked by a hypothesis state machine):

* at most one run is active;
* every submission is accounted for by exactly one of: it becomes a run (``StartRun``), it is
  merged into another submission or steered into the active run (``Settled`` outcome ``merged``
  or ``steered``), it is rejected with a receipt (status ``rejected``), or it is cancelled by an
  explicit abort (``Settled`` outcome ``cancelled``); nothing is dropped silently;
* waiting items start in order: interrupts first (first come, first served among them), then
  the rest in the order they entered the queue (a user ``collect`` goes before queued
  goal-continuation follow-ups, by design).

Bound: ``len(queue) + len(pending steers) <= max_pending``. A submission that would need a new
slot past the bound is rejected with status ``rejected`` and reason ``queue_full``; a followup
that merges into the last queued item needs no slot and is still accepted. Pending steers are
counted so that their fallback always has room.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from typing import Literal

from lemon_core.execution import Receipt
from lemon_router._keys import QueueMode
from lemon_router.errors import RouterUsageError

AutoKind = Literal["task", "delegated", "goal"]
OutcomeKind = Literal["merged", "steered", "cancelled", "rejected"]

DEFAULT_MAX_PENDING = 32
DEFAULT_FOLLOWUP_WINDOW_MS = 500
DEFAULT_MAX_MERGED_PARTS = 16
DEFAULT_MAX_MERGED_CHARS = 32_000


@dataclass(frozen=True, kw_only=True, slots=True)
class Submission:
    """One message waiting to run. ``context`` is opaque to the queue (the router's request)."""

    run_id: str
    session_key: str
    prompt: str
    queue_mode: QueueMode
    origin: str = "control_plane"
    auto_kind: AutoKind | None = None
    context: object = None
    merged_run_ids: tuple[str, ...] = ()
    """Run ids of earlier submissions whose prompts were merged into this one, oldest first."""

    @property
    def parts(self) -> int:
        return len(self.merged_run_ids) + 1


@dataclass(frozen=True, kw_only=True, slots=True)
class StartRun:
    """Effect: start ``submission`` as the conversation's active run."""

    submission: Submission


@dataclass(frozen=True, kw_only=True, slots=True)
class SendSteer:
    """Effect: offer ``submission`` to the active run (``kind`` steer or redirect).

    The driver must answer with :meth:`ConversationQueue.steer_result`.
    """

    submission: Submission
    kind: Literal["steer", "redirect"]
    active_run_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class CancelActive:
    """Effect: cancel the active run (it reports :meth:`ConversationQueue.run_ended` later)."""

    run_id: str
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Settled:
    """Effect: ``run_id`` will never run on its own; ``outcome`` says where its message went."""

    run_id: str
    session_key: str
    outcome: OutcomeKind
    into_run_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Requeued:
    """Effect: a steer was not taken by the active run and was queued with its fallback mode.

    If the fallback merged it into an earlier queued followup, that earlier one is reported by
    its own ``Settled(outcome="merged")``; this record keeps the steer's run id.
    """

    run_id: str
    session_key: str
    mode: QueueMode
    position: int | None
    reason: str


Effect = StartRun | SendSteer | CancelActive | Settled | Requeued


@dataclass(frozen=True, kw_only=True, slots=True)
class QueueStatistics:
    """A snapshot of one conversation queue."""

    active_run_id: str | None
    queued: int
    pending_steers: int
    max_pending: int
    submitted: int
    started: int
    merged: int
    steered: int
    rejected: int
    cancelled: int


@dataclass(slots=True)
class _Item:
    submission: Submission
    mode: QueueMode  # the mode it was queued with (collect / followup / interrupt)
    mergeable: bool


@dataclass(slots=True)
class _Pending:
    submission: Submission
    fallback: QueueMode
    kind: Literal["steer", "redirect"]


@dataclass(slots=True)
class _Counters:
    submitted: int = 0
    started: int = 0
    merged: int = 0
    steered: int = 0
    rejected: int = 0
    cancelled: int = 0


_FALLBACK: dict[QueueMode, QueueMode] = {
    "steer": "followup",
    "steer_backlog": "collect",
    "redirect": "followup",
}


class ConversationQueue:
    """Queue-mode rules for one conversation key (see the module docstring)."""

    def __init__(
        self,
        key: str,
        *,
        max_pending: int = DEFAULT_MAX_PENDING,
        followup_window_ms: int = DEFAULT_FOLLOWUP_WINDOW_MS,
        max_merged_parts: int = DEFAULT_MAX_MERGED_PARTS,
        max_merged_chars: int = DEFAULT_MAX_MERGED_CHARS,
    ) -> None:
        if max_pending < 1:
            raise RouterUsageError("max_pending must be at least 1")
        self.key = key
        self.max_pending = max_pending
        self.followup_window_ms = followup_window_ms
        self.max_merged_parts = max_merged_parts
        self.max_merged_chars = max_merged_chars
        self._active: Submission | None = None
        self._queue: deque[_Item] = deque()
        self._pending: dict[str, _Pending] = {}
        self._last_followup_at_ms: int | None = None
        self._counters = _Counters()
        # Kept so the common paths (append, interrupt placement) need no scan of the queue.
        self._interrupts = 0
        self._goals = 0

    # -- read side -------------------------------------------------------------------------

    @property
    def active(self) -> Submission | None:
        return self._active

    @property
    def idle(self) -> bool:
        """No active run, nothing queued, no steer in flight: the queue may be discarded."""
        return self._active is None and not self._queue and not self._pending

    def queued_run_ids(self) -> tuple[str, ...]:
        return tuple(item.submission.run_id for item in self._queue)

    def pending_steer_run_ids(self) -> tuple[str, ...]:
        return tuple(self._pending)

    def statistics(self) -> QueueStatistics:
        c = self._counters
        return QueueStatistics(
            active_run_id=self._active.run_id if self._active else None,
            queued=len(self._queue),
            pending_steers=len(self._pending),
            max_pending=self.max_pending,
            submitted=c.submitted,
            started=c.started,
            merged=c.merged,
            steered=c.steered,
            rejected=c.rejected,
            cancelled=c.cancelled,
        )

    # -- intake ----------------------------------------------------------------------------

    def submit(self, sub: Submission, now_ms: int) -> tuple[Receipt, list[Effect]]:
        """Admit one submission according to its queue mode."""
        self._counters.submitted += 1
        requested = sub.queue_mode
        mode = requested
        if mode == "followup" and sub.auto_kind in ("task", "delegated") and self._active:
            # An async subagent completing must reach the live parent run: promote to steer.
            mode = "steer"
        effects: list[Effect] = []
        if mode in _FALLBACK:
            if self._active is not None:
                if self._full():
                    return self._reject(sub, requested, mode, now_ms), effects
                kind: Literal["steer", "redirect"] = "redirect" if mode == "redirect" else "steer"
                self._pending[sub.run_id] = _Pending(
                    submission=sub, fallback=_FALLBACK[mode], kind=kind
                )
                effects.append(
                    SendSteer(submission=sub, kind=kind, active_run_id=self._active.run_id)
                )
                receipt = Receipt(
                    run_id=sub.run_id,
                    session_key=sub.session_key,
                    requested_mode=requested,
                    actual_mode=mode,
                    status="dispatched_to_active",
                    at_ms=now_ms,
                    active_run_id=self._active.run_id,
                )
                return receipt, effects
            # No active run: fall back right away.
            fallback = _FALLBACK[mode]
            receipt = self._enqueue(sub, requested, fallback, now_ms, effects, fallback=True)
            return receipt, effects
        receipt = self._enqueue(sub, requested, mode, now_ms, effects, fallback=False)
        return receipt, effects

    def _full(self) -> bool:
        return len(self._queue) + len(self._pending) >= self.max_pending

    def _reject(
        self, sub: Submission, requested: QueueMode, actual: QueueMode, now_ms: int
    ) -> Receipt:
        self._counters.rejected += 1
        return Receipt(
            run_id=sub.run_id,
            session_key=sub.session_key,
            requested_mode=requested,
            actual_mode=actual,
            status="rejected",
            at_ms=now_ms,
            reason=(
                f"queue_full: {self.max_pending} messages already wait in this conversation; "
                "wait for the current run or cancel it"
            ),
        )

    def _enqueue(
        self,
        sub: Submission,
        requested: QueueMode,
        mode: QueueMode,
        now_ms: int,
        effects: list[Effect],
        *,
        fallback: bool,
        counted: bool = False,
        start: bool = True,
    ) -> Receipt:
        """Queue ``sub`` with ``mode`` (collect, followup or interrupt); start it if idle.

        ``counted`` means the submission already holds a slot (a pending steer falling back).
        """
        if mode == "followup":
            mergeable = sub.auto_kind not in ("task", "delegated")
            previous = self._last_followup_at_ms
            self._last_followup_at_ms = now_ms
            target = self._queue[-1] if self._queue else None
            if (
                mergeable
                and target is not None
                and target.mode == "followup"
                and target.mergeable
                and previous is not None
                and now_ms - previous <= self.followup_window_ms
                and target.submission.session_key == sub.session_key
                and target.submission.parts + sub.parts <= self.max_merged_parts
                and len(target.submission.prompt) + 1 + len(sub.prompt) <= self.max_merged_chars
            ):
                return self._merge(target, sub, requested, now_ms, effects, fallback=fallback)
        else:
            mergeable = False
        if not counted and self._full():
            return self._reject(sub, requested, mode, now_ms)
        item = _Item(submission=sub, mode=mode, mergeable=mergeable)
        if mode == "interrupt":
            index = self._interrupts  # behind earlier interrupts, ahead of everything else
            if self._active is not None:
                effects.append(CancelActive(run_id=self._active.run_id, reason="interrupted"))
        elif mode == "collect" and sub.auto_kind is None and self._goals:
            index = next(
                (i for i, q in enumerate(self._queue) if q.submission.auto_kind == "goal"),
                len(self._queue),
            )
        else:
            index = len(self._queue)
        self._insert(index, item)
        if start:
            self._start_next(effects)
        started = self._active is not None and self._active.run_id == sub.run_id
        return Receipt(
            run_id=sub.run_id,
            session_key=sub.session_key,
            requested_mode=requested,
            actual_mode=mode,
            status="started" if started else ("fallback_queued" if fallback else "queued"),
            at_ms=now_ms,
            position=None if started else index,
        )

    def _insert(self, index: int, item: _Item) -> None:
        if index == len(self._queue):
            self._queue.append(item)
        else:
            self._queue.insert(index, item)
        self._interrupts += item.mode == "interrupt"
        self._goals += item.submission.auto_kind == "goal"

    def _remove(self, item: _Item) -> None:
        if self._queue and self._queue[0] is item:
            self._queue.popleft()
        else:
            self._queue.remove(item)
        self._interrupts -= item.mode == "interrupt"
        self._goals -= item.submission.auto_kind == "goal"

    def _merge(
        self,
        target: _Item,
        sub: Submission,
        requested: QueueMode,
        now_ms: int,
        effects: list[Effect],
        *,
        fallback: bool,
    ) -> Receipt:
        # Newer run id, session and metadata win; prompts are joined oldest first.
        old = target.submission
        merged = replace(
            sub,
            prompt=f"{old.prompt}\n{sub.prompt}",
            merged_run_ids=(*old.merged_run_ids, old.run_id, *sub.merged_run_ids),
        )
        target.submission = merged
        self._counters.merged += 1
        effects.append(
            Settled(
                run_id=old.run_id,
                session_key=old.session_key,
                outcome="merged",
                into_run_id=sub.run_id,
                reason="followup within the merge window",
            )
        )
        return Receipt(
            run_id=sub.run_id,
            session_key=sub.session_key,
            requested_mode=requested,
            actual_mode="followup",
            status="fallback_queued" if fallback else "queued",
            at_ms=now_ms,
            position=len(self._queue) - 1,
            reason=f"merged with earlier followup {old.run_id}",
        )

    def _start_next(self, effects: list[Effect]) -> None:
        if self._active is None and self._queue:
            item = self._queue[0]
            self._remove(item)
            self._active = item.submission
            self._counters.started += 1
            effects.append(StartRun(submission=item.submission))

    # -- lifecycle facts -------------------------------------------------------------------

    def steer_result(self, run_id: str, *, accepted: bool, now_ms: int) -> list[Effect]:
        """The active run took (or refused) the steer ``run_id``. Unknown ids are ignored."""
        pending = self._pending.pop(run_id, None)
        effects: list[Effect] = []
        if pending is None:
            return effects
        sub = pending.submission
        if accepted:
            self._counters.steered += 1
            into = self._active.run_id if self._active else None
            effects.append(
                Settled(
                    run_id=run_id,
                    session_key=sub.session_key,
                    outcome="steered",
                    into_run_id=into,
                    reason=f"{pending.kind} taken by the active run",
                )
            )
            return effects
        self._fall_back(pending, now_ms, effects, reason=f"{pending.kind} not accepted")
        self._start_next(effects)
        return effects

    def _fall_back(
        self, pending: _Pending, now_ms: int, effects: list[Effect], *, reason: str
    ) -> None:
        sub = pending.submission
        # Never start from here: the Requeued report must precede any StartRun of this run.
        receipt = self._enqueue(
            sub,
            sub.queue_mode,
            pending.fallback,
            now_ms,
            effects,
            fallback=True,
            counted=True,
            start=False,
        )
        effects.append(
            Requeued(
                run_id=sub.run_id,
                session_key=sub.session_key,
                mode=pending.fallback,
                position=receipt.position,
                reason=reason,
            )
        )

    def run_ended(self, run_id: str, now_ms: int) -> list[Effect]:
        """The active run ``run_id`` is over (completed, failed, cancelled or never started)."""
        effects: list[Effect] = []
        if self._active is None or self._active.run_id != run_id:
            return effects
        self._active = None
        # Steers still waiting for an answer from that run fall back in submission order.
        pending = list(self._pending.values())
        self._pending.clear()
        for p in pending:
            self._fall_back(p, now_ms, effects, reason="the active run ended before answering")
        self._start_next(effects)
        return effects

    # -- cancellation ----------------------------------------------------------------------

    def abort_run(self, run_id: str, *, reason: str = "aborted") -> list[Effect]:
        """Drop ``run_id`` if it waits; cancel it if it is the active run."""
        effects: list[Effect] = []
        if self._active is not None and self._active.run_id == run_id:
            effects.append(CancelActive(run_id=run_id, reason=reason))
            return effects
        for item in list(self._queue):
            if item.submission.run_id == run_id:
                self._remove(item)
                effects.append(self._cancelled(item.submission, reason))
        pending = self._pending.pop(run_id, None)
        if pending is not None:
            effects.append(self._cancelled(pending.submission, reason))
        return effects

    def abort_session(self, session_key: str, *, reason: str = "aborted") -> list[Effect]:
        """Drop everything ``session_key`` has waiting here and cancel its active run."""
        effects: list[Effect] = []
        for item in [q for q in self._queue if q.submission.session_key == session_key]:
            self._remove(item)
            effects.append(self._cancelled(item.submission, reason))
        for run_id, p in list(self._pending.items()):
            if p.submission.session_key == session_key:
                del self._pending[run_id]
                effects.append(self._cancelled(p.submission, reason))
        if self._active is not None and self._active.session_key == session_key:
            effects.append(CancelActive(run_id=self._active.run_id, reason=reason))
        return effects

    def _cancelled(self, sub: Submission, reason: str) -> Settled:
        self._counters.cancelled += 1
        return Settled(
            run_id=sub.run_id, session_key=sub.session_key, outcome="cancelled", reason=reason
        )
