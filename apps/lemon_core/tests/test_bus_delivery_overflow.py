"""Bounded delivery under a burst: admission before queueing, fence, marker, terminal slot."""

from __future__ import annotations

import asyncio

import pytest

from lemon_core import Bus, ConsumerClass, Delivery, Event, Overflow, TerminalNotice
from lemon_core.bus import TERMINAL_NOTICE_MAX_BYTES, OverflowReason, measure
from lemon_core.events import Completion, Delta, RunCompleted


def delta(seq: int, text: str = "x") -> Event:
    return Event.new("delta", Delta(run_id="r1", seq=seq, text=text), {"run_id": "r1"})


def completed(answer: str = "done") -> Event:
    payload = RunCompleted(completed=Completion(ok=True, answer=answer, run_id="r1"))
    return Event.new("run_completed", payload, {"run_id": "r1", "session_key": "s1"})


def drain(handle: Delivery) -> list[object]:
    items: list[object] = []
    while True:
        try:
            items.append(handle.get_nowait())
        except asyncio.QueueEmpty:
            return items


async def test_suspended_consumer_gets_at_most_bound_plus_marker_plus_terminal() -> None:
    """The seed's core fixture: 8 entries of at most 256 bytes each."""
    async with Bus(validation="raise") as bus:
        handle = Delivery(max_entries=8, max_message_bytes=256)
        bus.subscribe("run:r1", delivery=handle)
        resume = asyncio.Event()
        received: list[object] = []

        async def consumer() -> None:
            await resume.wait()  # suspended during the burst
            async for item in handle:
                received.append(item)
                if isinstance(item, TerminalNotice):
                    return

        task = asyncio.create_task(consumer())
        await asyncio.sleep(0)
        for seq in range(200):
            bus.broadcast("run:r1", delta(seq))
        bus.broadcast("run:r1", completed())
        stats = handle.statistics()
        assert stats.queued <= 8 + 1 + 1
        assert (
            stats.bytes
            <= 8 * 256 + measure(Overflow(epoch=handle.epoch, reason=OverflowReason.ENTRIES)) + 1024
        )
        resume.set()
        await asyncio.wait_for(task, timeout=10)

    data = [item for item in received if isinstance(item, Event)]
    markers = [item for item in received if isinstance(item, Overflow)]
    terminals = [item for item in received if isinstance(item, TerminalNotice)]
    assert len(data) == 8
    assert [e.payload.seq for e in data] == list(range(8))
    assert len(markers) == 1
    assert markers[0].reason is OverflowReason.ENTRIES
    assert len(terminals) == 1
    assert terminals[0].event_type == "run_completed"
    assert terminals[0].run_id == "r1"
    assert terminals[0].session_key == "s1"
    assert received.index(markers[0]) == 8  # the marker follows every admitted item


async def test_suspended_pane_holds_at_most_270_items_after_1000_small_events() -> None:
    async with Bus(validation="raise") as bus:
        pane = Delivery.for_consumer(ConsumerClass.BROWSER_PANE)
        for topic in ("session:s1", "exec_approvals", "system"):
            bus.subscribe(topic, delivery=pane)
        for seq in range(1000):
            bus.broadcast("session:s1", delta(seq))
        stats = pane.statistics()
        assert stats.queued <= 270
        assert stats.queued == 256 + 1
        assert stats.admitted == 256
        assert stats.refused == 1000 - 256
        assert stats.fenced


async def test_a_retained_view_is_charged_its_whole_backing_buffer() -> None:
    backing = bytearray(16_384)
    view = memoryview(backing)[:256]
    copy = bytes(view)
    assert measure(view) >= 16_384
    assert measure(copy) < 1_024
    handle = Delivery(max_entries=8, max_message_bytes=4_096)
    assert handle.offer(Event.new("blob", {"data": copy}))
    assert not handle.offer(Event.new("blob", {"data": view}))
    stats = handle.statistics()
    assert stats.fenced
    assert stats.overflow_reason is OverflowReason.BYTES
    assert stats.admitted == 1


async def test_an_oversized_message_fences_the_handle() -> None:
    handle = Delivery(max_entries=8, max_message_bytes=256)
    assert handle.offer(delta(0))
    assert not handle.offer(delta(1, "y" * 300))
    items = drain(handle)
    assert len(items) == 2
    assert isinstance(items[1], Overflow)
    assert items[1].reason is OverflowReason.BYTES


