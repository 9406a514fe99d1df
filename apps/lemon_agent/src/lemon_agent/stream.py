"""The bounded event stream between a run and its one consumer.

Capacity is a number of events (default 1024). What happens when it is full is the
:class:`OverflowPolicy`:

``BLOCK`` (default)
    The run waits until the consumer makes room. Nothing is lost; a slow consumer slows the run,
    and through it the model stream (TCP backpressure to the provider).
``DROP_UPDATES``
    Delta events (``message_update``, ``tool_execution_update``) that find the stream full are
    dropped and counted in ``statistics().dropped``; every other event still waits for room. No
    message is lost, because ``message_end`` carries each message whole.

Publishing to a consumer that is waiting yields to it once, so the first event of a burst is
delivered without waiting for the producer to work through the rest of the burst.

When the run ends the stream is closed: the consumer drains what is queued and iteration stops.
One consumer per stream; iterating it twice raises ``AgentUsageError``.
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from dataclasses import dataclass

from lemon_agent.errors import AgentUsageError
from lemon_agent.events import AgentEvent, MessageUpdateEvent, ToolExecutionUpdateEvent

__all__ = ["EventStream", "EventStreamStatistics", "OverflowPolicy"]


class OverflowPolicy(enum.StrEnum):
    """What a full event stream does (see the module docstring)."""

    BLOCK = "block"
    DROP_UPDATES = "drop_updates"


@dataclass(frozen=True, kw_only=True, slots=True)
class EventStreamStatistics:
    capacity: int
    policy: OverflowPolicy
    queued: int
    high_water: int
    published: int
    delivered: int
    dropped: int
    producer_waits: int
    closed: bool


class EventStream:
    """A bounded single-consumer async queue of agent events (see the module docstring)."""

    def __init__(
        self, *, capacity: int = 1024, policy: OverflowPolicy = OverflowPolicy.BLOCK
    ) -> None:
        if capacity < 1:
            raise AgentUsageError(f"event stream capacity must be >= 1, got {capacity}")
        self._capacity = capacity
        self._policy = policy
        self._items: deque[AgentEvent] = deque()
        self._closed = False
        self._consumer: asyncio.Future[None] | None = None
        self._producers: deque[asyncio.Future[None]] = deque()
        self._iterating = False
        self._high_water = 0
        self._published = 0
        self._delivered = 0
        self._dropped = 0
        self._waits = 0

    async def publish(self, event: AgentEvent) -> None:
        """Queue ``event``, applying the overflow policy; a closed stream ignores it."""
        while len(self._items) >= self._capacity and not self._closed:
            if self._policy is OverflowPolicy.DROP_UPDATES and isinstance(
                event, MessageUpdateEvent | ToolExecutionUpdateEvent
            ):
                self._dropped += 1
                return
            self._waits += 1
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._producers.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._producers:
                    self._producers.remove(waiter)
        if self._closed:
            self._dropped += 1
            return
        self._items.append(event)
        self._published += 1
        if len(self._items) > self._high_water:
            self._high_water = len(self._items)
        consumer = self._consumer
        if consumer is not None and not consumer.done():
            consumer.set_result(None)
            # Let the waiting consumer run now: otherwise a producer working through a burst
            # (a whole network read of deltas) would deliver the first one only after the last.
            await asyncio.sleep(0)

    def close(self) -> None:
        """No more events; the consumer drains the queue and stops. Waiting producers return."""
        self._closed = True
        consumer = self._consumer
        if consumer is not None and not consumer.done():
            consumer.set_result(None)
        for waiter in self._producers:
            if not waiter.done():
                waiter.set_result(None)

    @property
    def closed(self) -> bool:
        return self._closed

    def __aiter__(self) -> EventStream:
        if self._iterating:
            raise AgentUsageError("an agent event stream has one consumer; it is already iterated")
        self._iterating = True
        return self

    async def __anext__(self) -> AgentEvent:
        while not self._items:
            if self._closed:
                raise StopAsyncIteration
            self._consumer = asyncio.get_running_loop().create_future()
            try:
                await self._consumer
            finally:
                self._consumer = None
        event = self._items.popleft()
        self._delivered += 1
        while self._producers:
            waiter = self._producers.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break
        return event

    def statistics(self) -> EventStreamStatistics:
        """A snapshot of the stream's counters."""
        return EventStreamStatistics(
            capacity=self._capacity,
            policy=self._policy,
            queued=len(self._items),
            high_water=self._high_water,
            published=self._published,
            delivered=self._delivered,
            dropped=self._dropped,
            producer_waits=self._waits,
            closed=self._closed,
        )
