"""A handle is owned by the consumer that reads it, not by whichever task created it."""

from __future__ import annotations

import asyncio

import pytest

from lemon_core import Bus, Delivery, DeliveryClosedError, Event
from lemon_core.bus import Subscription


async def test_a_subscription_opened_in_a_wait_for_helper_outlives_the_helper() -> None:
    async with Bus() as bus:

        async def open_subscription() -> Subscription:
            return bus.subscribe("run:r1")  # on 3.11, wait_for runs this in a task of its own

        subscription = await asyncio.wait_for(open_subscription(), timeout=10)
        await asyncio.sleep(0)  # let the helper task's done callbacks run
        assert subscription.active
        bus.broadcast("run:r1", Event.new("x"))
        item = await subscription.get()
        assert item.type == "x"
        assert subscription.delivery.owner is asyncio.current_task()


async def test_subscriptions_opened_by_gather_helpers_outlive_them() -> None:
    async with Bus() as bus:

        async def open_subscription(topic: str) -> Subscription:
            return bus.subscribe(topic)

        first, second = await asyncio.gather(
            open_subscription("run:r1"), open_subscription("run:r2")
        )
        await asyncio.sleep(0)
        assert first.active
        assert second.active
        bus.broadcast("run:r2", Event.new("y"))
        assert (await second.get()).type == "y"


async def test_the_real_consumer_dying_releases_a_handle_it_did_not_create() -> None:
    async with Bus() as bus:
        subscription = bus.subscribe("run:r1")  # created here, by the test's task
        ready = asyncio.Event()

        async def consumer() -> None:
            bus.broadcast("run:r1", Event.new("first"))
            await subscription.get()  # this task reads: it owns the handle
            ready.set()
            await subscription.get()  # parks; then the task is cancelled

        task = asyncio.create_task(consumer())
        await ready.wait()
        assert subscription.delivery.owner is task
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(subscription.delivery.wait_closed(), timeout=10)
        assert not subscription.active
        assert bus.topics() == ()


async def test_single_get_helper_tasks_never_take_ownership() -> None:
    """``ensure_future(handle.get())`` (and ``wait_for``/``gather`` of it) is a helper of the
    consumer: its end closes nothing."""
    handle = Delivery()
    handle.offer(Event.new("one"))
    handle.offer(Event.new("two"))
    handle.offer(Event.new("three"))
    assert (await asyncio.ensure_future(handle.get())).type == "one"
    assert (await asyncio.wait_for(handle.get(), timeout=10)).type == "two"
    (third,) = await asyncio.gather(handle.get())
    assert third.type == "three"
    await asyncio.sleep(0)
    assert not handle.closed
    assert handle.owner is None
    waiting = asyncio.ensure_future(handle.get())  # parks in its own helper task
    await asyncio.sleep(0)
    handle.offer(Event.new("four"))
    assert (await waiting).type == "four"
    assert not handle.closed


async def test_claim_moves_ownership_and_the_new_owner_ending_releases() -> None:
    handle = Delivery()
    first_done = asyncio.Event()

    async def first() -> None:
        handle.claim()
        await first_done.wait()

    async def second() -> None:
        handle.claim()

    task_one = asyncio.create_task(first())
    await asyncio.sleep(0)
    assert handle.owner is task_one
    await asyncio.create_task(second())  # takes over, then ends
    await asyncio.wait_for(handle.wait_closed(), timeout=10)
    assert handle.closed
    first_done.set()
    await task_one
    with pytest.raises(DeliveryClosedError):
        handle.claim()


async def test_replace_keeps_the_owner() -> None:
    async with Bus() as bus:
        old = Delivery()
        bus.subscribe("system", delivery=old)
        old.claim()
        new = old.replace()
        assert new.owner is asyncio.current_task()
        assert old.owner is None


async def test_claim_on_get_can_be_turned_off() -> None:
    handle = Delivery(claim_on_get=False)

    async def reader() -> None:
        handle.offer(Event.new("x"))
        await handle.get()

    await asyncio.create_task(reader())
    await asyncio.sleep(0)
    assert handle.owner is None
    assert not handle.closed
