"""Contended admission: a producer waits a bounded time for another producer's O(1) section,
then counts the contention as overflow; it never waits on the consumer."""

from __future__ import annotations

import asyncio
import threading

from lemon_core import Bus, Delivery, Event, Overflow, TerminalNotice
from lemon_core.bus import OverflowReason


class GatedLock:
    """A real lock that parks one chosen producer inside its critical section."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.gated_thread: int | None = None
        self.inside = threading.Event()
        self.proceed = threading.Event()
        self.refused_attempt = threading.Event()
        self.waiting = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if blocking and timeout >= 0:
            self.waiting.set()  # a producer waits (bounded) for the holder
        acquired = self._lock.acquire(blocking, timeout)
        if not acquired and not blocking:
            self.refused_attempt.set()
        if acquired and threading.get_ident() == self.gated_thread:
            self.gated_thread = None
            self.inside.set()
            self.proceed.wait(10)
        return acquired

    def release(self) -> None:
        self._lock.release()


async def test_contended_admission_fences_without_waiting() -> None:
    """Producer A holds the admission lock (parked inside it); producer B arrives, finds the lock
    taken and returns at once: its item is refused and counted as overflow. A, resuming, applies
    the fence B requested before deciding on its own item, so the marker directly follows what
    was admitted before the contention and nothing is admitted after it."""
    lock = GatedLock()
    handle = Delivery(max_entries=8, lock=lock, contention_timeout=0)
    assert handle.offer(Event.new("before"))
    results: dict[str, bool] = {}

    def producer_a() -> None:
        lock.gated_thread = threading.get_ident()
        results["a"] = handle.offer(Event.new("from_a"))

    def producer_b() -> None:
        results["b"] = handle.offer(Event.new("from_b"))

    thread_a = threading.Thread(target=producer_a)
    thread_a.start()
    assert await asyncio.to_thread(lock.inside.wait, 10)  # A holds the lock
    thread_b = threading.Thread(target=producer_b)
    thread_b.start()
    # B finds the lock taken and returns without waiting for A.
    await asyncio.to_thread(thread_b.join, 10)
    assert not thread_b.is_alive()
    assert lock.refused_attempt.is_set()
    assert results == {"b": False}
    lock.proceed.set()
    await asyncio.to_thread(thread_a.join, 10)

    assert results == {"a": False, "b": False}
    stats = handle.statistics()
    assert stats.contended == 1
    assert stats.fenced
    assert stats.overflow_reason is OverflowReason.CONTENDED
    assert (stats.admitted, stats.refused) == (1, 2)
    first, marker = handle.get_nowait(), handle.get_nowait()
    assert isinstance(first, Event)
    assert first.type == "before"
    assert isinstance(marker, Overflow)
    assert marker.reason is OverflowReason.CONTENDED
    assert handle.statistics().queued == 0
    assert not handle.offer(Event.new("after_fence"))


async def test_a_contended_terminal_item_still_reaches_the_consumer() -> None:
    lock = GatedLock()
    handle = Delivery(max_entries=8, lock=lock, contention_timeout=0)
    done = Event.new("run_completed", {"ok": True}, {"run_id": "r1"})

    def holder() -> None:
        lock.gated_thread = threading.get_ident()
        handle.offer(Event.new("from_holder"))

    thread = threading.Thread(target=holder)
    thread.start()
    assert await asyncio.to_thread(lock.inside.wait, 10)
    assert not handle.offer(done)  # contended: refused at once, its notice requested
    lock.proceed.set()
    await asyncio.to_thread(thread.join, 10)
    marker, notice = handle.get_nowait(), handle.get_nowait()
    assert isinstance(marker, Overflow)
    assert isinstance(notice, TerminalNotice)
    assert notice.run_id == "r1"


async def test_concurrent_producers_never_exceed_the_bound() -> None:
    handle = Delivery(max_entries=16)
    barrier = threading.Barrier(4)

    def produce(worker: int) -> None:
        barrier.wait(10)
        for n in range(200):
            handle.offer(Event.new("x", {"w": worker, "n": n}))

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        await asyncio.to_thread(thread.join, 10)
    stats = handle.statistics()
    assert stats.queued <= 16 + 2
    assert stats.fenced
    assert stats.admitted <= 16


async def test_a_contended_producer_waits_for_the_holder_and_is_admitted() -> None:
    """B finds A inside its admission section and waits (bounded) instead of fencing: once A
    leaves, B is admitted and nothing fences."""
    lock = GatedLock()
    handle = Delivery(max_entries=8, lock=lock, contention_timeout=10)
    results: dict[str, bool] = {}

    def producer_a() -> None:
        lock.gated_thread = threading.get_ident()
        results["a"] = handle.offer(Event.new("from_a"))

    def producer_b() -> None:
        results["b"] = handle.offer(Event.new("from_b"))

    thread_a = threading.Thread(target=producer_a)
    thread_a.start()
    assert await asyncio.to_thread(lock.inside.wait, 10)
    thread_b = threading.Thread(target=producer_b)
    thread_b.start()
    assert await asyncio.to_thread(lock.waiting.wait, 10)  # B is waiting on A, not refused
    assert "b" not in results
    lock.proceed.set()
    await asyncio.to_thread(thread_a.join, 10)
    await asyncio.to_thread(thread_b.join, 10)
    assert results == {"a": True, "b": True}
    stats = handle.statistics()
    assert (stats.fenced, stats.contended, stats.admitted) == (False, 0, 2)


async def test_a_holder_stalled_past_the_bound_fences_as_contended() -> None:
    lock = GatedLock()
    handle = Delivery(max_entries=8, lock=lock, contention_timeout=0.01)

    def holder() -> None:
        lock.gated_thread = threading.get_ident()
        handle.offer(Event.new("from_holder"))

    thread = threading.Thread(target=holder)
    thread.start()
    assert await asyncio.to_thread(lock.inside.wait, 10)
    # The holder stays parked until told: the bounded wait runs out whatever the timing.
    assert not await asyncio.to_thread(handle.offer, Event.new("late"))
    lock.proceed.set()
    await asyncio.to_thread(thread.join, 10)
    stats = handle.statistics()
    assert stats.overflow_reason is OverflowReason.CONTENDED
    assert stats.contended == 1


async def test_four_thread_publishers_into_a_large_handle_never_fence() -> None:
    """The scenario that fenced 15 of 15 trials: 4 threads x 25k events, 1M entries."""
    event = Event.new("x", {"n": 1})
    for _trial in range(3):
        handle = Delivery(max_entries=1_000_000, bind_current_task=False, contention_timeout=10)
        barrier = threading.Barrier(4)

        def produce(h: Delivery = handle, b: threading.Barrier = barrier) -> None:
            b.wait(10)
            for _ in range(25_000):
                h.offer(event)

        threads = [threading.Thread(target=produce) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            await asyncio.to_thread(thread.join, 60)
        stats = handle.statistics()
        assert (stats.fenced, stats.contended, stats.admitted) == (False, 0, 100_000)


async def test_four_thread_publishers_on_one_bus_never_fence_and_deliver_everything() -> None:
    """Through the bus: its subscribers share the bus's admission lock (one acquisition per
    publication); publisher threads wait for each other, bounded, instead of fencing."""

    async with Bus(contention_timeout=10) as bus:  # a large bound: the test is not a race
        handles = [Delivery(max_entries=200_000, bind_current_task=False) for _ in range(3)]
        for handle in handles:
            bus.subscribe("run:r1", delivery=handle)
        barrier = threading.Barrier(4)
        event = Event.new("x", {"n": 1})

        def produce() -> None:
            barrier.wait(10)
            for _ in range(10_000):
                bus.broadcast_threadsafe("run:r1", event)

        threads = [threading.Thread(target=produce) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            await asyncio.to_thread(thread.join, 60)
        for handle in handles:
            stats = handle.statistics()
            assert (stats.fenced, stats.contended, stats.admitted) == (False, 0, 40_000)


async def test_a_handle_on_two_buses_and_offered_directly_keeps_one_bound() -> None:

    first, second = Bus(), Bus()
    handle = Delivery(max_entries=4, bind_current_task=False)
    first.subscribe("run:r1", delivery=handle)  # adopts the first bus's lock
    second.subscribe("run:r1", delivery=handle)  # the second bus admits it on the full path
    first.broadcast("run:r1", Event.new("a"))
    second.broadcast("run:r1", Event.new("b"))
    assert handle.offer(Event.new("c"))
    first.broadcast("run:r1", Event.new("d"))
    second.broadcast("run:r1", Event.new("e"))  # the fifth: refused, fences
    first.broadcast("run:r1", Event.new("f"))
    items = []
    while handle.statistics().queued:
        items.append(handle.get_nowait())
    assert [getattr(item, "type", None) for item in items[:4]] == ["a", "b", "c", "d"]
    assert isinstance(items[4], Overflow)
    assert len(items) == 5
    first.close()
    second.close()


async def test_a_bus_publisher_stalled_behind_a_held_bus_lock_fences_as_contended() -> None:
    """The bus's shared admission lock is held (as by a publisher preempted mid fan-out) past
    the bound: the waiting publisher's item is refused as contended, and the fence with its
    marker lands as soon as the lock is free, before anything else is admitted."""
    async with Bus() as bus:
        handle = Delivery(max_entries=8, bind_current_task=False)
        bus.subscribe("run:r1", delivery=handle)
        bus.broadcast("run:r1", Event.new("before"))
        bus._lock.acquire()  # white-box: the lock every adopted subscriber is admitted under
        try:
            await asyncio.to_thread(bus.broadcast_threadsafe, "run:r1", Event.new("stalled"))
        finally:
            bus._lock.release()
        bus.broadcast("run:r1", Event.new("after"))
        items = []
        while handle.statistics().queued:
            items.append(handle.get_nowait())
        assert items[0].type == "before"
        assert isinstance(items[1], Overflow)
        assert items[1].reason is OverflowReason.CONTENDED
        assert len(items) == 2
        assert handle.statistics().contended == 1
