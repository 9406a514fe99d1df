"""The session pump's coalescers and their bounds, against a hand-fed session port.

Overflow is forced, not hoped for: the pump's emit is held on a gate while the test pushes
more events than the ingress admits; the fake stream says when its reader took them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lemon_channels import TERMINAL_RUNS, SessionPump, TerminalRuns
from lemon_channels._coalescer import INTERRUPTION_HINT, MAX_SNAPSHOT_CHARS
from lemon_channels.testing import FakeSessionPort
from lemon_core.bus import ConsumerClass, Delivery
from lemon_core.channels import DeliveryIntent, DeliveryRoute, IntentKind
from lemon_core.events import ActionKind, ApprovalDecision, RunPhase
from lemon_core.sessions import (
    ActiveRun,
    ApprovalAsked,
    ApprovalEnded,
    PendingApproval,
    RunEnded,
    SessionSnapshot,
    StreamOverflow,
    TextDelta,
    ToolCard,
    TranscriptEntry,
)

KEY = "agent:default:telegram:1:dm:42"
ROUTE = DeliveryRoute(channel_id="telegram", account_id="1", peer_kind="dm", peer_id="42")


class Sink:
    """Collects intents; ``gate`` (when set up) holds emit after the first intent."""

    def __init__(self) -> None:
        self.intents: list[DeliveryIntent] = []
        self.changed = asyncio.Event()
        self.gate: asyncio.Event | None = None
        self.held = asyncio.Event()

    async def emit(self, intent: DeliveryIntent) -> None:
        self.intents.append(intent)
        self.changed.set()
        if self.gate is not None and not self.gate.is_set():
            self.held.set()
            await self.gate.wait()

    async def until(self, predicate: Callable[[], bool]) -> None:
        async def wait() -> None:
            while not predicate():
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(wait(), 10)

    def kinds(self) -> list[IntentKind]:
        return [i.kind for i in self.intents]

    def finals(self) -> list[DeliveryIntent]:
        return [i for i in self.intents if i.kind is IntentKind.FINAL_TEXT]


def delta(run: str, seq: int, text: str) -> TextDelta:
    return TextDelta(session_key=KEY, run_id=run, seq=seq, text=text)


def ended(run: str, answer: str, *, ok: bool = True) -> RunEnded:
    return RunEnded(session_key=KEY, run_id=run, attempt_id=run, ok=ok, answer=answer)


def card(run: str, action: str, phase: str, title: str = "bash") -> ToolCard:
    return ToolCard(
        session_key=KEY,
        run_id=run,
        action_id=action,
        phase=phase,  # type: ignore[arg-type]  # the tests pass valid phases
        kind=ActionKind.TOOL,
        title=title,
        ok=True if phase == "completed" else None,
    )


@pytest.fixture
def port() -> FakeSessionPort:
    return FakeSessionPort()


@pytest.fixture
def sink() -> Sink:
    return Sink()


@pytest.fixture
async def pump(port: FakeSessionPort, sink: Sink) -> AsyncIterator[SessionPump]:
    pump = SessionPump(
        port=port,
        session_key=KEY,
        route=ROUTE,
        emit=sink.emit,
        terminal=TerminalRuns(),
        edit_interval_s=0.0,
    )
    task = asyncio.ensure_future(pump.run())
    await asyncio.wait_for(pump.ready(), 10)
    yield pump
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_run_streams_snapshots_then_the_canonical_final_text(
    port: FakeSessionPort, sink: Sink, pump: SessionPump
) -> None:
    stream = await port.next_stream(1)
    stream.push(delta("r1", 1, "Hel"), delta("r1", 2, "lo"), ended("r1", "Hello, world."))
    await sink.until(lambda: bool(sink.finals()))
    snapshots = [i.text for i in sink.intents if i.kind is IntentKind.STREAM_SNAPSHOT]
    assert snapshots
    assert snapshots[-1] in ("Hel", "Hello")
    [final] = sink.finals()
    assert final.text == "Hello, world."
    assert final.slot == "r1:answer"
    assert all(i.slot == "r1:answer" for i in sink.intents)


async def test_overflow_fences_snapshots_resyncs_and_finalises_with_the_canonical_end(
    port: FakeSessionPort, sink: Sink, pump: SessionPump
) -> None:
    stream = await port.next_stream(1)
    sink.gate = asyncio.Event()
    stream.push(delta("r1", 1, "first "))
    await asyncio.wait_for(sink.held.wait(), 10)  # the consumer is suspended in emit
    stream.push(*(delta("r1", seq, "x") for seq in range(2, 402)), ended("r1", "CANONICAL"))
    await asyncio.wait_for(stream.drained.wait(), 10)  # the reader offered all of them
    assert pump.statistics().ingress_refused > 0
    sink.gate.set()
    await sink.until(lambda: bool(sink.finals()))
    [final] = sink.finals()
    assert final.text == "CANONICAL"  # the completion's text, not what the deltas added up to
    stats = pump.statistics()
    assert stats.overflows == 1
    assert stats.resyncs == 1
    # Snapshots stopped at the fence: none of them holds more than what was admitted.
    snapshots = [i.text for i in sink.intents if i.kind is IntentKind.STREAM_SNAPSHOT]
    assert all(len(text) <= len("first ") + 256 for text in snapshots)
    # A delayed event of the finalised run on the new stream is rejected.
    second = await port.next_stream(2)
    second.push(delta("r1", 500, "late"), delta("r2", 1, "next"), ended("r2", "two"))
    await sink.until(lambda: len(sink.finals()) == 2)
    assert [f.text for f in sink.finals()] == ["CANONICAL", "two"]
    assert not any(i.text == "late" for i in sink.intents)
    assert pump.statistics().late_rejected >= 1


async def test_an_end_lost_with_the_stream_is_read_from_the_transcript(
    port: FakeSessionPort, sink: Sink, pump: SessionPump
) -> None:
    stream = await port.next_stream(1)
    stream.push(delta("r1", 1, "partial "), delta("r1", 2, "words"))
    await sink.until(lambda: bool(sink.intents))
    # The port's own stream overflowed and ended; the run finished in the gap.
    port.snapshot_value = SessionSnapshot(session_key=KEY, last_run_id="r1", last_ok=True)
    port.transcript_entries = (
        TranscriptEntry(index=0, role="user", text="q"),
        TranscriptEntry(index=1, role="assistant", text="the whole answer"),
    )
    stream.push(StreamOverflow(session_key=KEY, reason="overflow"))
    await sink.until(lambda: bool(sink.finals()))
    assert [f.text for f in sink.finals()] == ["the whole answer"]
    assert pump.statistics().resyncs == 1


async def test_a_status_finalised_after_an_overflow_says_steps_were_not_shown(
    port: FakeSessionPort, sink: Sink, pump: SessionPump
) -> None:
    stream = await port.next_stream(1)
    sink.gate = asyncio.Event()
    stream.push(card("r1", "a0", "started"))
    await asyncio.wait_for(sink.held.wait(), 10)
    stream.push(*(card("r1", f"a{i}", "completed") for i in range(1, 400)))
    await asyncio.wait_for(stream.drained.wait(), 10)
    # Authority: r1 still runs, so the resync waits for its end on the new stream.
    port.snapshot_value = SessionSnapshot(
        session_key=KEY,
        active=ActiveRun(
            run_id="r1", attempt_id="r1", attempt=1, phase=RunPhase.STREAMING, text="", text_seq=0
        ),
    )
    sink.gate.set()
    second = await port.next_stream(2)
    second.push(ended("r1", "all done"))
    await sink.until(lambda: bool(sink.finals()))
    statuses = [i for i in sink.intents if i.kind is IntentKind.TOOL_STATUS]
    assert statuses[-1].text.endswith(INTERRUPTION_HINT)
    assert all(not s.text.endswith(INTERRUPTION_HINT) for s in statuses[:-1])
    assert sink.finals()[0].text == "all done"


async def test_the_status_line_is_compact_and_bounded(
    port: FakeSessionPort, sink: Sink, pump: SessionPump
) -> None:
    stream = await port.next_stream(1)
    stream.push(*(card("r1", f"a{i}", "completed", title=f"t{i}") for i in range(20)))
    stream.push(ended("r1", "ok"))
    await sink.until(lambda: bool(sink.finals()))
    last = [i for i in sink.intents if i.kind is IntentKind.TOOL_STATUS][-1]
    assert last.text.startswith("🔧 (+12 more)")
    assert "t19 ✓" in last.text
    assert "\n" not in last.text


async def test_an_approval_becomes_a_prompt_and_its_end_edits_the_same_slot(
    port: FakeSessionPort, sink: Sink, pump: SessionPump
) -> None:
    stream = await port.next_stream(1)
    stream.push(
        ApprovalAsked(
            session_key=KEY,
            approval_id="appr_1",
            run_id="r1",
            tool="bash",
            action={"command": "ls"},
        ),
        ApprovalEnded(session_key=KEY, approval_id="appr_1", decision=ApprovalDecision.EXPIRED),
    )
    await sink.until(lambda: len(sink.intents) == 2)
    prompt, resolved = sink.intents
    assert prompt.kind is IntentKind.APPROVAL_PROMPT
    assert prompt.choices == ("approve_once", "approve_session", "approve_agent", "deny")
    assert "`ls`" in prompt.text
    assert resolved.kind is IntentKind.APPROVAL_RESOLVED
    assert resolved.slot == prompt.slot
    assert resolved.text == "bash: the run ended"


async def test_edits_are_coalesced_within_the_edit_interval(port: FakeSessionPort) -> None:
    sink = Sink()
    now = [100.0]
    pump = SessionPump(
        port=port,
        session_key=KEY,
        route=ROUTE,
        emit=sink.emit,
        terminal=TerminalRuns(),
        edit_interval_s=3600.0,
        clock=lambda: now[0],
    )
    task = asyncio.ensure_future(pump.run())
    try:
        stream = await port.next_stream(1)
        stream.push(delta("r1", 1, "a"))
        await sink.until(lambda: len(sink.intents) == 1)
        stream.push(delta("r1", 2, "b"), delta("r1", 3, "c"), ended("r1", "abc"))
        await sink.until(lambda: bool(sink.finals()))
        assert [(i.kind, i.text) for i in sink.intents] == [
            (IntentKind.STREAM_SNAPSHOT, "a"),
            (IntentKind.FINAL_TEXT, "abc"),
        ]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_approvals_follow_the_snapshot_after_a_resync(
    port: FakeSessionPort, sink: Sink, pump: SessionPump
) -> None:
    stream = await port.next_stream(1)
    stream.push(ApprovalAsked(session_key=KEY, approval_id="appr_old", run_id="r1", tool="bash"))
    await sink.until(lambda: len(sink.intents) == 1)
    # In the gap appr_old was decided elsewhere and appr_new was asked.
    port.snapshot_value = SessionSnapshot(
        session_key=KEY,
        pending_approvals=(PendingApproval(approval_id="appr_new", run_id="r1", tool="edit"),),
    )
    stream.push(StreamOverflow(session_key=KEY, reason="overflow"))
    await sink.until(lambda: len(sink.intents) == 3)
    _, ended_old, asked_new = sink.intents
    assert (ended_old.kind, ended_old.slot) == (IntentKind.APPROVAL_RESOLVED, "approval:appr_old")
    assert ended_old.text == "bash: no longer pending"
    assert (asked_new.kind, asked_new.approval_id) == (IntentKind.APPROVAL_PROMPT, "appr_new")


def test_terminal_runs_keep_the_last_128() -> None:
    runs = TerminalRuns()
    for i in range(200):
        runs.add(f"r{i}")
    assert len(runs) == TERMINAL_RUNS == 128
    assert "r71" not in runs
    assert all(f"r{i}" in runs for i in range(72, 200))


@given(st.lists(st.integers(min_value=0, max_value=300), max_size=600))
def test_terminal_runs_hold_exactly_the_most_recent_distinct_ids(ids: list[int]) -> None:
    runs = TerminalRuns(bound=16)
    for i in ids:
        runs.add(str(i))
    recent: list[int] = []
    for i in reversed(ids):
        if i not in recent:
            recent.append(i)
    assert len(runs) == min(16, len(recent))
    assert all(str(i) in runs for i in recent[:16])
    assert not any(str(i) in runs for i in recent[16:])


async def _stream_through_a_pump(
    batches: list[list[str]], interval: float
) -> tuple[list[str], list[DeliveryIntent]]:
    port = FakeSessionPort()
    sink = Sink()
    now = [100.0]
    pump = SessionPump(
        port=port,
        session_key=KEY,
        route=ROUTE,
        emit=sink.emit,
        terminal=TerminalRuns(),
        edit_interval_s=interval,
        clock=lambda: now[0],
    )
    task = asyncio.ensure_future(pump.run())
    texts: list[str] = []
    try:
        stream = await port.next_stream(1)
        seq = 0
        for batch in batches:
            events = []
            for text in batch:
                seq += 1
                events.append(delta("r1", seq, text))
            texts.extend(batch)
            stream.push(*events)
            handled = seq

            async def taken(target: int = handled) -> None:
                while pump.events_handled < target:  # noqa: ASYNC110 - no event to wait on
                    await asyncio.sleep(0)

            await asyncio.wait_for(taken(), 10)
        stream.push(ended("r1", "".join(texts)))
        await sink.until(lambda: bool(sink.finals()))
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return texts, sink.intents


#: Short texts (any character a model's text can hold: not an unpaired surrogate, which no
#: provider's JSON decodes to and the bus refuses to encode), now and then a long run of one
#: (past the snapshot bound).
CHARS = st.characters(exclude_categories=("Cs",))
TEXTS = st.text(CHARS, max_size=40) | st.builds(str.__mul__, CHARS, st.integers(0, 6000))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(TEXTS, min_size=1, max_size=20), min_size=1, max_size=8))
def test_any_deltas_stream_as_prefixes_and_end_with_exactly_their_concatenation(
    batches: list[list[str]],
) -> None:
    # Every edit shows a prefix of what was streamed so far, the last edit (an edit per delta
    # here: no interval) shows all of it up to the snapshot bound, and the final text is exact.
    texts, intents = asyncio.run(_stream_through_a_pump(batches, 0.0))
    whole = "".join(texts)
    snapshots = [i.text for i in intents if i.kind is IntentKind.STREAM_SNAPSHOT]
    assert all(whole.startswith(s) for s in snapshots)
    assert all(a == b[: len(a)] for a, b in itertools.pairwise(snapshots))
    if whole:
        assert snapshots[-1] == whole[:MAX_SNAPSHOT_CHARS]
    [final] = [i for i in intents if i.kind is IntentKind.FINAL_TEXT]
    assert final.text == (whole or "(no answer)")
    assert intents[-1] is final


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(TEXTS, min_size=1, max_size=20), min_size=1, max_size=8))
def test_any_deltas_within_one_edit_interval_make_one_edit_then_the_exact_final(
    batches: list[list[str]],
) -> None:
    # The clock stands still: only the first non-empty delta makes an edit; nothing is lost
    # from the final text.
    texts, intents = asyncio.run(_stream_through_a_pump(batches, 3600.0))
    whole = "".join(texts)
    snapshots = [i.text for i in intents if i.kind is IntentKind.STREAM_SNAPSHOT]
    first = next((t for t in texts if t), None)
    assert snapshots == ([] if first is None else [first])
    [final] = [i for i in intents if i.kind is IntentKind.FINAL_TEXT]
    assert final.text == (whole or "(no answer)")


async def test_a_replayed_or_older_delta_is_refused_and_changes_no_edit(
    port: FakeSessionPort, sink: Sink, pump: SessionPump
) -> None:
    stream = await port.next_stream(1)
    stream.push(delta("r1", 1, "a"), delta("r1", 2, "b"), delta("r1", 2, "X"), delta("r1", 1, "Y"))
    stream.push(delta("r1", 3, "c"))
    await sink.until(lambda: any(i.text == "abc" for i in sink.intents))
    stream.push(ended("r1", "abc"))
    await sink.until(lambda: bool(sink.finals()))
    snapshots = [i.text for i in sink.intents if i.kind is IntentKind.STREAM_SNAPSHOT]
    assert snapshots == ["a", "ab", "abc"]
    assert pump.statistics().late_rejected == 2


def _frozen_pump(
    port: FakeSessionPort, sink: Sink, ingress: Callable[[], Delivery] | None = None
) -> SessionPump:
    # The clock stands still an hour before the next edit: after the first edit, deltas that
    # find their answer dirty may be handed over (the consumer waits, no edit is due).
    now = [100.0]
    return SessionPump(
        port=port,
        session_key=KEY,
        route=ROUTE,
        emit=sink.emit,
        terminal=TerminalRuns(),
        edit_interval_s=3600.0,
        ingress=ingress,
        clock=lambda: now[0],
    )


async def _handled(pump: SessionPump, target: int) -> None:
    async def wait() -> None:
        while pump.events_handled < target:  # noqa: ASYNC110 - no event to wait on
            await asyncio.sleep(0)

    await asyncio.wait_for(wait(), 10)


async def test_deltas_handed_over_while_the_consumer_waits_keep_stream_order(
    port: FakeSessionPort,
) -> None:
    # The hand-over (the reader adds a delta itself while the consumer waits on an empty
    # ingress) must be indistinguishable from the ingress path: the flush before an approval
    # prompt shows exactly the text streamed before the question, nothing after it.
    sink = Sink()
    pump = _frozen_pump(port, sink)
    task = asyncio.ensure_future(pump.run())
    try:
        stream = await port.next_stream(1)
        stream.push(delta("r1", 1, "a"))
        await sink.until(lambda: len(sink.intents) == 1)  # the first edit: "a"
        stream.push(delta("r1", 2, "b"))  # a clean answer: through the ingress
        await _handled(pump, 2)
        stream.push(*(delta("r1", seq, str(seq)) for seq in range(3, 11)))
        await _handled(pump, 10)
        assert pump.statistics().handed_over == 8
        stream.push(
            ApprovalAsked(session_key=KEY, approval_id="appr_1", run_id="r1", tool="bash"),
            delta("r1", 11, "after"),
            ended("r1", "canonical"),
        )
        await sink.until(lambda: bool(sink.finals()))
        assert [(i.kind, i.text) for i in sink.intents if i.kind is not IntentKind.FINAL_TEXT][
            :3
        ] == [
            (IntentKind.STREAM_SNAPSHOT, "a"),
            (IntentKind.STREAM_SNAPSHOT, "ab345678910"),
            (IntentKind.APPROVAL_PROMPT, sink.intents[2].text),
        ]
        assert sink.intents[-1].text == "canonical"
        stats = pump.statistics()
        assert (stats.events, stats.late_rejected, stats.overflows) == (13, 0, 0)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_nothing_is_handed_over_while_the_consumer_is_busy(port: FakeSessionPort) -> None:
    # The consumer is held inside an emit: deltas queue in the ingress (in order), none is
    # handed over; once it waits again on the empty ingress, the next one is.
    sink = Sink()
    sink.gate = asyncio.Event()
    pump = _frozen_pump(port, sink)
    task = asyncio.ensure_future(pump.run())
    try:
        stream = await port.next_stream(1)
        stream.push(delta("r1", 1, "a"))
        await asyncio.wait_for(sink.held.wait(), 10)  # held emitting the first edit
        stream.push(*(delta("r1", seq, "x") for seq in range(2, 6)))
        await asyncio.wait_for(stream.drained.wait(), 10)
        assert pump.events_handled == 1
        assert pump.statistics().handed_over == 0
        sink.gate.set()
        await _handled(pump, 5)
        assert pump.statistics().handed_over == 0
        stream.push(delta("r1", 6, "y"))
        await _handled(pump, 6)
        assert pump.statistics().handed_over == 1
        stream.push(ended("r1", "axxxxy"))
        await sink.until(lambda: bool(sink.finals()))
        assert sink.finals()[0].text == "axxxxy"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_delta_the_ingress_would_refuse_is_not_handed_over(port: FakeSessionPort) -> None:
    # Handed over or not, a delta above the ingress's byte bound fences and resyncs as before:
    # the run's final text is then the canonical one, and no snapshot shows the big delta.
    sink = Sink()
    pump = _frozen_pump(
        port,
        sink,
        ingress=lambda: Delivery.for_consumer(
            ConsumerClass.ROUTER_COALESCER, claim_on_get=False, max_message_bytes=512
        ),
    )
    task = asyncio.ensure_future(pump.run())
    try:
        stream = await port.next_stream(1)
        stream.push(delta("r1", 1, "a"))
        await sink.until(lambda: len(sink.intents) == 1)
        stream.push(delta("r1", 2, "b"))
        await _handled(pump, 2)  # the answer is dirty, the consumer waits: hand-over possible
        stream.push(delta("r1", 3, "z" * 1000), ended("r1", "canonical"))
        await sink.until(lambda: bool(sink.finals()))
        assert pump.statistics().overflows == 1
        assert pump.statistics().handed_over == 0
        assert sink.finals()[0].text == "canonical"
        assert not any("z" in i.text for i in sink.intents)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_an_event_that_cannot_be_encoded_is_skipped_and_the_pump_goes_on(
    port: FakeSessionPort, sink: Sink, pump: SessionPump
) -> None:
    """A session event the ingress cannot measure (a lone surrogate in a delta: not
    JSON-encodable) is counted as refused and skipped; the pump keeps following the session,
    and the run still ends with its canonical answer."""
    stream = await port.next_stream(1)
    stream.push(
        delta("r1", 1, "Hel"),
        delta("r1", 2, "bad \ud800 text"),
        delta("r1", 3, "lo"),
        ended("r1", "Hello, world."),
    )
    await sink.until(lambda: bool(sink.finals()))
    [final] = sink.finals()
    assert final.text == "Hello, world."
    assert pump.statistics().ingress_refused >= 1
    stream.push(delta("r2", 1, "again"), ended("r2", "Again."))
    await sink.until(lambda: len(sink.finals()) == 2)
    assert sink.finals()[-1].text == "Again."
