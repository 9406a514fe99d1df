"""The Redis bus backend: the bus contract kit and the events kit's backend parity (local next to
Redis) on a real server, then what only a networked backend does: fan-out between buses (as
between daemons), per-process bounded delivery, outage reported and repaired by a resync, lost
publications detected from sequence gaps. Each test uses its own channel prefix; Redis is reached
through a proxy the test can cut (the server is shared and is never restarted)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import msgspec
import pytest
import redis

from lemon_core.bus import Bus, BusBackend, Delivery, Overflow, OverflowReason, PayloadValidation
from lemon_core.errors import BusBackendUnavailableError
from lemon_core.events import BusBackendChanged, Delta, Event
from lemon_infra import RedisBackend, encode_frame
from lemon_platform_test import BusContract, EventsContract
from lemon_platform_test.bus_kit import drain, settle
from lemon_platform_test.proxy import TcpProxy

REDIS_URL = os.environ.get("LEMON_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def prefix() -> str:
    return f"t{os.getpid()}_{uuid.uuid4().hex[:10]}"


def connected(url: str, **options: Any) -> RedisBackend:
    backend = RedisBackend(url, **options)
    backend.connect(5.0)
    return backend


def redis_factory(**options: Any) -> Callable[[], BusBackend]:
    def factory() -> BusBackend:
        return connected(REDIS_URL, prefix=prefix(), **options)

    return factory


class TestRedisBusContract(BusContract):
    """Every publication makes the round trip through Redis (``deliver_local=False``), and in the
    default local-first mode this process's subscribers are served directly."""

    bus_backends: ClassVar[Mapping[str, Callable[[], BusBackend]]] = {
        "redis": redis_factory(deliver_local=False),
        "redis_local_first": redis_factory(),
    }


class TestRedisEventsContract(EventsContract):
    """Envelope discipline on Redis, and parity: local and Redis deliver the same records."""

    bus_backends: ClassVar[Mapping[str, Callable[[], BusBackend]]] = {
        "redis": redis_factory(deliver_local=False)
    }


def delta(seq: int) -> Event:
    return Event.new("delta", Delta(run_id="r1", seq=seq, text="x"), {"run_id": "r1"})


@pytest.fixture
def shared_prefix() -> str:
    return prefix()


@pytest.fixture
def buses(shared_prefix: str) -> Iterator[tuple[Bus, Bus]]:
    a = Bus(backend=connected(REDIS_URL, prefix=shared_prefix), validation=PayloadValidation.RAISE)
    b = Bus(backend=connected(REDIS_URL, prefix=shared_prefix), validation=PayloadValidation.RAISE)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def test_a_publication_reaches_subscribers_of_every_bus_once(buses: tuple[Bus, Bus]) -> None:
    a, b = buses
    on_a, on_b = Delivery(bind_current_task=False), Delivery(bind_current_task=False)
    a.subscribe("run:r1", delivery=on_a)
    b.subscribe("run:r1", delivery=on_b)
    for seq in range(20):
        a.broadcast("run:r1", delta(seq))
    settle(a)
    settle(b)
    assert [e.payload.seq for e in drain(on_a)] == list(range(20))  # once: not again via Redis
    assert [e.payload.seq for e in drain(on_b)] == list(range(20))
    assert a.backend.statistics()["sent"] == 20  # type: ignore[attr-defined]  # RedisBackend


def test_another_prefix_is_another_deployment(buses: tuple[Bus, Bus]) -> None:
    a, _ = buses
    other = Bus(backend=connected(REDIS_URL, prefix=prefix()))
    try:
        handle = Delivery(bind_current_task=False)
        other.subscribe("run:r1", delivery=handle)
        a.broadcast("run:r1", delta(0))
        settle(a)
        settle(other)
        assert drain(handle) == []
    finally:
        other.close()


def test_a_slow_consumer_in_one_process_slows_no_one_else(buses: tuple[Bus, Bus]) -> None:
    a, b = buses
    publisher_side = Delivery(bind_current_task=False)
    slow = Delivery(max_entries=4, bind_current_task=False)
    healthy = Delivery(bind_current_task=False)
    a.subscribe("run:r1", delivery=publisher_side)
    b.subscribe("run:r1", delivery=slow)
    b.subscribe("run:r1", delivery=healthy)
    for seq in range(100):
        a.broadcast("run:r1", delta(seq))
    settle(a)
    settle(b)
    slow_items = drain(slow)
    assert len(slow_items) == 5
    assert isinstance(slow_items[-1], Overflow)
    assert slow_items[-1].reason is OverflowReason.ENTRIES
    assert len(drain(healthy)) == 100
    assert len(drain(publisher_side)) == 100


