"""Scheduler: global slots per conversation key, FIFO tickets, generation fencing."""

from __future__ import annotations

import asyncio

import pytest

from lemon_core.bus import Bus
from lemon_gateway import Gateway, GatewayConfig, Scheduler, SlotGrant
from lemon_platform_test.executor import Gate, Script, ScriptedExecutor
from lemon_platform_test.gateway_kit import command, until


async def test_gateway_scheduler_grants_up_to_max_and_one_per_key_in_fifo_order() -> None:
    s = Scheduler(2)
    g1 = s.try_acquire("a", 1)
    g2 = s.try_acquire("b", 2)
    assert g1 is not None
    assert g2 is not None
    assert s.try_acquire("c", 3) is None
    fc = s.request("c", 3)
    fd = s.request("d", 4)
    fa = s.request("a", 5)  # "a" already holds a slot: must wait even when one frees
    assert not fc.done()
    assert not fd.done()
    assert not fa.done()
    assert s.release(g1)
    assert fc.done()
    gc = fc.result()
    assert gc is not None
    assert gc.key == "c"
    assert not fd.done()
    assert s.release(g2)
    assert fd.done()
    assert not fa.done()
    gd = fd.result()
    assert gd is not None
    s.release(gd)
    assert fa.done()
    stats = s.statistics()
    assert stats.in_flight == 2
    assert [slot.key for slot in stats.slots] == ["c", "a"]


async def test_gateway_scheduler_ignores_stale_grants_releases_and_requests() -> None:
    s = Scheduler(1)
    held = s.try_acquire("x", 1)
    assert held is not None
    first = s.request("k", 10)
    # The waiter times out: it cancels its prior generation, then asks again.
    assert s.cancel("k", 10)
    assert first.result() is None
    second = s.request("k", 11)
    # A request or cancel for an older generation is stale and changes nothing.
    stale = s.request("k", 10)
    assert stale.result() is None
    assert not s.cancel("k", 10)
    assert s.statistics().waiters[0].generation == 11
    # A release of a grant that is not the current one is ignored.
    assert not s.release(SlotGrant(key="x", generation=0, slot_id=held.slot_id))
    assert not s.release(SlotGrant(key="nobody", generation=1, slot_id=99))
    assert s.statistics().in_flight == 1
    assert s.release(held)
    grant = second.result()
    assert grant is not None
    assert grant.generation == 11
    assert not s.release(held)  # double release
    stats = s.statistics()
    assert (stats.stale_releases, stats.stale_requests) == (3, 1)
    # Cancelling the granted generation returns its slot.
    assert s.cancel("k", 11)
    assert s.statistics().in_flight == 0


async def test_gateway_scheduler_expiry_keeps_the_fifo_ticket_on_retry() -> None:
    s = Scheduler(1)
    held = s.try_acquire("x", 1)
    assert held is not None
    early_ticket = s.new_ticket()
    early = s.request("early", 2, ticket=early_ticket)
    late = s.request("late", 3)
    assert s.expire_waiters(0) == 2
    assert early.result() is None
    assert late.result() is None
    # Both retry with new generations; "late" happens to ask first, "early" keeps its place.
    late2 = s.request("late", 5)
    s.cancel("early", 2)
    early2 = s.request("early", 4, ticket=early_ticket)
    s.release(held)
    assert early2.done()
    assert not late2.done()


async def test_gateway_slot_timeout_retries_with_a_new_generation_and_fences_the_old() -> None:
    bus = Bus()
    gate = Gate()
    executor = ScriptedExecutor().script_run("holder", Script().gate(gate).complete())
    async with Gateway(
        bus=bus, executor=executor, config=GatewayConfig(max_concurrent_runs=1)
    ) as gw:
        holder = gw.submit_execution(command("holder", session="a"))
        waiter = gw.submit_execution(command("waiter", session="b"))
        await gate.reached()
        await until(lambda: gw.scheduler.statistics().waiting == 1)
        gen_before = gw.scheduler.statistics().waiters[0].generation
        # The waiter times out (the watchdog does this after slot_request_timeout_s).
        assert gw.scheduler.expire_waiters(0) == 1
        assert gw.scheduler.statistics().waiters[0].reserved is True
        await until(lambda: gw.scheduler.statistics().waiters[0].generation > gen_before)
        waiters = gw.scheduler.statistics().waiters
        assert waiters[0].reserved is False
        assert gw.scheduler.statistics().waiting == 1
        runs = {r["run_id"]: r for r in gw.debug_snapshot()["runs"]}
        assert runs["waiter"]["slot_retries"] == 1
        # A grant or release for the old generation is ignored.
        assert not gw.scheduler.release(
            SlotGrant(key=("session", "b"), generation=gen_before, slot_id=1)
        )
        assert not gw.scheduler.cancel(("session", "b"), gen_before)
        assert gw.scheduler.statistics().waiting == 1
        gate.open()
        assert (await holder).ok
        assert (await waiter).ok
        stats = gw.scheduler.statistics()
        assert (stats.in_flight, stats.waiting, stats.expired) == (0, 0, 1)


