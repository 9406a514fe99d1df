"""The backend interface admits a networked backend: a broker shared by several buses (what a
Redis backend would do across processes) carries publications between them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from lemon_core import Bus, Delivery, Event
from lemon_core.bus import BusBackend


class Broker:
    """Stands in for a pub/sub server: topic -> the fan-outs of the buses subscribed to it."""

    def __init__(self) -> None:
        self.routes: dict[str, list[Callable[[str, Any], int]]] = {}
        self.published = 0


class BrokerBackend:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._fanout: Callable[[str, Any], int] | None = None
        self._closed = False

    @property
    def name(self) -> str:
        return "broker"

    def open(self, fanout: Callable[[str, Any], int]) -> None:
        self._fanout = fanout

    def publish(self, topic: str, item: Any) -> None:
        self._broker.published += 1
        for fanout in list(self._broker.routes.get(topic, ())):
            fanout(topic, item)

    def topic_added(self, topic: str) -> None:
        assert self._fanout is not None
        self._broker.routes.setdefault(topic, []).append(self._fanout)

    def topic_removed(self, topic: str) -> None:
        assert self._fanout is not None
        self._broker.routes[topic].remove(self._fanout)

    def running(self) -> bool:
        return self._fanout is not None and not self._closed

    def close(self) -> None:
        self._closed = True


def drain(handle: Delivery) -> list[Any]:
    items = []
    while True:
        try:
            items.append(handle.get_nowait())
        except asyncio.QueueEmpty:
            return items


async def test_a_shared_broker_carries_publications_between_buses() -> None:
    broker = Broker()
    backend_a: BusBackend = BrokerBackend(broker)
    publisher = Bus(backend=backend_a)
    subscriber = Bus(backend=BrokerBackend(broker))
    handle = Delivery()
    subscriber.subscribe("run:r1", delivery=handle)
    assert list(broker.routes) == ["run:r1"]

    event = Event.new("custom", {"n": 1})
    publisher.broadcast("run:r1", event)
    assert drain(handle) == [event]
    assert publisher.statistics().backend == "broker"

    handle.close()
    assert broker.routes["run:r1"] == []  # the last local subscription told the backend
    publisher.broadcast("run:r1", event)
    assert broker.published == 2


async def test_running_follows_the_backend() -> None:
    backend = BrokerBackend(Broker())
    bus = Bus(backend=backend)
    assert bus.running()
    backend.close()
    assert not bus.running()
