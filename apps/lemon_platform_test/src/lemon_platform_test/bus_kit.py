"""The bus contract kit: what every bus backend must do, as a test class to subclass.

A backend author (Redis, later) runs it with their factory::

    from lemon_platform_test import BusContract

    class TestRedisBus(BusContract):
        bus_backends = {"redis": make_redis_backend}

With no ``bus_backends`` it runs under every backend of ``lemon_infra.BACKENDS``. The tests
are synchronous: publication never waits on a consumer, and consumers read with ``get_nowait``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from lemon_core.bus import Bus, BusBackend, Delivery, Overflow, TerminalNotice
from lemon_core.events import Completion, Delta, Event, RunCompleted
from lemon_infra import BACKENDS

__all__ = ["BusContract", "drain", "settle"]


def drain(handle: Delivery) -> list[Any]:
    """Everything queued on ``handle`` right now."""
    items: list[Any] = []
    while True:
        try:
            items.append(handle.get_nowait())
        except asyncio.QueueEmpty:
            return items


def settle(bus: Bus, timeout: float = 10.0) -> None:
    """Wait until what was published on ``bus`` has been delivered: a no-op for a backend that
    delivers in the publisher's thread; for one that carries publications asynchronously (it
    offers ``flush(timeout) -> bool``, as the Redis backend does) a barrier."""
    flush = getattr(bus.backend, "flush", None)
    if callable(flush) and not flush(timeout):
        raise AssertionError(f"backend {bus.backend.name} did not deliver within {timeout} s")


def _delta(seq: int) -> Event:
    return Event.new("delta", Delta(run_id="run_test", seq=seq, text="x"), {"run_id": "run_test"})


class BusContract:
    """Subclass to run the bus contract under your backends (see the module docstring).

    Tests receive ``lemon_bus``: a fresh :class:`~lemon_core.bus.Bus` on one backend, closed
    after the test.
    """

    bus_backends: ClassVar[Mapping[str, Callable[[], BusBackend]] | None] = None

    def test_the_bus_runs_on_the_backend(self, lemon_bus: Bus) -> None:
        assert lemon_bus.running()
        assert lemon_bus.statistics().backend == lemon_bus.backend.name

    def test_a_subscriber_receives_a_broadcast_intact(self, lemon_bus: Bus) -> None:
        handle = Delivery(bind_current_task=False)
        lemon_bus.subscribe("run:run_test", delivery=handle)
        event = _delta(0)
        lemon_bus.broadcast("run:run_test", event)
        settle(lemon_bus)
        (received,) = drain(handle)
        assert received == event

    def test_topics_match_exactly(self, lemon_bus: Bus) -> None:
        handle = Delivery(bind_current_task=False)
        lemon_bus.subscribe("run:run_test", delivery=handle)
        for topic in ("run:run_test2", "run:", "session:run_test", "run:run_tes"):
            lemon_bus.broadcast(topic, _delta(0))
        settle(lemon_bus)
        assert drain(handle) == []

    def test_every_subscriber_receives_each_event_once(self, lemon_bus: Bus) -> None:
        handles = [Delivery(bind_current_task=False) for _ in range(3)]
        for handle in handles:
            lemon_bus.subscribe("system", delivery=handle)
            lemon_bus.subscribe("system", delivery=handle)  # idempotent
        lemon_bus.broadcast("system", Event.new("probe"))
        settle(lemon_bus)
        assert [len(drain(handle)) for handle in handles] == [1, 1, 1]

    def test_order_is_preserved_per_publisher(self, lemon_bus: Bus) -> None:
        handle = Delivery(bind_current_task=False)
        lemon_bus.subscribe("run:run_test", delivery=handle)
        for seq in range(50):
            lemon_bus.broadcast("run:run_test", _delta(seq))
        settle(lemon_bus)
        assert [item.payload.seq for item in drain(handle)] == list(range(50))

    def test_cancel_stops_delivery(self, lemon_bus: Bus) -> None:
        handle = Delivery(bind_current_task=False)
        subscription = lemon_bus.subscribe("cron", delivery=handle)
        subscription.cancel()
        lemon_bus.broadcast("cron", Event.new("cron_tick"))
        settle(lemon_bus)
        assert drain(handle) == []
        assert lemon_bus.topics() == ()

    def test_delivery_is_bounded_with_marker_and_terminal(self, lemon_bus: Bus) -> None:
        handle = Delivery(max_entries=8, max_message_bytes=256, bind_current_task=False)
        lemon_bus.subscribe("run:run_test", delivery=handle)
        for seq in range(100):
            lemon_bus.broadcast("run:run_test", _delta(seq))
        done = RunCompleted(completed=Completion(ok=True, answer="done"))
        lemon_bus.broadcast_event("run:run_test", "run_completed", done, {"run_id": "run_test"})
        settle(lemon_bus)
        items = drain(handle)
        assert len(items) == 8 + 1 + 1
        assert isinstance(items[8], Overflow)
        assert isinstance(items[9], TerminalNotice)

    def test_publishers_on_other_threads(self, lemon_bus: Bus) -> None:
        handle = Delivery(bind_current_task=False)
        lemon_bus.subscribe("run:run_test", delivery=handle)
        threads = [
            threading.Thread(
                target=lemon_bus.broadcast_threadsafe, args=("run:run_test", _delta(n))
            )
            for n in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        settle(lemon_bus)
        assert sorted(item.payload.seq for item in drain(handle)) == [0, 1, 2, 3]

    def test_close_stops_the_bus(self, lemon_bus: Bus) -> None:
        handle = Delivery(bind_current_task=False)
        lemon_bus.subscribe("system", delivery=handle)
        lemon_bus.close()
        assert not lemon_bus.running()
        assert handle.topics() == ()


def bus_backends_of(owner: object) -> Mapping[str, Callable[[], BusBackend]]:
    """The backend factories a test class asks for (default: every built-in backend)."""
    chosen = getattr(owner, "bus_backends", None)
    return BACKENDS if chosen is None else chosen
