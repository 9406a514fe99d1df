"""A consumer parked in ``get()`` is woken by every later admission, whatever thread publishes.

The race (issue: lost wake-up with cross-thread publishers): producer A reads the consumer's
wait and is preempted before waking it; B wakes that wait; the consumer drains and parks again;
A resumes with the *old* wait in hand; C publishes into the new wait. C's wake must not be
suppressed by anything A did with the old wait.

The interleaving is forced, not hoped for: A runs under a trace function that parks it on a
``threading.Event`` as it enters the handle's wake step (``Delivery._wake``, the one place a
producer acts on the wait it read), after it has read the wait.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import types
from typing import Any

from lemon_core import Bus, Delivery, Event


class ParkOnWake:
    """A trace function that parks the calling thread the first time it enters ``_wake``."""

    def __init__(self) -> None:
        self.parked = threading.Event()
        self.resume = threading.Event()
        self._done = False

    def __call__(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if (
            not self._done
            and event == "call"
            and frame.f_code is Delivery._wake.__code__  # the producer holds the wait it read
        ):
            self._done = True
            self.parked.set()
            assert self.resume.wait(10), "the test never resumed producer A"


def run_in_thread(target: Any, *args: Any, trace: Any = None) -> threading.Thread:
    def body() -> None:
        if trace is not None:
            sys.settrace(trace)
        try:
            target(*args)
        finally:
            sys.settrace(None)

    thread = threading.Thread(target=body)
    thread.start()
    return thread


async def test_a_delayed_producer_with_an_old_wait_cannot_swallow_a_new_wake() -> None:
    async with Bus() as bus:
        handle = Delivery(bind_current_task=False)
        bus.subscribe("run:r1", delivery=handle)
        received: list[str] = []
        drained = threading.Event()
        got_c: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def consume() -> None:
            while True:
                item = await handle.get()
                received.append(item.type)
                if len(received) == 2:
                    drained.set()  # the next get() parks on a new wait, synchronously
                if item.type == "c":
                    got_c.set_result(None)
                    return

        consumer = asyncio.create_task(consume())
        await asyncio.sleep(0)  # the consumer parks on its first wait
        assert handle._waiter is not None

        park = ParkOnWake()
        thread_a = run_in_thread(bus.broadcast_threadsafe, "run:r1", Event.new("a"), trace=park)
        assert await asyncio.to_thread(park.parked.wait, 10)  # A queued "a", holds the old wait

        thread_b = run_in_thread(bus.broadcast_threadsafe, "run:r1", Event.new("b"))
        await asyncio.to_thread(thread_b.join, 10)  # B queued "b" and woke the old wait
        assert await asyncio.to_thread(drained.wait, 10)  # the consumer drained both, parked anew
        assert received == ["a", "b"]

        park.resume.set()  # A acts on the old wait
        await asyncio.to_thread(thread_a.join, 10)
        assert not thread_a.is_alive()

        thread_c = run_in_thread(bus.broadcast_threadsafe, "run:r1", Event.new("c"))
        await asyncio.to_thread(thread_c.join, 10)
        # C's wake was scheduled before C returned: the consumer runs without further help. The
        # timeout only bounds the failure (a lost wake-up waits forever).
        await asyncio.wait_for(got_c, timeout=10)
        await consumer
        assert received == ["a", "b", "c"]


async def test_each_parked_wait_gets_exactly_one_cross_thread_wake() -> None:
    """Many publications into one wait schedule one wake (the cost stays O(1) per wait)."""
    handle = Delivery(bind_current_task=False)
    loop = asyncio.get_running_loop()
    scheduled = 0
    original = loop.call_soon_threadsafe

    def counting(callback: Any, *args: Any, **kwargs: Any) -> asyncio.Handle:
        nonlocal scheduled
        if getattr(callback, "__name__", "") == "_release_waiter":
            scheduled += 1
        return original(callback, *args, **kwargs)

    loop.call_soon_threadsafe = counting  # type: ignore[method-assign]  # count wake-ups only
    try:
        getter = asyncio.ensure_future(handle.get())
        await asyncio.sleep(0)

        def publish() -> None:
            for n in range(50):
                handle.offer(Event.new("x", {"n": n}))

        thread = run_in_thread(publish)
        await asyncio.to_thread(thread.join, 10)
        await asyncio.wait_for(getter, timeout=10)
        assert scheduled == 1
    finally:
        loop.call_soon_threadsafe = original  # type: ignore[method-assign]  # restore


async def test_a_cross_thread_publication_wakes_a_loops_consumers_with_one_call() -> None:
    async with Bus() as bus:
        handles = [Delivery(bind_current_task=False) for _ in range(5)]
        for handle in handles:
            bus.subscribe("run:r1", delivery=handle)
        loop = asyncio.get_running_loop()
        calls: list[str] = []
        original = loop.call_soon_threadsafe

        def counting(callback: Any, *args: Any, **kwargs: Any) -> asyncio.Handle:
            calls.append(getattr(callback, "__name__", ""))
            return original(callback, *args, **kwargs)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]  # count wake-ups only
        try:
            getters = [asyncio.ensure_future(handle.get()) for handle in handles]
            await asyncio.sleep(0)  # all five park
            thread = run_in_thread(bus.broadcast_threadsafe, "run:r1", Event.new("x"))
            await asyncio.to_thread(thread.join, 10)
            received = await asyncio.wait_for(asyncio.gather(*getters), timeout=10)
        finally:
            loop.call_soon_threadsafe = original  # type: ignore[method-assign]  # restore
        assert [item.type for item in received] == ["x"] * 5
        assert calls.count("_release_waiters") == 1
        assert "_release_waiter" not in calls
