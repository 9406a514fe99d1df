"""Hypothesis state machine over the conversation queue.

Checked after every step: at most one active run; every submission is in exactly one place
(waiting, steer in flight, active, ran, merged, steered, rejected, cancelled); starts follow the
documented order (interrupts first, then first-in first-out). At teardown everything drains and
every submission has exactly one terminal account.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from lemon_router import (
    CancelActive,
    ConversationQueue,
    Effect,
    QueueMode,
    Requeued,
    SendSteer,
    Settled,
    StartRun,
    Submission,
)

SESSION = "agent:a:main"
MODES: list[QueueMode] = ["collect", "followup", "steer", "steer_backlog", "redirect", "interrupt"]


class QueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.q = ConversationQueue("k", max_pending=3)
        self.now = 0
        self.seq = 0
        self.submitted: list[str] = []
        self.active: str | None = None
        # run id -> (priority class, enqueue sequence): the model of who waits, and in what order
        self.waiting: dict[str, tuple[int, int]] = {}
        self.in_flight: set[str] = set()
        self.outcome: dict[str, str] = {}
        self.cancel_requested: set[str] = set()

    # -- effect bookkeeping ------------------------------------------------------------------

    def _key(self, mode: QueueMode) -> tuple[int, int]:
        self.seq += 1
        return (0 if mode == "interrupt" else 1, self.seq)

    def _apply(self, effects: list[Effect]) -> None:
        for e in effects:
            if isinstance(e, StartRun):
                rid = e.submission.run_id
                assert self.active is None, "a second run started while one is active"
                assert rid in self.waiting, f"{rid} started without waiting"
                assert self.waiting[rid] == min(self.waiting.values()), "start order broken"
                del self.waiting[rid]
                self.active = rid
            elif isinstance(e, SendSteer):
                assert e.active_run_id == self.active
            elif isinstance(e, CancelActive):
                assert e.run_id == self.active
                self.cancel_requested.add(e.run_id)
            elif isinstance(e, Settled):
                place = self.waiting.get(e.run_id)
                self._settle(e.run_id, e.outcome)
                if e.outcome == "merged":
                    assert e.into_run_id is not None
                    assert place is not None, "merged into an item that was not waiting"
                    # The merged item keeps the earlier item's place in the queue.
                    self.waiting[e.into_run_id] = place
            elif isinstance(e, Requeued):
                assert e.run_id in self.in_flight
                self.in_flight.discard(e.run_id)
                if e.run_id not in self.waiting:
                    self.waiting[e.run_id] = self._key(e.mode)

    def _settle(self, run_id: str, outcome: str) -> None:
        assert run_id not in self.outcome, f"{run_id} accounted for twice"
        self.outcome[run_id] = outcome
        self.waiting.pop(run_id, None)
        self.in_flight.discard(run_id)

    # -- rules -------------------------------------------------------------------------------

    @rule(mode=st.sampled_from(MODES), dt=st.integers(0, 700), task=st.booleans())
    def submit(self, mode: QueueMode, dt: int, task: bool) -> None:
        self.now += dt
        rid = f"r{len(self.submitted)}"
        self.submitted.append(rid)
        auto = "task" if task and mode == "followup" else None
        sub = Submission(
            run_id=rid, session_key=SESSION, prompt=rid, queue_mode=mode, auto_kind=auto
        )
        # A merge may hand this run id an earlier item's place, so pre-register the key first.
        key = self._key(receipt_mode := mode)
        receipt, effects = self.q.submit(sub, self.now)
        assert receipt.run_id == rid
        assert receipt.requested_mode == receipt_mode
        if receipt.status == "rejected":
            assert receipt.reason
            self._settle(rid, "rejected")
        elif receipt.status == "dispatched_to_active":
            self.in_flight.add(rid)
        else:
            merged = [e for e in effects if isinstance(e, Settled) and e.outcome == "merged"]
            if not merged:
                self.waiting[rid] = (0 if receipt.actual_mode == "interrupt" else 1, key[1])
        self._apply(effects)

    @precondition(lambda self: bool(self.in_flight))
    @rule(data=st.data(), accepted=st.booleans())
    def answer_steer(self, data: st.DataObject, accepted: bool) -> None:
        rid = data.draw(st.sampled_from(sorted(self.in_flight)))
        self.now += 1
        self._apply(self.q.steer_result(rid, accepted=accepted, now_ms=self.now))

    @precondition(lambda self: self.active is not None)
    @rule()
    def finish_active(self) -> None:
        rid = self.active
        assert rid is not None
        self.now += 1
        self._settle(rid, "ran")
        self.active = None
        self._apply(self.q.run_ended(rid, self.now))

    @precondition(lambda self: bool(self.waiting))
    @rule(data=st.data())
    def abort_one(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(sorted(self.waiting)))
        self._apply(self.q.abort_run(rid))

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def one_place_each(self) -> None:
        places: dict[str, int] = dict.fromkeys(self.submitted, 0)
        for rid in self.waiting:
            places[rid] += 1
        for rid in self.in_flight:
            places[rid] += 1
        if self.active is not None:
            places[self.active] += 1
        for rid, outcome in self.outcome.items():
            if outcome != "ran" or rid != self.active:
                places[rid] += 1
        assert all(n == 1 for n in places.values()), places

    @invariant()
    def model_matches_queue(self) -> None:
        assert set(self.q.queued_run_ids()) == set(self.waiting)
        assert set(self.q.pending_steer_run_ids()) == self.in_flight
        assert (self.q.active.run_id if self.q.active else None) == self.active
        stats = self.q.statistics()
        assert stats.queued + stats.pending_steers <= stats.max_pending

    def teardown(self) -> None:
        # Drain: answer every steer (rejecting), finish every run.
        for _ in range(1000):
            if self.in_flight:
                rid = sorted(self.in_flight)[0]
                self._apply(self.q.steer_result(rid, accepted=False, now_ms=self.now))
            elif self.active is not None:
                self.finish_active()
            else:
                break
        assert self.q.idle
        assert set(self.outcome) == set(self.submitted)


TestQueueMachine = QueueMachine.TestCase
TestQueueMachine.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