async def test_gateway_scheduler_waiter_bound_is_enforced() -> None:
    s = Scheduler(1, max_waiters=1)
    s.try_acquire("x", 1)
    s.request("a", 2)
    with pytest.raises(OverflowError, match="waiter bound"):
        s.request("b", 3).result()


async def test_gateway_scheduler_release_in_the_turn_of_a_timeout_keeps_fifo() -> None:
    s = Scheduler(1)
    held = s.try_acquire("x", 1)
    assert held is not None
    first_ticket = s.new_ticket()
    first = s.request("first", 2, ticket=first_ticket)
    assert s.expire_waiters(0) == 1
    assert first.result() is None
    later = s.request("later", 3)
    # The holder releases in the same loop turn, before "first" has asked again.
    assert s.release(held)
    assert not later.done()
    assert s.try_acquire("newcomer", 4) is None
    assert not s.request("newcomer", 5).done()
    # "first" cancels its timed-out generation and asks again: it is served first.
    assert s.cancel("first", 2)
    again = s.request("first", 6, ticket=first_ticket)
    assert again.done()
    grant = again.result()
    assert grant is not None
    assert grant.key == "first"
    await asyncio.sleep(0)  # the hand-on scheduled by the cancel finds the pool full
    assert not later.done()


async def test_gateway_scheduler_a_timed_out_waiter_that_dies_hands_its_place_on() -> None:
    s = Scheduler(1)
    held = s.try_acquire("x", 1)
    assert held is not None
    s.request("first", 2)
    assert s.expire_waiters(0) == 1
    later = s.request("later", 3)
    s.release(held)
    assert not later.done()
    assert s.cancel("first", 2)  # its owner was cancelled instead of asking again
    await asyncio.sleep(0)
    grant = later.result()
    assert grant is not None
    assert grant.key == "later"


async def test_gateway_scheduler_never_grants_a_second_slot_to_a_key_with_free_slots() -> None:
    s = Scheduler(3)
    first = s.try_acquire("k", 1)
    assert first is not None
    assert s.try_acquire("k", 2) is None  # a slot is free, but "k" holds one
    second = s.request("k", 3)
    assert not second.done()
    other = s.request("other", 4)  # behind "k" in FIFO order, and still served
    assert other.done()
    assert s.statistics().in_flight == 2
    assert [slot.key for slot in s.statistics().slots] == ["k", "other"]
    assert s.holds("k")
    assert s.release(first)
    grant = second.result()
    assert grant is not None
    assert (grant.key, grant.generation) == ("k", 3)


async def test_gateway_second_run_of_a_conversation_waits_although_a_slot_is_free() -> None:
    gate = Gate()
    executor = ScriptedExecutor().script_run("a1", Script().gate(gate).complete(answer="a1"))
    async with Gateway(
        bus=Bus(), executor=executor, config=GatewayConfig(max_concurrent_runs=2)
    ) as gw:
        a1 = gw.submit_execution(command("a1", session="a"))
        a2 = gw.submit_execution(command("a2", session="a"))
        await gate.reached()
        for _ in range(50):
            await asyncio.sleep(0)
        states = {r["run_id"]: r["state"] for r in gw.debug_snapshot()["runs"]}
        assert states == {"a1": "running", "a2": "queued"}
        assert gw.scheduler.statistics().in_flight == 1
        assert "a2" not in executor.records
        gate.open()
        assert (await a1).ok
        assert (await a2).ok
    assert executor.order == ["a1", "a2"]
    assert executor.max_concurrent <= 1


async def test_gateway_scheduler_a_repeated_generation_is_stale() -> None:
    s = Scheduler(1)
    held = s.try_acquire("x", 1)
    assert held is not None
    first = s.request("k", 5)
    again = s.request("k", 5)  # the same generation again: stale, answered at once
    assert again.done()
    assert again.result() is None
    assert not first.done()  # the original request is not superseded by its repeat
    assert s.try_acquire("x", 1) is None
    assert s.statistics().stale_requests == 1
    s.release(held)
    grant = first.result()
    assert grant is not None
    assert grant.generation == 5