def test_an_unreachable_server_is_one_clear_error() -> None:
    with TcpProxy("127.0.0.1", 6379) as proxy:
        proxy.cut()
        backend = RedisBackend(f"redis://:hunter2@127.0.0.1:{proxy.port}/0", prefix=prefix())
        with pytest.raises(BusBackendUnavailableError, match="Redis bus redis://:\\*\\*\\*@") as e:
            backend.connect(1.0)
        assert "hunter2" not in str(e.value)


async def next_item(handle: Delivery) -> Any:
    # The timeout only guards the test from hanging; the wait itself is on the delivery.
    return await asyncio.wait_for(handle.get(), 10)


async def test_an_outage_is_reported_publishers_go_on_and_subscribers_resync() -> None:
    shared = prefix()
    with TcpProxy("127.0.0.1", 6379) as proxy:
        url = f"redis://127.0.0.1:{proxy.port}/0"
        a = Bus(backend=connected(url, prefix=shared, reconnect_max_s=0.05))
        b = Bus(backend=connected(REDIS_URL, prefix=shared))
        try:
            system = Delivery()
            a.subscribe("system", delivery=system)
            events = Delivery()
            a.subscribe("run:r1", delivery=events)
            remote = Delivery(bind_current_task=False)
            b.subscribe("run:r1", delivery=remote)

            proxy.cut()
            down = await next_item(system)
            assert down.type == "bus_backend_changed"
            assert down.payload == BusBackendChanged(
                backend="redis", running=False, resync=False, reason=down.payload.reason
            )
            assert not a.running()
            # Publishing during the outage never waits: local subscribers get it, the other
            # process cannot, and the loss is counted.
            a.broadcast("run:r1", delta(1))
            assert (await next_item(events)).payload.seq == 1
            assert a.backend.statistics()["dropped"] >= 1  # type: ignore[attr-defined]

            proxy.restore()
            up = await next_item(system)
            assert up.payload.running is True
            assert up.payload.resync is True
            assert a.running()
            marker = await next_item(events)
            assert isinstance(marker, Overflow)
            assert marker.reason is OverflowReason.RESYNC
            assert isinstance(await next_item(system), Overflow)  # every handle resyncs

            # The other process hears that this one lost publications and resyncs too.
            a.broadcast("run:r1", delta(2))
            settle(a)
            settle(b)
            assert [type(x).__name__ for x in drain(remote)] == ["Overflow"]

            # Recovery: a replaced handle receives across processes again.
            fresh = events.replace()
            assert fresh.topics() == ("run:r1",)
            remote_fresh = remote.replace()
            a.broadcast("run:r1", delta(3))
            settle(a)
            settle(b)
            assert (await next_item(fresh)).payload.seq == 3
            assert [e.payload.seq for e in drain(remote_fresh)] == [3]
        finally:
            a.close()
            b.close()


async def test_a_gap_in_another_process_sequence_resyncs_the_subscribers(
    buses: tuple[Bus, Bus], shared_prefix: str
) -> None:
    _, b = buses
    handle = Delivery(bind_current_task=False)
    b.subscribe("run:r1", delivery=handle)
    client = redis.Redis.from_url(REDIS_URL)
    try:
        channel = f"{shared_prefix}:bus:run:r1"
        for seq in (1, 2, 4):  # the wire format of another process that lost number 3
            frame = msgspec.Raw(encode_frame(delta(seq)))
            client.publish(channel, msgspec.json.encode(["other-origin", seq, 0, frame]))
    finally:
        client.close()
    settle(b)
    items = drain(handle)
    assert [e.payload.seq for e in items[:2]] == [1, 2]
    assert isinstance(items[2], Overflow)
    assert items[2].reason is OverflowReason.RESYNC
    assert b.backend.statistics()["gaps"] == 1  # type: ignore[attr-defined]
