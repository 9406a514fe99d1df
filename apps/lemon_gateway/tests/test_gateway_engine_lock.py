"""EngineLock: FIFO ownership, owner death (holding and waiting), no age-based displacement."""

from __future__ import annotations

import asyncio

import pytest

from lemon_gateway import EngineLock, LockTimeoutError
from lemon_platform_test.gateway_kit import until


async def test_gateway_lock_grants_fifo_and_keys_are_independent() -> None:
    lock = EngineLock()
    a = await lock.acquire("k")
    other = await lock.acquire("other")
    order: list[int] = []

    async def waiter(i: int) -> None:
        lease = await lock.acquire("k")
        order.append(i)
        lease.release()

    tasks = [asyncio.create_task(waiter(i)) for i in range(3)]
    await until(lambda: lock.statistics().waiting == 3)
    a.release()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2]
    assert other.release()
    assert lock.statistics().held == 0


async def test_gateway_lock_moves_on_confirmed_owner_death_while_holding() -> None:
    lock = EngineLock()
    holding = asyncio.Event()
    die = asyncio.Event()

    async def owner() -> None:
        await lock.acquire("k")
        holding.set()
        await die.wait()
        raise RuntimeError("owner crashed without releasing")

    t = asyncio.create_task(owner())
    await holding.wait()
    next_owner = asyncio.create_task(lock.acquire("k"))
    await until(lambda: lock.statistics().waiting == 1)
    die.set()
    lease = await next_owner
    with pytest.raises(RuntimeError):
        await t
    assert lock.statistics().owner_deaths == 1
    assert lock.owner_of("k") is lease


async def test_gateway_lock_dead_waiter_leaves_the_queue() -> None:
    lock = EngineLock()
    first = await lock.acquire("k")
    granted = asyncio.Event()
    finish = asyncio.Event()

    async def survivor() -> None:
        lease = await lock.acquire("k")
        granted.set()
        await finish.wait()
        lease.release()

    doomed = asyncio.create_task(lock.acquire("k"))
    alive = asyncio.create_task(survivor())
    await until(lambda: lock.statistics().waiting == 2)
    doomed.cancel()
    await asyncio.gather(doomed, return_exceptions=True)
    assert lock.statistics().waiting == 1
    first.release()
    await granted.wait()
    owner = lock.owner_of("k")
    assert owner is not None
    assert owner.owner is alive
    finish.set()
    await alive
    assert lock.statistics().held == 0


async def test_gateway_lock_waiter_dying_as_it_is_granted_hands_the_lock_on() -> None:
    lock = EngineLock()
    first = await lock.acquire("k")
    racer = asyncio.create_task(lock.acquire("k"))
    await until(lambda: lock.statistics().waiting == 1)
    first.release()  # grants racer's future...
    racer.cancel()  # ...but racer dies before it resumes
    await asyncio.gather(racer, return_exceptions=True)
    assert lock.statistics().held == 0
    assert (await lock.acquire("k", wait_s=0)).release()


async def test_gateway_lock_never_displaces_a_live_owner_for_age() -> None:
    lock = EngineLock()
    old = await lock.acquire("k")
    with pytest.raises(LockTimeoutError):
        await lock.acquire("k", wait_s=0.01)
    assert lock.owner_of("k") is old
    assert lock.statistics().waiting == 0
    stale = old
    assert stale.release()
    new = await lock.acquire("k")
    assert not stale.release()  # a second release of an old lease changes nothing
    assert lock.owner_of("k") is new


async def test_gateway_lock_never_displaces_an_owner_held_for_a_very_long_time() -> None:
    # A manual clock: the owner has held the lock for a billion seconds, far above any
    # threshold a "reaper" could use; no waiter and no newcomer takes it over.
    now = [0.0]
    lock = EngineLock(clock=lambda: now[0])
    owner = await lock.acquire("k")
    now[0] += 1e9
    assert lock.statistics().owners[0].held_s == 1e9
    assert lock.try_acquire("k") is None
    waiter = asyncio.get_running_loop().create_task(lock.acquire("k"))
    await until(lambda: lock.statistics().waiting == 1)
    now[0] += 1e9
    for _ in range(100):  # many loop turns: nothing moves while the owner lives
        await asyncio.sleep(0)
    assert lock.try_acquire("k") is None
    assert not waiter.done()
    assert lock.owner_of("k") is owner
    assert lock.statistics().owner_deaths == 0
    assert owner.release()
    lease = await waiter  # granted on the explicit release only
    assert lease.token > owner.token
    assert lock.statistics().owner_deaths == 1  # the waiter task ended holding it
