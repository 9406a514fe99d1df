"""The SessionPort contract kit: what every :class:`~lemon_core.sessions.SessionPort` does.

An implementation runs it by subclassing :class:`SessionPortContract` and providing a
``session_harness`` fixture that returns a :class:`SessionPortHarness`: ports over one running
runtime whose executor is a :class:`~lemon_platform_test.executor.ScriptedExecutor`::

    class TestMyPort(SessionPortContract):
        @pytest.fixture
        async def session_harness(self, tmp_path):
            async with my_runtime(tmp_path) as harness:  # ports + the scripted executor
                yield harness

The kit owns no runtime code and imports only lemon_core (and this package's scripted
executor): the harness is the only
thing that knows how the runtime is built (the in-process router, or a WebSocket client of the
control plane in front of one).

Every wait is on an observable fact (a stream event, a :class:`Gate` reached); the timeout
(:attr:`SessionPortContract.timeout_s`) is only a failure guard, never part of the logic. To
know that nothing more arrives for a run, a test sends a *sentinel* message afterwards and
waits for its end: the session's events are one ordered stream, so whatever the earlier run
still had to say would have come first.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar, get_args

import pytest

from lemon_core.events import (
    ActionKind,
    ApprovalDecision,
    Delta,
    ErrorCode,
    Event,
    QueueOutcomeKind,
)
from lemon_core.execution import QueueMode, Receipt, RunRequest
from lemon_core.sessions import (
    ApprovalAsked,
    ApprovalEnded,
    QueueNotice,
    RunEnded,
    SessionPort,
    SessionSnapshot,
    SessionStream,
    SessionStreamClosedError,
    StreamOverflow,
    TextDelta,
    ToolCard,
)
from lemon_platform_test.executor import Gate, Script
from lemon_platform_test.session_harness import (
    SETTLING_OUTCOMES,
    SessionPortHarness,
    SessionRecorder,
    carrier,
    drain,
    run_ended,
    settlements,
)

__all__ = [
    "SETTLING_OUTCOMES",
    "SessionPortContract",
    "SessionPortHarness",
    "SessionRecorder",
    "run_ended",
    "settlements",
]

_MODES: tuple[QueueMode, ...] = get_args(QueueMode)
_STEER_MODES: frozenset[str] = frozenset({"steer", "steer_backlog", "redirect"})


class SessionPortContract:
    """The behaviour every SessionPort shares. Subclass it and define the
    ``session_harness`` fixture (see the module docstring)."""

    #: Failure guard for each wait (seconds); the waits themselves are on events.
    timeout_s: ClassVar[float] = 10.0
    #: The session most tests use (a canonical key of agent ``kit``).
    session_key: ClassVar[str] = "agent:kit:main"

    @pytest.fixture
    def session_harness(self) -> SessionPortHarness:
        raise NotImplementedError(
            "define a `session_harness` fixture returning a SessionPortHarness in the "
            "implementation's contract test class"
        )

    # -- helpers --------------------------------------------------------------------------

    def request(
        self, prompt: str, mode: QueueMode = "collect", *, session_key: str | None = None
    ) -> RunRequest:
        return RunRequest(
            origin="control_plane",
            session_key=session_key or self.session_key,
            prompt=prompt,
            queue_mode=mode,
        )

    def recorder(self, stream: SessionStream) -> SessionRecorder:
        return SessionRecorder(stream, timeout_s=self.timeout_s)

    async def wait(self, gate: Gate) -> None:
        """Wait until the executor is blocked on ``gate`` (guarded by the timeout)."""
        try:
            async with asyncio.timeout(self.timeout_s):
                await gate.reached()
        except TimeoutError:
            raise AssertionError(f"the executor never reached gate {gate.name!r}") from None

    async def snapshot(self, port: SessionPort, session_key: str | None = None) -> SessionSnapshot:
        """A consistent snapshot: ``retry`` answers are asked again (a bounded number of
        times; nothing changes in the session while the kit holds its gates)."""
        key = session_key or self.session_key
        for _ in range(100):
            snap = await port.snapshot(key)
            if snap.status == "ok":
                return snap
        raise AssertionError(f"snapshot of {key!r} said 'retry' 100 times in a row")

    async def sentinel(self, harness: SessionPortHarness, events: SessionRecorder) -> RunEnded:
        """Send one more message and wait for its end: everything published before it about
        earlier runs has then been seen on ``events``."""
        receipt = await harness.port.submit(self.request("sentinel"))
        ended = await events.ended_run(receipt.run_id)
        assert ended.ok, ended
        return ended

    # -- the harness ----------------------------------------------------------------------

    async def test_the_harness_offers_two_distinct_ports_over_one_runtime(
        self, session_harness: SessionPortHarness
    ) -> None:
        assert isinstance(session_harness, SessionPortHarness)
        for port in (session_harness.port, session_harness.other_port):
            assert isinstance(port, SessionPort)
        assert session_harness.port is not session_harness.other_port
        small = session_harness.port_with(stream_max_entries=4)
        assert isinstance(small, SessionPort)
        stream = small.watch(self.session_key)
        try:
            assert isinstance(stream, SessionStream)
            assert stream.session_key == self.session_key
            was_open = not stream.closed
            assert was_open
        finally:
            stream.close()
        assert stream.closed
        stream.close()  # idempotent

    # -- burst into a busy session, every queue mode --------------------------------------

    @pytest.mark.parametrize(
        ("mode", "steerable"),
        [(m, False) for m in _MODES] + [(m, True) for m in _MODES if m in _STEER_MODES],
        ids=list(_MODES) + [f"{m}-steerable" for m in _MODES if m in _STEER_MODES],
    )
    async def test_a_burst_of_20_into_a_busy_session_accounts_for_every_message(
        self, session_harness: SessionPortHarness, mode: QueueMode, steerable: bool
    ) -> None:
        harness = session_harness
        gate = Gate("busy")
        busy = Script().steering("accept") if steerable else Script()
        busy.delta("working").gate(gate).echo_steers().complete()
        harness.executor.script_prompt("busy", busy)
        async with self.recorder(harness.port.watch(self.session_key)) as events:
            first = await harness.port.submit(self.request("busy"))
            await self.wait(gate)
            burst = [await harness.port.submit(self.request(f"m{i}", mode)) for i in range(20)]
            gate.open()
            receipts = [first, *burst]
            admitted = [r for r in receipts if r.status != "rejected"]
            for r in receipts:
                if r.status == "rejected":
                    assert r.reason, f"a rejected receipt says why: {r}"
            await events.until(
                lambda evs: all(settlements(evs, r.run_id) for r in admitted),
                "a settlement of every admitted message",
            )
            await self.sentinel(harness, events)
            seen = events.events
        for r in receipts:
            settled = settlements(seen, r.run_id)
            if r.status == "rejected":
                assert settled == [], f"{r.run_id}: rejected at the door, yet {settled}"
            else:
                assert len(settled) == 1, f"{r.run_id} ({r.status}): settled by {settled}"
        ends = {e.run_id: e for e in seen if isinstance(e, RunEnded)}
        for r in admitted:
            # A merged or steered message lives on in the run it went into: following
            # ``into_run_id`` leads to a run that ended.
            into = carrier(seen, r.run_id)
            assert into in ends, f"{r.run_id} went into {into}, which never ended"
        executor = harness.executor
        if mode == "interrupt":
            # Each interrupt ends whatever runs when it arrives: every message is its own
            # run that completed or was cancelled; the last one completes.
            for r in receipts:
                end = ends.get(r.run_id)
                assert end is not None, f"interrupt {r.run_id} is not a run of its own"
                assert end.ok or end.error_code is ErrorCode.CANCELLED, end
            assert ends[first.run_id].error_code is ErrorCode.CANCELLED
            assert ends[burst[-1].run_id].ok
            return
        # Nothing lost, nothing doubled: each message reached the executor exactly once,
        # as (part of) a prompt or as a steer the running answer took.
        texts = [
            line
            for run_id in executor.order
            for line in executor.record(run_id).job.prompt.split("\n")
            if line != "sentinel"
        ]
        texts += [t for run_id in executor.order for t in executor.record(run_id).steers]
        expected = ["busy"] + [f"m{i}" for i in range(20) if burst[i].status != "rejected"]
        assert sorted(texts) == sorted(expected)
        assert all(e.ok for e in ends.values()), [e for e in ends.values() if not e.ok]
        if mode in ("collect", "steer_backlog") and not steerable:
            assert texts == expected  # one run per message, in order

    # -- overflow and snapshot recovery ---------------------------------------------------

    async def test_a_suspended_watcher_overflows_once_and_recovers_by_snapshot_without_duplicates(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        first_gate, second_gate = Gate("first"), Gate("second")
        early = [f"a{i} " for i in range(60)]
        middle = ["b1 ", "b2 ", "b3 "]
        late = ["c1 ", "c2 ", "c3 "]
        full = "".join(early + middle + late)
        harness.executor.script_prompt(
            "long answer",
            Script()
            .delta(*early)
            .gate(first_gate)
            .delta(*middle)
            .gate(second_gate)
            .delta(*late)
            .complete(answer=full),
        )
        small = harness.port_with(stream_max_entries=8)
        suspended = small.watch(self.session_key)  # never read while the answer streams
        async with self.recorder(harness.port.watch(self.session_key)) as probe:
            receipt = await harness.port.submit(self.request("long answer"))
            # The probe has seen the 60th delta: the suspended stream was offered it too.
            await probe.until(
                lambda evs: any(isinstance(e, TextDelta) and e.seq == len(early) for e in evs),
                f"text delta #{len(early)}",
            )
            backlog = await drain(suspended, self.timeout_s)
            overflows = [e for e in backlog if isinstance(e, StreamOverflow)]
            assert len(overflows) == 1, backlog
            assert backlog[-1] is overflows[0], backlog
            assert len(backlog) <= 8 + 1
            assert suspended.closed
            with pytest.raises(SessionStreamClosedError):
                await suspended.get()
            assert small.statistics().streams_overflowed == 1

            # Recover: watch again, then take the snapshot; the stream and the snapshot
            # overlap (the middle deltas are in both), the seq filter removes the overlap.
            async with self.recorder(small.watch(self.session_key)) as again:
                first_gate.open()
                await self.wait(second_gate)
                snap = await self.snapshot(small)
                active = snap.active
                assert active is not None
                assert active.run_id == receipt.run_id
                assert active.text == "".join(early + middle)
                assert active.text_seq == len(early) + len(middle)
                assert not active.text_truncated
                second_gate.open()
                ended = await again.ended_run(receipt.run_id)
                shown = active.text
                for e in again.events:
                    if (
                        isinstance(e, TextDelta)
                        and e.run_id == active.attempt_id
                        and e.seq > active.text_seq
                    ):
                        shown += e.text
        assert shown == full
        assert ended.ok
        assert ended.answer == full

    # -- approvals ------------------------------------------------------------------------

    async def test_an_approval_resolved_through_another_port_does_not_reappear(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        gate = Gate("tool")
        harness.executor.script_prompt(
            "clean up", Script().delta("checking").gate(gate).complete(answer="cleaned")
        )
        async with self.recorder(harness.port.watch(self.session_key)) as events:
            receipt = await harness.port.submit(self.request("clean up"))
            await self.wait(gate)
            running = await self.snapshot(harness.port)
            assert running.active is not None
            approval_id = await harness.ask_approval(
                session_key=self.session_key,
                run_id=running.active.attempt_id,
                tool="bash",
                action={"command": "rm -rf build"},
            )
            asked = await events.until(
                lambda evs: any(
                    isinstance(e, ApprovalAsked) and e.approval_id == approval_id for e in evs
                ),
                f"ApprovalAsked {approval_id}",
            )
            (ask,) = [e for e in asked if isinstance(e, ApprovalAsked)]
            assert ask.tool == "bash"
            assert ask.run_id == running.active.attempt_id
            # One stream, in order: the run's text before the question it led to.
            text_at = next(i for i, e in enumerate(asked) if isinstance(e, TextDelta))
            assert text_at < asked.index(ask)
            for port in (harness.port, harness.other_port):
                pending = (await self.snapshot(port)).pending_approvals
                assert [p.approval_id for p in pending] == [approval_id]

            decided = await harness.other_port.resolve_approval(approval_id, "approve_once")
            assert decided.resolved, decided
            assert await harness.approval_outcome(approval_id) is ApprovalDecision.APPROVE_ONCE
            await events.until(
                lambda evs: any(
                    isinstance(e, ApprovalEnded) and e.approval_id == approval_id for e in evs
                ),
                f"ApprovalEnded {approval_id}",
            )
            for port in (harness.port, harness.other_port):
                assert (await self.snapshot(port)).pending_approvals == ()
                again = await port.resolve_approval(approval_id, "deny")
                assert not again.resolved, again
                assert again.reason
            gate.open()
            ended = await events.ended_run(receipt.run_id)
            assert ended.ok
            assert ended.answer == "cleaned"
            await self.sentinel(harness, events)
            ends = [
                e
                for e in events.events
                if isinstance(e, ApprovalEnded) and e.approval_id == approval_id
            ]
        assert [e.decision for e in ends] == [ApprovalDecision.APPROVE_ONCE]
        fresh = await self.snapshot(harness.port)
        assert fresh.pending_approvals == ()

    async def test_an_approval_still_open_when_its_run_ends_ends_right_after_it(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        gate = Gate("tool")
        harness.executor.script_prompt("risky", Script().gate(gate).complete())
        async with self.recorder(harness.port.watch(self.session_key)) as events:
            receipt = await harness.port.submit(self.request("risky"))
            await self.wait(gate)
            running = await self.snapshot(harness.port)
            assert running.active is not None
            approval_id = await harness.ask_approval(
                session_key=self.session_key,
                run_id=running.active.attempt_id,
                tool="bash",
                action={"command": "make deploy"},
            )
            await events.until(
                lambda evs: any(isinstance(e, ApprovalAsked) for e in evs), "ApprovalAsked"
            )
            await harness.port.cancel(run_id=receipt.run_id)
            await events.until(
                lambda evs: any(
                    isinstance(e, ApprovalEnded) and e.approval_id == approval_id for e in evs
                ),
                f"ApprovalEnded {approval_id}",
            )
            end = run_ended(events.events, receipt.run_id)
            (closing,) = [
                e
                for e in events.events
                if isinstance(e, ApprovalEnded) and e.approval_id == approval_id
            ]
        assert end is not None
        assert events.events.index(end) < events.events.index(closing)
        assert closing.decision in (ApprovalDecision.EXPIRED, ApprovalDecision.CANCELLED)

    async def test_resolving_an_unknown_approval_says_so_and_a_bad_decision_raises(
        self, session_harness: SessionPortHarness
    ) -> None:
        result = await session_harness.port.resolve_approval("appr_unknown", "approve_once")
        assert not result.resolved
        assert result.reason
        with pytest.raises(ValueError, match="decision"):
            await session_harness.port.resolve_approval("appr_unknown", "approve_forever")

    # -- cancel ---------------------------------------------------------------------------

    async def test_cancel_of_a_queued_run_settles_it_as_cancelled_and_spares_the_active_one(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        gate = Gate("hold")
        harness.executor.script_prompt("hold", Script().gate(gate).complete(answer="held"))
        async with self.recorder(harness.port.watch(self.session_key)) as events:
            active = await harness.port.submit(self.request("hold"))
            await self.wait(gate)
            waiting = await harness.port.submit(self.request("waiting"))
            assert waiting.status == "queued"
            assert (await self.snapshot(harness.port)).queued == (waiting.run_id,)
            result = await harness.port.cancel(run_id=waiting.run_id)
            assert result.cancelled == 1
            assert result.run_ids == (waiting.run_id,)
            await events.until(
                lambda evs: bool(settlements(evs, waiting.run_id)), "the queued run's settlement"
            )
            (notice,) = settlements(events.events, waiting.run_id)
            assert isinstance(notice, QueueNotice)
            assert notice.outcome is QueueOutcomeKind.CANCELLED
            assert (await self.snapshot(harness.port)).queued == ()
            again = await harness.port.cancel(run_id=waiting.run_id)
            assert again.cancelled == 0
            assert again.run_ids == ()
            gate.open()
            ended = await events.ended_run(active.run_id)
            assert ended.ok
            assert ended.answer == "held"
            await self.sentinel(harness, events)
            assert settlements(events.events, waiting.run_id) == [notice]
        assert waiting.run_id not in harness.executor.records

    async def test_cancel_of_a_running_run_ends_it_once_with_error_code_cancelled(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        gate = Gate("hold")
        harness.executor.script_prompt("hold", Script().delta("partial").gate(gate).complete())
        async with self.recorder(harness.port.watch(self.session_key)) as events:
            receipt = await harness.port.submit(self.request("hold"))
            await self.wait(gate)
            result = await harness.other_port.cancel(run_id=receipt.run_id)
            assert result.cancelled == 1
            assert result.run_ids == (receipt.run_id,)
            ended = await events.ended_run(receipt.run_id)
            assert not ended.ok
            assert ended.error_code is ErrorCode.CANCELLED, ended
            await self.sentinel(harness, events)
            assert len(settlements(events.events, receipt.run_id)) == 1
        assert harness.executor.record(receipt.run_id).cancelled
        assert (await self.snapshot(harness.port)).active is None

    async def test_cancel_of_a_session_reaches_its_active_and_every_queued_run(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        gate = Gate("hold")
        harness.executor.script_prompt("hold", Script().gate(gate).complete())
        async with self.recorder(harness.port.watch(self.session_key)) as events:
            active = await harness.port.submit(self.request("hold"))
            await self.wait(gate)
            queued = [await harness.port.submit(self.request(f"q{i}")) for i in range(2)]
            result = await harness.port.cancel(session_key=self.session_key)
            everyone = {active.run_id, *(q.run_id for q in queued)}
            assert result.cancelled == 3, result
            assert set(result.run_ids) == everyone, result
            await events.until(
                lambda evs: all(settlements(evs, r) for r in everyone), "every settlement"
            )
            ended = run_ended(events.events, active.run_id)
            assert ended is not None
            assert ended.error_code is ErrorCode.CANCELLED
            for q in queued:
                (notice,) = settlements(events.events, q.run_id)
                assert isinstance(notice, QueueNotice)
                assert notice.outcome is QueueOutcomeKind.CANCELLED
            nothing = await harness.port.cancel(session_key=self.session_key)
            assert nothing.cancelled == 0
            assert nothing.run_ids == ()

    async def test_cancel_of_a_session_without_its_queue_lets_the_queued_run_go_on(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        gate = Gate("hold")
        harness.executor.script_prompt("hold", Script().gate(gate).complete())
        async with self.recorder(harness.port.watch(self.session_key)) as events:
            active = await harness.port.submit(self.request("hold"))
            await self.wait(gate)
            queued = await harness.port.submit(self.request("next one"))
            result = await harness.port.cancel(session_key=self.session_key, include_queued=False)
            assert result.cancelled == 1
            assert result.run_ids == (active.run_id,)
            assert (await events.ended_run(active.run_id)).error_code is ErrorCode.CANCELLED
            ended = await events.ended_run(queued.run_id)
            assert ended.ok
            assert ended.answer == "Echo: next one"

    async def test_cancel_takes_exactly_one_of_run_id_and_session_key(
        self, session_harness: SessionPortHarness
    ) -> None:
        port = session_harness.port
        with pytest.raises(ValueError, match="run_id"):
            await port.cancel()
        with pytest.raises(ValueError, match="run_id"):
            await port.cancel(run_id="run_x", session_key=self.session_key)
        assert (await port.cancel(run_id="run_never_seen")).cancelled == 0

    # -- steer ----------------------------------------------------------------------------

    async def test_steer_into_a_steerable_running_answer_is_accepted(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        gate = Gate("hold")
        harness.executor.script_prompt(
            "long", Script().steering("accept").gate(gate).echo_steers().complete()
        )
        async with self.recorder(harness.port.watch(self.session_key)) as events:
            first = await harness.port.submit(self.request("long"))
            await self.wait(gate)
            result = await harness.port.steer(self.session_key, "look at the tests too")
            assert result.status == "accepted", result
            assert result.run_id is not None
            steer_id = result.run_id
            await events.until(lambda evs: bool(settlements(evs, steer_id)), "the steer's notice")
            (notice,) = settlements(events.events, steer_id)
            assert isinstance(notice, QueueNotice)
            assert notice.outcome is QueueOutcomeKind.STEERED
            assert notice.into_run_id == first.run_id
            gate.open()
            ended = await events.ended_run(first.run_id)
            assert ended.ok
            assert ended.answer == "steered: look at the tests too"
            await self.sentinel(harness, events)
            assert run_ended(events.events, steer_id) is None
        assert harness.executor.record(first.run_id).steers == ["look at the tests too"]
        assert steer_id not in harness.executor.records

    async def test_steer_the_running_answer_cannot_take_is_queued_as_the_next_message(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        gate = Gate("hold")
        harness.executor.script_prompt("long", Script().gate(gate).complete(answer="long"))
        async with self.recorder(harness.port.watch(self.session_key)) as events:
            first = await harness.port.submit(self.request("long"))
            await self.wait(gate)
            result = await harness.port.steer(self.session_key, "and then this")
            assert result.status == "queued", result
            assert result.run_id is not None
            gate.open()
            assert (await events.ended_run(first.run_id)).ok
            ended = await events.ended_run(result.run_id)
            assert ended.ok
            assert ended.answer == "Echo: and then this"

    async def test_steer_into_an_idle_session_is_refused_and_queues_nothing(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        result = await harness.port.steer(self.session_key, "anyone there?")
        assert result.status == "refused", result
        assert result.reason
        snap = await self.snapshot(harness.port)
        assert snap.active is None
        assert snap.queued == ()
        assert harness.executor.records == {}
        async with self.recorder(harness.port.watch(self.session_key)) as events:
            done = await harness.port.submit(self.request("quick"))
            await events.ended_run(done.run_id)
            after = await harness.port.steer(self.session_key, "too late")
        assert after.status == "refused", after
        assert list(harness.executor.records) == [done.run_id]

    # -- late events ----------------------------------------------------------------------

    async def test_events_of_a_finished_run_arriving_late_are_rejected(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        gate = Gate("hold")
        harness.executor.script_prompt(
            "slow", Script().delta("live ").gate(gate).complete(answer="live answer")
        )

        def delta(attempt: str, seq: int, text: str) -> Event:
            payload = Delta.new(run_id=attempt, seq=seq, text=text)
            return Event.new("delta", payload, {"run_id": attempt, "session_key": self.session_key})

        async with self.recorder(harness.port.watch(self.session_key)) as events:
            done = await harness.port.submit(self.request("slow"))
            await self.wait(gate)
            # Control: while the attempt runs, an event published this way is yielded.
            harness.publish_on_session(self.session_key, delta(done.run_id, 50, "injected"))
            await events.until(
                lambda evs: any(isinstance(e, TextDelta) and e.text == "injected" for e in evs),
                "the injected delta of the live attempt",
            )
            gate.open()
            ended = await events.ended_run(done.run_id)
            attempt = ended.attempt_id
            harness.publish_on_session(self.session_key, delta(attempt, 51, "late text"))
            await self.sentinel(harness, events)
            texts = [
                e.text for e in events.events if isinstance(e, TextDelta) and e.run_id == attempt
            ]
        # (The injected delta did not pass through the runtime's own forwarding, so its place
        # among the run's deltas is not part of the contract.)
        assert sorted(texts) == ["injected", "live "]
        assert len(settlements(events.events, done.run_id)) == 1

    # -- reading --------------------------------------------------------------------------

    async def test_snapshot_of_an_idle_session_is_empty_and_ok(
        self, session_harness: SessionPortHarness
    ) -> None:
        snap = await session_harness.port.snapshot("agent:kit:main:sub:idle")
        assert snap.status == "ok"
        assert snap.session_key == "agent:kit:main:sub:idle"
        assert snap.active is None
        assert snap.queued == ()
        assert snap.pending_approvals == ()
        assert snap.last_run_id is None
        assert snap.last_ok is None

    async def test_snapshot_of_a_running_session_shows_its_run_actions_and_queue(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        gate = Gate("hold")
        harness.executor.script_prompt(
            "work",
            Script()
            .delta("hello ", "world")
            .action(id="t1", kind=ActionKind.TOOL, title="read file", phase="started")
            .gate(gate)
            .action(id="t1", kind=ActionKind.TOOL, title="read file", phase="completed", ok=True)
            .complete(answer="hello world"),
        )
        async with self.recorder(harness.port.watch(self.session_key)) as events:
            receipt = await harness.port.submit(self.request("work"))
            await self.wait(gate)
            waiting = await harness.port.submit(self.request("after work"))
            snap = await self.snapshot(harness.other_port)
            active = snap.active
            assert active is not None
            assert active.run_id == receipt.run_id
            assert active.attempt_id == receipt.run_id
            assert active.attempt == 1
            assert not active.phase.terminal
            assert (active.text, active.text_seq) == ("hello world", 2)
            assert [(a.action_id, a.phase, a.title) for a in active.actions] == [
                ("t1", "started", "read file")
            ]
            assert snap.queued == (waiting.run_id,)
            gate.open()
            await events.ended_run(waiting.run_id)
            cards = [e for e in events.events if isinstance(e, ToolCard)]
            assert [(c.action_id, c.phase, c.run_id) for c in cards] == [
                ("t1", "started", receipt.run_id),
                ("t1", "completed", receipt.run_id),
            ]
            assert cards[-1].ok is True
            snap = await self.snapshot(harness.port)
            assert snap.active is None
            assert snap.queued == ()

    async def test_snapshot_redacts_credentials_in_the_running_answer(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        gate = Gate("hold")
        secret = "sk-" + "A1b2C3d4E5f6G7h8J9k0L1m2N3p4"
        harness.executor.script_prompt(
            "leaky", Script().delta(f"the key is {secret} ok").gate(gate).complete()
        )
        async with self.recorder(harness.port.watch(self.session_key)) as events:
            receipt = await harness.port.submit(self.request("leaky"))
            await self.wait(gate)
            snap = await self.snapshot(harness.port)
            gate.open()
            await events.ended_run(receipt.run_id)
        assert snap.active is not None
        assert secret not in snap.active.text
        assert snap.active.text.startswith("the key is ")

    async def test_a_retried_run_ends_once_under_the_id_it_was_submitted_with(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        harness.executor.script_prompt("fragile", Script().raise_error("worker killed"))
        async with self.recorder(harness.port.watch(self.session_key)) as events:
            receipt = await harness.port.submit(self.request("fragile"))
            ended = await events.ended_run(receipt.run_id)
            await self.sentinel(harness, events)
            assert len(settlements(events.events, receipt.run_id)) == 1
        executor = harness.executor
        attempts = [r for r in executor.order if executor.record(r).job.prompt == "fragile"]
        assert not ended.ok
        assert attempts[0] == receipt.run_id
        # The end names the submitted run and the attempt that ended (the last one; they
        # differ when the runtime retried).
        assert ended.attempt_id == attempts[-1]
        assert (ended.attempt_id != ended.run_id) == (len(attempts) > 1)

    async def test_snapshot_after_a_run_names_the_last_run(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        async with self.recorder(harness.port.watch(self.session_key)) as events:
            done = await harness.port.submit(self.request("quick"))
            await events.ended_run(done.run_id)
        snap = await self.snapshot(harness.other_port)
        assert snap.active is None
        assert (snap.last_run_id, snap.last_ok) == (done.run_id, True)

    async def test_sessions_lists_a_session_after_its_run_with_its_run_count(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        other = "agent:kit:other:acct:dm:peer"
        async with (
            self.recorder(harness.port.watch(self.session_key)) as events,
            self.recorder(harness.port.watch(other)) as other_events,
        ):
            for prompt in ("one", "two"):
                done = await harness.port.submit(self.request(prompt))
                await events.ended_run(done.run_id)
            last = await harness.port.submit(self.request("three", session_key=other))
            await other_events.ended_run(last.run_id)
        listed = await harness.other_port.sessions()
        by_key = {s.session_key: s for s in listed}
        assert [s.session_key for s in listed][:2] == [other, self.session_key]
        assert by_key[self.session_key].runs == 2
        assert by_key[other].runs == 1
        assert by_key[other].last_run_id == last.run_id
        assert by_key[other].last_ok is True
        assert not by_key[other].active
        assert len(await harness.port.sessions(limit=1)) == 1

    async def test_transcript_of_a_session_never_seen_is_an_empty_page_with_a_notice(
        self, session_harness: SessionPortHarness
    ) -> None:
        page = await session_harness.port.transcript("agent:kit:main:sub:never")
        assert page.session_key == "agent:kit:main:sub:never"
        assert page.entries == ()
        assert not page.more
        assert page.notice

    async def test_transcript_kept_by_no_one_is_an_empty_page_with_a_notice(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        async with self.recorder(harness.port.watch(self.session_key)) as events:
            done = await harness.port.submit(self.request("quick"))
            await events.ended_run(done.run_id)
        page = await harness.port.transcript(self.session_key)
        assert page.entries == ()
        assert not page.more
        assert page.notice

    # -- submission and statistics --------------------------------------------------------

    async def test_submit_of_a_malformed_session_key_raises_value_error(
        self, session_harness: SessionPortHarness
    ) -> None:
        with pytest.raises(ValueError, match="session key"):
            await session_harness.port.submit(self.request("hi", session_key="agent:"))

    async def test_watch_and_snapshot_of_a_malformed_session_key_raise_value_error(
        self, session_harness: SessionPortHarness
    ) -> None:
        with pytest.raises(ValueError, match="session key"):
            session_harness.port.watch("agent:")
        with pytest.raises(ValueError, match="session key"):
            await session_harness.port.snapshot("agent:x:tg")

    async def test_statistics_count_watchers_and_submissions(
        self, session_harness: SessionPortHarness
    ) -> None:
        port = session_harness.port
        before = port.statistics()
        stream = port.watch(self.session_key)
        assert port.statistics().watchers == before.watchers + 1
        assert port.statistics().streams_opened == before.streams_opened + 1
        async with self.recorder(stream) as events:
            receipt: Receipt = await port.submit(self.request("count me"))
            await events.ended_run(receipt.run_id)
        after = port.statistics()
        assert after.watchers == before.watchers
        assert after.submitted >= before.submitted + 1
        assert after.active_runs == 0

    # -- settings, reset, delete ----------------------------------------------------------

    async def test_patch_sets_a_sessions_model_its_later_runs_use_until_it_is_cleared(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        port, other = harness.port, harness.other_port
        assert (await other.settings(self.session_key)).model is None
        patched = await port.patch(self.session_key, model="kit:model-b")
        assert (patched.session_key, patched.model) == (self.session_key, "kit:model-b")
        assert patched.updated_at_ms > 0
        seen = await other.settings(self.session_key)
        assert (seen.model, seen.label, seen.thinking_level) == ("kit:model-b", None, None)
        # Another setting keeps the model; a request naming a model keeps its own.
        both = await other.patch(self.session_key, thinking_level="high", label="work")
        assert (both.model, both.thinking_level, both.label) == ("kit:model-b", "high", "work")
        async with self.recorder(port.watch(self.session_key)) as events:
            first = await port.submit(self.request("with the session's model"))
            await events.ended_run(first.run_id)
            own = await port.submit(
                RunRequest(
                    origin="control_plane",
                    session_key=self.session_key,
                    prompt="with its own model",
                    model="kit:model-c",
                )
            )
            await events.ended_run(own.run_id)
            cleared = await port.patch(self.session_key, model=None)
            assert (cleared.model, cleared.thinking_level) == (None, "high")
            last = await port.submit(self.request("with the default again"))
            await events.ended_run(last.run_id)
        models = [harness.executor.record(r.run_id).job.model for r in (first, own, last)]
        assert models == ["kit:model-b", "kit:model-c", None]
        # Another session is untouched.
        assert (await other.settings("agent:kit:main:sub:else")).model is None

    async def test_patch_refuses_blank_models_unknown_thinking_levels_and_bad_keys(
        self, session_harness: SessionPortHarness
    ) -> None:
        port = session_harness.port
        with pytest.raises(ValueError, match="model"):
            await port.patch(self.session_key, model="  ")
        with pytest.raises(ValueError, match="thinking level"):
            await port.patch(self.session_key, thinking_level="extreme")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="session key"):
            await port.patch("agent:", model="kit:model-b")
        assert (await port.settings(self.session_key)).model is None

    async def test_reset_forgets_the_conversation_and_keeps_the_list_entry_and_settings(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        port = harness.port
        await port.patch(self.session_key, model="kit:model-b")
        async with self.recorder(port.watch(self.session_key)) as events:
            first = await port.submit(self.request("one"))
            await events.ended_run(first.run_id)
            second = await port.submit(self.request("two"))
            await events.ended_run(second.run_id)
            assert harness.executor.record(second.run_id).job.resume is not None
            assert (await self.snapshot(harness.other_port)).native_session_id is not None
            change = await harness.other_port.reset(self.session_key)
            assert (change.session_key, change.done) == (self.session_key, True)
            assert (await self.snapshot(port)).native_session_id is None
            third = await port.submit(self.request("three"))
            await events.ended_run(third.run_id)
        assert harness.executor.record(third.run_id).job.resume is None
        listed = {s.session_key: s for s in await port.sessions()}
        assert listed[self.session_key].runs == 3
        assert listed[self.session_key].model == "kit:model-b"
        assert (await port.settings(self.session_key)).model == "kit:model-b"

    async def test_delete_forgets_the_session_its_settings_and_its_list_entry(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        port = harness.port
        keep = "agent:kit:main:sub:keep"
        await port.patch(self.session_key, model="kit:model-b", label="gone soon")
        async with (
            self.recorder(port.watch(self.session_key)) as events,
            self.recorder(port.watch(keep)) as kept,
        ):
            done = await port.submit(self.request("one"))
            await events.ended_run(done.run_id)
            other = await port.submit(self.request("two", session_key=keep))
            await kept.ended_run(other.run_id)
        change = await harness.other_port.delete(self.session_key)
        assert change.done, change
        listed = [s.session_key for s in await port.sessions()]
        assert self.session_key not in listed
        assert keep in listed
        settings = await port.settings(self.session_key)
        assert (settings.model, settings.label) == (None, None)
        snap = await self.snapshot(port)
        assert (snap.native_session_id, snap.last_run_id) == (None, None)
        # The key can be used again: it starts a new session.
        async with self.recorder(port.watch(self.session_key)) as events:
            again = await port.submit(self.request("again"))
            await events.ended_run(again.run_id)
        assert harness.executor.record(again.run_id).job.resume is None
        assert {s.session_key: s.runs for s in await port.sessions()}[self.session_key] == 1

    async def test_reset_and_delete_of_a_busy_session_are_refused_and_change_nothing(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        gate = Gate("hold")
        harness.executor.script_prompt("hold", Script().gate(gate).complete(answer="held"))
        async with self.recorder(harness.port.watch(self.session_key)) as events:
            first = await harness.port.submit(self.request("one"))
            await events.ended_run(first.run_id)
            active = await harness.port.submit(self.request("hold"))
            await self.wait(gate)
            for change in (
                await harness.other_port.reset(self.session_key),
                await harness.other_port.delete(self.session_key),
            ):
                assert not change.done
                assert change.reason
                assert "busy" in change.reason
            gate.open()
            ended = await events.ended_run(active.run_id)
            assert ended.ok
        listed = {s.session_key: s.runs for s in await harness.port.sessions()}
        assert listed[self.session_key] == 2
        assert (await self.snapshot(harness.port)).native_session_id is not None

    # -- every session --------------------------------------------------------------------

    async def test_watch_all_sees_every_sessions_events_each_naming_its_session(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        fresh = "agent:kit:main:sub:never-seen-before"
        harness.executor.script_prompt("tell", Script().delta("a ", "b").complete(answer="a b"))
        stream = harness.other_port.watch_all()
        assert stream.session_key == "*"
        async with self.recorder(stream) as everything:
            ends = []
            for key in (self.session_key, fresh):
                async with self.recorder(harness.port.watch(key)) as events:
                    receipt = await harness.port.submit(self.request("tell", session_key=key))
                    await events.ended_run(receipt.run_id)
                    ends.append((key, receipt.run_id))
            for key, run_id in ends:
                ended = await everything.ended_run(run_id)
                assert ended.session_key == key
                assert ended.answer == "a b"
                texts = [
                    e.text
                    for e in everything.events
                    if isinstance(e, TextDelta) and e.run_id == run_id
                ]
                assert texts == ["a ", "b"]
                assert all(
                    e.session_key == key
                    for e in everything.events
                    if getattr(e, "run_id", None) == run_id
                )

    async def test_watch_all_is_one_bounded_stream_that_overflows_once(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        harness.executor.script_prompt(
            "flood", Script().delta(*[f"{i} " for i in range(40)]).complete(answer="done")
        )
        small = harness.port_with(stream_max_entries=4).watch_all()
        try:
            async with self.recorder(harness.port.watch(self.session_key)) as events:
                receipt = await harness.port.submit(self.request("flood"))
                await events.ended_run(receipt.run_id)
                await self.sentinel(harness, events)
            seen = await drain(small, self.timeout_s)
        finally:
            small.close()
        overflows = [e for e in seen if isinstance(e, StreamOverflow)]
        assert len(overflows) == 1
        assert seen[-1] is overflows[0]
        assert len(seen) <= 4 + 1
        with pytest.raises(SessionStreamClosedError):
            await small.get()

    # -- run history ----------------------------------------------------------------------

    async def test_runs_lists_finished_runs_newest_first_with_their_usage(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        other = "agent:kit:main:sub:runs"
        harness.executor.script_prompt(
            "costly",
            Script().complete(
                answer="ok",
                usage={
                    "input_tokens": 120,
                    "output_tokens": 30,
                    "cost_usd": 0.25,
                    "model": "kit:m",
                },
            ),
        )
        harness.executor.script_prompt("broken", Script().fail("no luck"))
        async with (
            self.recorder(harness.port.watch(self.session_key)) as events,
            self.recorder(harness.port.watch(other)) as other_events,
        ):
            first = await harness.port.submit(self.request("costly"))
            await events.ended_run(first.run_id)
            second = await harness.port.submit(self.request("broken", session_key=other))
            await other_events.ended_run(second.run_id)
        runs = await harness.other_port.runs()
        # Each run once, under the id it was submitted with (a retried one: its last attempt).
        assert [r.run_id for r in runs][:2] == [second.run_id, first.run_id]
        assert runs[1].attempt_id is None
        assert len(runs) == 2
        newest, costly = runs[0], runs[1]
        assert (newest.session_key, newest.ok) == (other, False)
        assert newest.error_code is not None
        assert (costly.session_key, costly.ok) == (self.session_key, True)
        assert costly.usage is not None
        assert (costly.usage.input_tokens, costly.usage.output_tokens) == (120, 30)
        assert costly.usage.cost_usd == 0.25
        assert costly.usage.model == "kit:m"
        assert costly.finished_at_ms >= costly.started_at_ms > 0
        assert [r.run_id for r in await harness.port.runs(limit=1)] == [second.run_id]
        later = await harness.port.runs(since_ms=newest.finished_at_ms + 1)
        assert later == []

    async def test_watch_all_carries_approvals_and_tool_cards_under_their_session(
        self, session_harness: SessionPortHarness
    ) -> None:
        harness = session_harness
        key = "agent:kit:main:sub:approvals"
        gate = Gate("tool")
        harness.executor.script_prompt(
            "ask",
            Script()
            .action(id="t1", title="bash: ls", phase="started", detail={"tool": "bash"})
            .gate(gate)
            .complete(answer="asked"),
        )
        async with (
            self.recorder(harness.other_port.watch_all()) as everything,
            self.recorder(harness.port.watch(key)) as events,
        ):
            receipt = await harness.port.submit(self.request("ask", session_key=key))
            await self.wait(gate)
            running = await self.snapshot(harness.port, key)
            assert running.active is not None
            approval_id = await harness.ask_approval(
                session_key=key,
                run_id=running.active.attempt_id,
                tool="bash",
                action={"command": "ls"},
            )
            asked = await everything.until(
                lambda evs: any(
                    isinstance(e, ApprovalAsked) and e.approval_id == approval_id for e in evs
                ),
                f"ApprovalAsked {approval_id} on the all-sessions stream",
            )
            decided = await harness.port.resolve_approval(approval_id, "approve_once")
            assert decided.resolved, decided
            gate.open()
            await events.ended_run(receipt.run_id)
            await everything.ended_run(receipt.run_id)
        mine = [e for e in everything.events if getattr(e, "run_id", None) == receipt.run_id]
        assert mine
        assert {e.session_key for e in everything.events if e in mine} == {key}
        assert any(isinstance(e, ToolCard) and e.action_id == "t1" for e in mine)
        (ask,) = [e for e in asked if isinstance(e, ApprovalAsked)]
        assert ask.session_key == key
        ended = [
            e
            for e in everything.events
            if isinstance(e, ApprovalEnded) and e.approval_id == approval_id
        ]
        assert [(e.session_key, e.decision) for e in ended] == [
            (key, ApprovalDecision.APPROVE_ONCE)
        ]
