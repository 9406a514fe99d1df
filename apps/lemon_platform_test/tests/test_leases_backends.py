"""Leases with fencing tokens, in memory and in PostgreSQL: one live owner per name, tokens that
only grow, ownership moving on release or after expiry, renewal by the owner only, and fenced
writes refused once another owner took over (nothing written)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import psycopg
import pytest

from lemon_core.leases import Lease, Leases
from lemon_core.store import StaleLeaseError, Store
from lemon_infra import MemoryLeases, MemoryStore, PostgresLeases, PostgresStore, drop_schema
from lemon_platform_test.store_kit import ManualClock

DSN = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@dataclass
class Harness:
    leases: Leases
    store: Store
    expire: Callable[[Lease], Awaitable[None]]
    another: Callable[[], Awaitable[Leases]]  # the same leases seen by another process


@pytest.fixture(params=["memory", "postgres"])
async def harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    if request.param == "memory":
        clock = ManualClock()
        store = MemoryStore(clock=clock)
        memory = MemoryLeases(store, clock=clock)

        async def expire_memory(lease: Lease) -> None:
            clock.now = max(clock.now, lease.expires_at_ms)

        async def same() -> Leases:
            return memory

        yield Harness(memory, store, expire_memory, same)
        return
    schema = f"lease_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    pg = await PostgresStore.open(DSN, schema=schema)
    others: list[PostgresStore] = []

    async def expire_pg(lease: Lease) -> None:
        async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
            await conn.execute(
                f'UPDATE "{schema}".lemon_leases SET expires_at_ms = 0 WHERE name = %s',
                (lease.name,),
            )

    async def other_process() -> Leases:
        store = await PostgresStore.open(DSN, schema=schema)
        others.append(store)
        return PostgresLeases(store)

    try:
        yield Harness(PostgresLeases(pg), pg, expire_pg, other_process)
    finally:
        for store in [pg, *others]:
            await store.close()
        await drop_schema(DSN, schema)


async def test_one_live_owner_and_ownership_moves_on_release(harness: Harness) -> None:
    leases = harness.leases
    other = await harness.another()
    first = await leases.acquire("engine:s1", "daemon-a", ttl_ms=60_000)
    assert first is not None
    assert first.owner == "daemon-a"
    assert await other.acquire("engine:s1", "daemon-b", ttl_ms=60_000) is None
    assert await other.acquire("engine:s2", "daemon-b", ttl_ms=60_000) is not None
    holder = await other.holder("engine:s1")
    assert holder is not None
    assert (holder.owner, holder.token) == ("daemon-a", first.token)
    assert await leases.release(first) is True
    assert await leases.release(first) is False
    second = await other.acquire("engine:s1", "daemon-b", ttl_ms=60_000)
    assert second is not None
    assert second.token > first.token


async def test_a_live_owner_renews_and_is_not_displaced(harness: Harness) -> None:
    lease = await harness.leases.acquire("engine:s1", "a", ttl_ms=60_000)
    assert lease is not None
    renewed = await harness.leases.renew(lease, ttl_ms=120_000)
    assert renewed is not None
    assert renewed.token == lease.token
    assert renewed.expires_at_ms >= lease.expires_at_ms
    other = await harness.another()
    assert await other.acquire("engine:s1", "b", ttl_ms=60_000) is None


async def test_after_expiry_another_owner_takes_over_and_the_old_token_is_fenced(
    harness: Harness,
) -> None:
    old = await harness.leases.acquire("engine:s1", "a", ttl_ms=60_000)
    assert old is not None
    fenced_old = harness.leases.fenced(old)
    await fenced_old.put("chat_state", "s1", {"by": "a", "n": 1})
    await harness.expire(old)  # the owner stopped renewing (paused, partitioned, dead)

    other = await harness.another()
    new = await other.acquire("engine:s1", "b", ttl_ms=60_000)
    assert new is not None
    assert new.token > old.token
    await other.fenced(new).put("chat_state", "s1", {"by": "b", "n": 2})

    # The former owner wakes up: its writes, its renewal and its release are all refused.
    with pytest.raises(StaleLeaseError, match="no longer holds it"):
        await fenced_old.put("chat_state", "s1", {"by": "a", "n": 3})
    with pytest.raises(StaleLeaseError):
        await fenced_old.delete("chat_state", "s1")
    assert await harness.leases.renew(old, ttl_ms=60_000) is None
    assert await harness.leases.release(old) is False
    assert await harness.store.get("chat_state", "s1") == {"by": "b", "n": 2}
    assert fenced_old.statistics()["refused"] == 2


async def test_a_fenced_batch_is_checked_once_and_refused_whole_after_a_takeover(
    harness: Harness,
) -> None:
    old = await harness.leases.acquire("engine:s1", "a", ttl_ms=60_000)
    assert old is not None
    fenced_old = harness.leases.fenced(old)
    await fenced_old.put_many([("runs", "r1", {"n": 1}, None), ("run_history", "s1:r1", 1, None)])
    assert await harness.store.get("runs", "r1") == {"n": 1}
    await harness.expire(old)
    other = await harness.another()
    new = await other.acquire("engine:s1", "b", ttl_ms=60_000)
    assert new is not None
    with pytest.raises(StaleLeaseError, match="no longer holds it"):
        await fenced_old.put_many(
            [("runs", "r1", {"n": 2}, None), ("run_history", "s1:r2", 2, None)]
        )
    assert fenced_old.statistics()["refused"] == 1
    assert await harness.store.get("runs", "r1") == {"n": 1}
    assert [k for k, _ in await harness.store.scan("run_history")] == ["s1:r1"]
    await other.fenced(new).put_many([("runs", "r1", {"n": 3}, None)])
    assert await harness.store.get("runs", "r1") == {"n": 3}


async def test_a_fenced_claim_holds_once_and_is_refused_whole_after_a_takeover(
    harness: Harness,
) -> None:
    old = await harness.leases.acquire("engine:s1", "a", ttl_ms=60_000)
    assert old is not None
    fenced_old = harness.leases.fenced(old)
    also = [("entries", "e1", 1, None)]
    assert await fenced_old.put_new("ids", "i1", {"by": "a"}, also=also) is True
    assert await fenced_old.put_new("ids", "i1", {"by": "a2"}) is False  # held: nothing
    assert await harness.store.get("ids", "i1") == {"by": "a"}
    await harness.expire(old)
    other = await harness.another()
    new = await other.acquire("engine:s1", "b", ttl_ms=60_000)
    assert new is not None
    with pytest.raises(StaleLeaseError, match="no longer holds it"):
        await fenced_old.put_new("ids", "i2", {"by": "a"}, also=[("entries", "e2", 2, None)])
    assert await harness.store.get("ids", "i2") is None
    assert await harness.store.get("entries", "e2") is None
    assert await other.fenced(new).put_new("ids", "i2", {"by": "b"}) is True


async def test_an_expired_lease_nobody_took_is_still_its_owners(harness: Harness) -> None:
    lease = await harness.leases.acquire("engine:s1", "a", ttl_ms=60_000)
    assert lease is not None
    await harness.expire(lease)
    # No one took over: the late owner's write is safe and accepted, and it may renew.
    await harness.leases.fenced(lease).put("t", "k", 1)
    assert await harness.leases.renew(lease, ttl_ms=60_000) is not None


async def test_racing_acquirers_never_both_win(harness: Harness) -> None:
    contenders = [await harness.another() for _ in range(6)]
    won = await asyncio.gather(
        *(c.acquire("slot:0", f"d{i}", ttl_ms=60_000) for i, c in enumerate(contenders))
    )
    assert sum(lease is not None for lease in won) == 1
