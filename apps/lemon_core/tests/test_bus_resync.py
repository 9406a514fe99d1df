"""Resync: a networked backend that lost publications makes the bus fence every handle (one
``Overflow`` marker, reason ``resync``) and tells ``system`` subscribers with a typed event."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from lemon_core import Bus, Delivery, Event
from lemon_core.bus import Overflow, OverflowReason
from lemon_core.events import BusBackendChanged


def drain(handle: Delivery) -> list[Any]:
    items = []
    while True:
        try:
            items.append(handle.get_nowait())
        except asyncio.QueueEmpty:
            return items


class ReportingBackend:
    """A backend that delivers locally and reports status like a networked one."""

    def __init__(self) -> None:
        self.fanout: Callable[[str, Any], int] | None = None
        self.report: Callable[[bool, bool, str], None] | None = None
        self.up = True

    @property
    def name(self) -> str:
        return "reporting"

    def open(self, fanout: Callable[[str, Any], int]) -> None:
        self.fanout = fanout

    def watch(self, callback: Callable[[bool, bool, str], None]) -> None:
        self.report = callback

    def publish(self, topic: str, item: Any) -> None:
        assert self.fanout is not None
        self.fanout(topic, item)

    def topic_added(self, topic: str) -> None:
        pass

    def topic_removed(self, topic: str) -> None:
        pass

    def running(self) -> bool:
        return self.up

    def close(self) -> None:
        self.up = False


def test_fence_queues_one_marker_and_refuses_what_follows() -> None:
    bus = Bus()
    handle = Delivery(bind_current_task=False)
    bus.subscribe("run:r1", delivery=handle)
    bus.broadcast("run:r1", Event.new("custom", {"n": 1}))
    handle.fence()
    handle.fence()  # idempotent: still one marker
    bus.broadcast("run:r1", Event.new("custom", {"n": 2}))
    items = drain(handle)
    assert [type(x).__name__ for x in items] == ["Event", "Overflow"]
    assert items[1] == Overflow(epoch=handle.epoch, reason=OverflowReason.RESYNC)
    stats = handle.statistics()
    assert stats.fenced
    assert stats.overflow_reason is OverflowReason.RESYNC
    fresh = handle.replace()
    bus.broadcast("run:r1", Event.new("custom", {"n": 3}))
    assert [x.payload for x in drain(fresh)] == [{"n": 3}]


def test_a_backend_report_reaches_system_and_a_resync_fences_every_handle() -> None:
    backend = ReportingBackend()
    bus = Bus(backend=backend)
    system = Delivery(bind_current_task=False)
    runs = Delivery(bind_current_task=False)
    bus.subscribe("system", delivery=system)
    bus.subscribe("run:r1", delivery=runs)
    bus.subscribe("run:r2", delivery=runs)
    assert backend.report is not None

    backend.up = False
    backend.report(False, False, "connection lost")
    assert not bus.running()
    (down,) = drain(system)
    assert down.payload == BusBackendChanged(
        backend="reporting", running=False, resync=False, reason="connection lost"
    )
    assert drain(runs) == []  # an outage alone fences nothing: local delivery goes on

    backend.up = True
    # From another thread, as a backend's reader reports.
    thread = threading.Thread(target=backend.report, args=(True, True, "reconnected"))
    thread.start()
    thread.join(10)
    up, marker = drain(system)
    assert up.payload.running is True
    assert up.payload.resync is True
    assert isinstance(marker, Overflow)
    assert [type(x).__name__ for x in drain(runs)] == ["Overflow"]  # one marker per handle
    assert bus.resync() == 2  # both handles (already fenced: nothing more is queued)
    assert drain(runs) == []
