"""Closing or replacing a handle, or its owner task ending, releases its subscriptions."""

from __future__ import annotations

import asyncio

import pytest

from lemon_core import Bus, Delivery, DeliveryClosedError, Event


async def test_close_releases_every_subscription_and_the_queue() -> None:
    async with Bus() as bus:
        handle = Delivery()
        first = bus.subscribe("run:r1", delivery=handle)
        second = bus.subscribe("session:s1", delivery=handle)
        bus.broadcast("run:r1", Event.new("x"))
        handle.close()
        assert not first.active
        assert not second.active
        assert bus.topics() == ()
        stats = handle.statistics()
        assert (stats.closed, stats.queued, stats.bytes, stats.topics) == (True, 0, 0, ())
        assert not handle.offer(Event.new("late"))
        with pytest.raises(DeliveryClosedError):
            handle.get_nowait()
        with pytest.raises(DeliveryClosedError):
            bus.subscribe("run:r1", delivery=handle)


async def test_close_wakes_a_waiting_consumer_and_ends_iteration() -> None:
    handle = Delivery()
    seen: list[object] = []

    async def consume() -> None:
        async for item in handle:
            seen.append(item)

    task = asyncio.create_task(consume())
    handle.offer(Event.new("one"))
    await asyncio.sleep(0)  # the consumer takes the item and parks
    handle.close()
    await asyncio.wait_for(task, timeout=10)
    assert len(seen) == 1


async def test_a_waiting_get_raises_when_the_handle_closes() -> None:
    handle = Delivery()
    waiting = asyncio.create_task(handle.get())
    await asyncio.sleep(0)
    handle.close()
    with pytest.raises(DeliveryClosedError):
        await asyncio.wait_for(waiting, timeout=10)


async def test_replace_releases_the_old_handle() -> None:
    async with Bus() as bus:
        old = Delivery()
        bus.subscribe("system", delivery=old)
        new = old.replace()
        assert old.closed
        assert old.topics() == ()
        assert bus.statistics().handles == 1
        assert new.topics() == ("system",)


async def test_the_owner_task_ending_releases_the_handle() -> None:
    async with Bus() as bus:
        created: asyncio.Future[Delivery] = asyncio.get_running_loop().create_future()
        finish = asyncio.Event()

        async def subscriber() -> None:
            subscription = bus.subscribe("run:r1")  # default handle, claimed by its reader
            created.set_result(subscription.delivery)
            await subscription.get()  # this task reads: it owns the handle
            await finish.wait()

        task = asyncio.create_task(subscriber())
        handle = await created
        assert bus.topics() == ("run:r1",)
        bus.broadcast("run:r1", Event.new("x"))
        finish.set()
        await task
        await asyncio.wait_for(handle.wait_closed(), timeout=10)
        assert handle.closed
        assert bus.topics() == ()


async def test_a_crashing_owner_task_releases_the_handle() -> None:
    async with Bus() as bus:
        handles: list[Delivery] = []

        async def subscriber() -> None:
            subscription = bus.subscribe("run:r1")
            handles.append(subscription.delivery)
            subscription.claim()
            raise RuntimeError("subscriber died")

        task = asyncio.create_task(subscriber())
        with pytest.raises(RuntimeError, match="subscriber died"):
            await task
        await asyncio.wait_for(handles[0].wait_closed(), timeout=10)
        assert bus.topics() == ()


async def test_a_handle_can_be_bound_to_no_task() -> None:
    async with Bus() as bus:
        handles: list[Delivery] = []

        async def make() -> None:
            handles.append(Delivery(bind_current_task=False))

        await asyncio.create_task(make())
        bus.subscribe("cron", delivery=handles[0])
        assert not handles[0].closed
        assert bus.topics() == ("cron",)


async def test_one_consumer_per_handle() -> None:
    handle = Delivery()
    first = asyncio.create_task(handle.get())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="one consumer"):
        await handle.get()
    handle.close()
    with pytest.raises(DeliveryClosedError):
        await first