async def test_a_fenced_handle_admits_nothing_but_one_terminal_notice() -> None:
    handle = Delivery(max_entries=1, max_message_bytes=1_024)
    assert handle.offer(delta(0))
    assert not handle.offer(delta(1))  # fences
    for seq in range(2, 10):
        assert not handle.offer(delta(seq))
    assert not handle.offer(completed())  # rides in the reserved slot as a notice
    assert not handle.offer(completed())  # the reservation is used up
    items = drain(handle)
    assert [type(item) for item in items] == [Event, Overflow, TerminalNotice]
    notice = items[2]
    assert isinstance(notice, TerminalNotice)
    assert notice.event is not None
    assert notice.event.payload.completed.answer == "done"
    stats = handle.statistics()
    assert stats.refused == 11
    assert not stats.terminal_reserved
    assert not handle.offer(delta(99))
    assert drain(handle) == []


async def test_a_terminal_arriving_at_a_full_handle_fences_and_still_reaches_the_consumer() -> None:
    handle = Delivery(max_entries=2)
    assert handle.offer(delta(0))
    assert handle.offer(delta(1))
    assert not handle.offer(completed())
    items = drain(handle)
    assert isinstance(items[2], Overflow)
    assert isinstance(items[3], TerminalNotice)


async def test_a_large_terminal_event_becomes_a_compact_notice() -> None:
    handle = Delivery(max_entries=1)
    handle.offer(delta(0))
    handle.offer(delta(1))
    handle.offer(completed(answer="a" * 5_000))
    notice = drain(handle)[-1]
    assert isinstance(notice, TerminalNotice)
    assert notice.event is None  # re-read the completion from its owner
    assert notice.run_id == "r1"
    assert measure(notice) <= TERMINAL_NOTICE_MAX_BYTES


async def test_a_terminal_flag_marks_non_event_items_terminal() -> None:
    handle = Delivery(max_entries=1)
    handle.offer({"n": 0})
    handle.offer({"n": 1})
    handle.offer({"done": True}, terminal=True)
    notice = drain(handle)[-1]
    assert isinstance(notice, TerminalNotice)
    assert notice.event_type == "dict"


async def test_consuming_frees_entries_before_the_fence() -> None:
    handle = Delivery(max_entries=2)
    for seq in range(10):
        assert handle.offer(delta(seq))
        assert isinstance(handle.get_nowait(), Event)
    stats = handle.statistics()
    assert (stats.admitted, stats.delivered, stats.queued, stats.bytes) == (10, 10, 0, 0)
    assert not stats.fenced


async def test_recovery_replaces_the_handle_and_receives_new_items() -> None:
    async with Bus() as bus:
        handle = Delivery(max_entries=1)
        bus.subscribe("run:r1", delivery=handle)
        for seq in range(3):
            bus.broadcast("run:r1", delta(seq))
        assert handle.fenced
        fresh = handle.replace()
        assert fresh.epoch > handle.epoch
        assert not fresh.fenced
        assert fresh.topics() == ("run:r1",)
        bus.broadcast("run:r1", delta(3))
        (item,) = drain(fresh)
        assert isinstance(item, Event)
        assert item.payload.seq == 3


def test_named_defaults_per_consumer_class() -> None:
    expected = {
        ConsumerClass.SESSION_SUBSCRIBER: (256, 1_048_576, False),
        ConsumerClass.EXECUTOR_RUNNER: (256, 1_048_576, False),
        ConsumerClass.EVENT_BRIDGE: (256, 1_048_576, True),
        ConsumerClass.BROWSER_PANE: (256, 65_536, True),
        ConsumerClass.ROUTER_COALESCER: (256, 65_536, True),
    }
    for consumer, (entries, size, tagged) in expected.items():
        limits = Delivery.for_consumer(consumer).limits
        assert (limits.max_entries, limits.max_message_bytes, limits.tagged) == (
            entries,
            size,
            tagged,
        )
    assert Delivery.for_consumer("browser_pane", max_entries=8).limits.max_entries == 8


def test_bad_limits_are_rejected_with_a_message() -> None:
    with pytest.raises(ValueError, match="max_entries must be a positive int"):
        Delivery(max_entries=0)
    with pytest.raises(ValueError, match="max_message_bytes must be a positive int"):
        Delivery(max_message_bytes=-1)
    with pytest.raises(ValueError, match="unknown consumer class"):
        Delivery.for_consumer("toaster")
