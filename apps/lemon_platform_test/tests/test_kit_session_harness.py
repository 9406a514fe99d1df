"""The session kit's own helpers: settlement accounting, merge chains, and the recorder over a
real BusSessionStream on a real Bus (the contract itself runs in the implementing app)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from lemon_core.bus import Bus, session_topic
from lemon_core.events import Completion, Delta, QueueOutcomeKind, RunCompleted
from lemon_core.sessions import BusSessionStream, QueueNotice, RunEnded, SessionEvent, TextDelta
from lemon_platform_test.session_harness import (
    SessionRecorder,
    carrier,
    run_ended,
    settlements,
)

KEY = "agent:kit:main"


def notice(run_id: str, outcome: QueueOutcomeKind, into: str | None = None) -> QueueNotice:
    return QueueNotice(session_key=KEY, run_id=run_id, outcome=outcome, into_run_id=into)


def ended(run_id: str, attempt: str | None = None) -> RunEnded:
    return RunEnded(session_key=KEY, run_id=run_id, attempt_id=attempt or run_id, ok=True)


def test_a_settlement_is_a_run_end_or_a_settling_queue_notice() -> None:
    events: list[SessionEvent] = [
        notice("a", QueueOutcomeKind.FALLBACK_QUEUED),
        notice("a", QueueOutcomeKind.MERGED, into="b"),
        ended("b"),
        TextDelta(session_key=KEY, run_id="b", seq=1, text="x"),
    ]
    assert settlements(events, "a") == [events[1]]
    assert settlements(events, "b") == [events[2]]
    assert settlements(events, "c") == []
    assert run_ended(events, "b") == events[2]
    assert run_ended(events, "a") is None


def test_the_carrier_follows_merges_and_steers_to_the_run_that_holds_the_message() -> None:
    events: list[SessionEvent] = [
        notice("a", QueueOutcomeKind.MERGED, into="b"),
        notice("b", QueueOutcomeKind.MERGED, into="c"),
        notice("s", QueueOutcomeKind.STEERED, into="c"),
        notice("x", QueueOutcomeKind.CANCELLED),
        notice("loop1", QueueOutcomeKind.MERGED, into="loop2"),
        notice("loop2", QueueOutcomeKind.MERGED, into="loop1"),
    ]
    assert carrier(events, "a") == "c"
    assert carrier(events, "s") == "c"
    assert carrier(events, "c") == "c"
    assert carrier(events, "x") == "x"
    assert carrier(events, "loop1") == "loop2"  # a cycle ends the walk instead of hanging


@pytest.fixture
async def bus() -> AsyncIterator[Bus]:
    async with Bus(validation="raise") as b:
        yield b


async def test_the_recorder_waits_for_a_run_end_on_a_real_stream(bus: Bus) -> None:
    topic = session_topic(KEY)
    meta = {"run_id": "run_1", "session_key": KEY}
    async with SessionRecorder(BusSessionStream(bus, KEY), timeout_s=10) as events:
        bus.broadcast_event(topic, "delta", Delta(run_id="run_1", seq=1, text="hi"), meta)
        completion = Completion(ok=True, answer="hi", run_id="run_1", session_key=KEY)
        bus.broadcast_event(topic, "run_completed", RunCompleted(completed=completion), meta)
        end = await events.ended_run("run_1")
    assert (end.run_id, end.attempt_id, end.answer) == ("run_1", "run_1", "hi")
    assert [type(e).__name__ for e in events.events] == ["TextDelta", "RunEnded"]
    assert events.stream.closed


async def test_the_recorder_fails_clearly_when_the_stream_ends_first(bus: Bus) -> None:
    stream = BusSessionStream(bus, KEY)
    async with SessionRecorder(stream, timeout_s=10) as events:
        stream.close()
        with pytest.raises(AssertionError, match="ended before RunEnded of run_9"):
            await events.ended_run("run_9")


async def test_the_recorders_timeout_is_a_failure_guard_that_says_what_it_saw(bus: Bus) -> None:
    meta = {"run_id": "run_1", "session_key": KEY}
    async with SessionRecorder(BusSessionStream(bus, KEY), timeout_s=0.05) as events:
        delta = Delta(run_id="run_1", seq=1, text="hi")
        bus.broadcast_event(session_topic(KEY), "delta", delta, meta)
        with pytest.raises(
            AssertionError, match=r"waited 0.05 s \(failure guard\) for the end; saw .*TextDelta"
        ):
            await events.until(lambda evs: False, "the end")
