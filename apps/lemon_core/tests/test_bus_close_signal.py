"""Closing a bus wakes its waiting consumers with the closed signal."""

from __future__ import annotations

import asyncio
import threading

import pytest

from lemon_core import Bus, Delivery, DeliveryClosedError, Event


async def test_bus_close_wakes_a_waiting_consumer_with_the_closed_signal() -> None:
    bus = Bus()
    subscription = bus.subscribe("run:r1")
    waiting = asyncio.ensure_future(subscription.get())
    await asyncio.sleep(0)  # parked
    bus.close()
    with pytest.raises(DeliveryClosedError):
        await asyncio.wait_for(waiting, timeout=10)
    assert subscription.delivery.closed


async def test_bus_close_from_another_thread_ends_iteration_after_the_queued_items() -> None:
    bus = Bus()
    handle = Delivery()
    bus.subscribe("run:r1", delivery=handle)
    bus.subscribe("session:s1", delivery=handle)
    seen: list[str] = []
    parked = asyncio.Event()

    async def consume() -> None:
        async for item in handle:
            seen.append(item.type)
            if item.type == "two":
                parked.set()

    consumer = asyncio.create_task(consume())
    bus.broadcast("run:r1", Event.new("one"))
    bus.broadcast("session:s1", Event.new("two"))
    await parked.wait()
    bus.broadcast("run:r1", Event.new("three"))  # still queued when the bus closes
    closer = threading.Thread(target=bus.close)
    closer.start()
    await asyncio.to_thread(closer.join, 10)
    await asyncio.wait_for(consumer, timeout=10)
    assert seen == ["one", "two", "three"]
    assert handle.statistics().closed


async def test_a_handle_still_subscribed_on_another_bus_stays_open() -> None:
    first, second = Bus(), Bus()
    handle = Delivery()
    first.subscribe("run:r1", delivery=handle)
    second.subscribe("run:r1", delivery=handle)
    first.close()
    assert not handle.closed
    second.broadcast("run:r1", Event.new("x"))
    assert (await handle.get()).type == "x"
    second.close()
    assert handle.closed
    with pytest.raises(DeliveryClosedError):
        await handle.get()
