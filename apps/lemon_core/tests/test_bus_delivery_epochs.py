"""Tagged epochs: after a replacement, nothing from the old handle is applied."""

from __future__ import annotations

import asyncio
import threading

from lemon_core import Bus, ConsumerClass, Delivery, Event, Overflow, Tagged
from lemon_core.events import Delta


def delta(seq: int) -> Event:
    return Event.new("delta", Delta(run_id="r1", seq=seq, text="x"), {"run_id": "r1"})


async def test_tagged_items_and_controls_carry_the_handle_epoch() -> None:
    async with Bus() as bus:
        pane = Delivery.for_consumer(ConsumerClass.BROWSER_PANE, max_entries=1)
        bus.subscribe("session:s1", delivery=pane)
        bus.broadcast("session:s1", delta(0))
        bus.broadcast("session:s1", delta(1))
        data = pane.get_nowait()
        marker = pane.get_nowait()
        assert isinstance(data, Tagged)
        assert data.epoch == pane.epoch
        assert data.item.payload.seq == 0
        assert isinstance(marker, Overflow)
        assert marker.epoch == pane.epoch
        assert pane.accepts(data)
        assert pane.accepts(marker)
        assert not pane.accepts(delta(2))  # untagged items are not this handle's


async def test_a_late_producer_cannot_reach_the_consumer_after_replacement() -> None:
    """A producer that captured the old handle is delayed before delivering; meanwhile the
    consumer overflows, replaces its handle and re-reads authority. The late item is refused by
    the old handle and the old epoch is rejected by the new one."""
    async with Bus() as bus:
        old = Delivery.for_consumer(ConsumerClass.BROWSER_PANE, max_entries=2)
        bus.subscribe("session:s1", delivery=old)
        captured = threading.Event()
        go = threading.Event()
        outcome: list[bool] = []

        def late_producer() -> None:
            handle = old  # captured before recovery
            captured.set()
            go.wait(10)
            outcome.append(handle.offer(delta(99)))

        producer = threading.Thread(target=late_producer)
        producer.start()
        assert await asyncio.to_thread(captured.wait, 10)

        bus.broadcast("session:s1", delta(0))
        taken_before_recovery = old.get_nowait()  # e.g. sitting in a relay's batch
        for seq in range(1, 5):
            bus.broadcast("session:s1", delta(seq))
        assert old.fenced

        new = old.replace()
        go.set()
        await asyncio.to_thread(producer.join, 10)

        assert outcome == [False]
        assert old.closed
        assert old.statistics().queued == 0
        assert not new.accepts(taken_before_recovery)
        bus.broadcast("session:s1", delta(5))
        fresh = new.get_nowait()
        assert new.accepts(fresh)
        assert isinstance(fresh, Tagged)
        assert fresh.item.payload.seq == 5
        assert new.statistics().queued == 0  # nothing from the old epoch leaked in


async def test_epochs_increase_with_every_replacement() -> None:
    async with Bus() as bus:
        handle = Delivery(tagged=True)
        bus.subscribe("cron", delivery=handle)
        epochs = [handle.epoch]
        for _ in range(3):
            handle = handle.replace()
            epochs.append(handle.epoch)
        assert epochs == sorted(set(epochs))
        assert handle.topics() == ("cron",)
        assert handle.tagged
