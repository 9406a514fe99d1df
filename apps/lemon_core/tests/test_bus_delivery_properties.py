"""Property tests of a handle: never more than bound + marker + terminal, the fence admits
nothing else, and admitted items come out in the order they were offered."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from lemon_core import Bus, Delivery, Event, Overflow, Tagged, TerminalNotice
from lemon_core.bus import TERMINAL_NOTICE_MAX_BYTES, OverflowReason, measure


@dataclass(frozen=True)
class Offer:
    text_len: int
    terminal: bool


@dataclass(frozen=True)
class Pop:
    pass


operations = st.lists(
    st.one_of(
        st.builds(Offer, text_len=st.integers(0, 600), terminal=st.booleans()),
        st.just(Pop()),
    ),
    max_size=80,
)


def take(handle: Delivery) -> object | None:
    try:
        return handle.get_nowait()
    except asyncio.QueueEmpty:
        return None


@settings(max_examples=300, deadline=None)
@given(
    max_entries=st.integers(1, 12),
    max_bytes=st.integers(64, 700),
    tagged=st.booleans(),
    ops=operations,
)
def test_delivery_invariants(
    max_entries: int, max_bytes: int, tagged: bool, ops: list[Offer | Pop]
) -> None:
    handle = Delivery(
        max_entries=max_entries,
        max_message_bytes=max_bytes,
        tagged=tagged,
        bind_current_task=False,
    )
    check_invariants(handle, max_entries, max_bytes, tagged, ops, handle.offer)


@settings(max_examples=200, deadline=None)
@given(
    max_entries=st.integers(1, 12),
    max_bytes=st.integers(64, 700),
    tagged=st.booleans(),
    ops=operations,
    neighbours=st.lists(st.integers(64, 700), max_size=3),
)
def test_delivery_invariants_through_the_bus_fast_path(
    max_entries: int,
    max_bytes: int,
    tagged: bool,
    ops: list[Offer | Pop],
    neighbours: list[int],
) -> None:
    """The same invariants when the bus admits the handle under its shared lock, next to other
    subscribers with other byte bounds (which decide whether a publication takes the fast
    path)."""
    bus = Bus()
    handle = Delivery(
        max_entries=max_entries,
        max_message_bytes=max_bytes,
        tagged=tagged,
        bind_current_task=False,
    )
    bus.subscribe("run:r1", delivery=handle)
    for limit in neighbours:
        bus.subscribe("run:r1", delivery=Delivery(max_message_bytes=limit, bind_current_task=False))

    def publish(event: Event, *, terminal: bool) -> bool:
        before = handle.statistics().admitted
        bus.broadcast("run:r1", event)
        return handle.statistics().admitted > before

    try:
        check_invariants(handle, max_entries, max_bytes, tagged, ops, publish)
    finally:
        bus.close()


def check_invariants(
    handle: Delivery,
    max_entries: int,
    max_bytes: int,
    tagged: bool,
    ops: list[Offer | Pop],
    publish: Callable[..., bool],
) -> None:
    marker_bytes = measure(Overflow(epoch=handle.epoch, reason=OverflowReason.CONTENDED))
    offered: list[Event] = []
    terminal_offered_after_fence = False
    first_refusal: int | None = None
    received: list[object] = []
    for op in ops:
        if isinstance(op, Pop):
            item = take(handle)
            if item is not None:
                received.append(item)
        else:
            event = Event(
                type="run_completed" if op.terminal else "probe",
                ts_ms=0,
                payload={"n": len(offered), "t": "a" * op.text_len},
            )
            admitted = publish(event, terminal=op.terminal)
            if first_refusal is not None:
                assert not admitted, "a fenced handle admitted an item"
                terminal_offered_after_fence |= op.terminal
            elif not admitted:
                first_refusal = len(offered)
                terminal_offered_after_fence |= op.terminal
            offered.append(event)
        stats = handle.statistics()
        assert stats.queued <= max_entries + 2
        assert stats.bytes <= max_entries * max_bytes + marker_bytes + TERMINAL_NOTICE_MAX_BYTES
        assert stats.fenced == (first_refusal is not None)
    while (item := take(handle)) is not None:
        received.append(item)
    for item in received:
        assert handle.accepts(item) == (tagged or not isinstance(item, Event))
    received = [item.item if isinstance(item, Tagged) else item for item in received]

    data = [item for item in received if isinstance(item, Event)]
    markers = [i for i, item in enumerate(received) if isinstance(item, Overflow)]
    notices = [i for i, item in enumerate(received) if isinstance(item, TerminalNotice)]
    expected = offered if first_refusal is None else offered[:first_refusal]
    assert data == expected  # order preserved, nothing after the fence
    if first_refusal is None:
        assert markers == []
        assert notices == []
    else:
        assert len(markers) == 1
        assert markers[0] == len(expected)  # after every admitted item
        assert len(notices) == (1 if terminal_offered_after_fence else 0)
        assert all(i > markers[0] for i in notices)
    assert len(received) <= len(expected) + 2
