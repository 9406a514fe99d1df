"""How a run waits for its next event: a cancel cuts the wait short, nothing is lost or doubled.

The run process waits in its own task (no helper task per event) inside a timeout scope that a
cancel expires. These tests pin what the earlier per-event tasks guaranteed, on a real Bus with
the scriptable runtime, ordered by the event loop alone (no sleeps): every wait below is bounded
by ``asyncio.timeout`` so a lost wake fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from lemon_core.bus import Bus, Delivery, session_topic
from lemon_core.events import ErrorCode, Event
from lemon_core.execution import ENGINE_RUNTIME, RunRequest, RuntimeContext
from lemon_platform_test import ManualClock
from lemon_router import Router, RouterConfig
from lemon_router.testing import FakeEngineRuntime

SESSION = "agent:default:main"
#: No watchdog and no liveness probe: a parked run has no deadline of its own.
NO_DEADLINES = RouterConfig(idle_timeout_ms=None, liveness_interval_ms=None)
BOUND_S = 10  # a bound on every wait of the test, never reached when the code is right


@pytest.fixture
async def bus() -> AsyncIterator[Bus]:
    async with Bus(validation="raise") as b:
        yield b


class Reader:
    """Reads ``session:<key>`` through a real subscription of ``max_entries``."""

    def __init__(self, bus: Bus, *, max_entries: int = 10_000) -> None:
        self.delivery = Delivery(max_entries=max_entries)
        bus.subscribe(session_topic(SESSION), delivery=self.delivery)
        self.items: list[Any] = []

    async def until(self, type_: str, **match: Any) -> Event:
        async with asyncio.timeout(BOUND_S):
            for item in self.items:
                if _matches(item, type_, match):
                    return item  # type: ignore[no-any-return]  # _matches checked it
            while True:
                item = await self.delivery.get()
                self.items.append(item)
                if _matches(item, type_, match):
                    return item  # type: ignore[no-any-return]  # _matches checked it

    def events(self, type_: str) -> list[Event]:
        return [i for i in self.items if isinstance(i, Event) and i.type == type_]


def _matches(item: Any, type_: str, match: dict[str, Any]) -> bool:
    if not isinstance(item, Event) or item.type != type_:
        return False
    payload = item.payload
    return all(item.meta.get(k) == v or getattr(payload, k, None) == v for k, v in match.items())


def runtime(bus: Bus) -> tuple[RuntimeContext, FakeEngineRuntime]:
    context = RuntimeContext()
    engine = FakeEngineRuntime(bus)
    context.capabilities.register(ENGINE_RUNTIME, engine)
    return context, engine


def request(prompt: str) -> RunRequest:
    return RunRequest(origin="control_plane", session_key=SESSION, prompt=prompt)


async def _parked(router: Router, engine: FakeEngineRuntime, reader: Reader) -> str:
    """Submit a run, start it and return once its process waits for the next event: the
    ``streaming`` phase is published in the same step that goes back to waiting."""
    receipt = await router.submit(request("x"))
    async with asyncio.timeout(BOUND_S):
        command = await engine.next_command()
    engine.started(command.run_id)
    await reader.until("run_phase_changed", run_id=receipt.run_id, phase="streaming")
    return receipt.run_id


async def test_a_cancel_while_the_engine_is_silent_ends_the_run_promptly(bus: Bus) -> None:
    # The engine neither answers the cancel nor sends anything: only the cancel itself can
    # end the wait (there is no deadline), and with no grace the run ends at once.
    context, engine = runtime(bus)
    engine.complete_on_cancel = False
    reader = Reader(bus)
    config = RouterConfig(idle_timeout_ms=None, liveness_interval_ms=None, cancel_grace_ms=0)
    async with Router(bus=bus, context=context, config=config) as router:
        run_id = await _parked(router, engine, reader)
        assert router.abort_run(run_id, reason="user_requested")
        done = await reader.until("run_completed", run_id=run_id)
        assert done.payload.completed.synthetic is True
        assert done.payload.completed.error_code is ErrorCode.CANCELLED
        await reader.until("run_phase_changed", run_id=run_id, phase="aborted")
        assert engine.cancelled[0] == (run_id, "user_requested")
        assert len(reader.events("run_completed")) == 1


async def test_a_cancel_wakes_a_wait_timed_on_another_clock(bus: Bus) -> None:
    # A test clock keeps its own sleep as the timer: the cancel wakes the open-ended wait,
    # the run then waits its cancel grace on that clock and ends with one completion.
    context, engine = runtime(bus)
    engine.complete_on_cancel = False
    clock = ManualClock()
    reader = Reader(bus)
    config = RouterConfig(idle_timeout_ms=None, liveness_interval_ms=None, cancel_grace_ms=5_000)
    async with Router(bus=bus, context=context, config=config, clock=clock) as router:
        run_id = await _parked(router, engine, reader)
        assert clock.sleeps == []
        assert router.abort_run(run_id)
        done = await reader.until("run_completed", run_id=run_id)
        assert done.payload.completed.error_code is ErrorCode.CANCELLED
        assert done.payload.completed.synthetic is True
        assert 5_000 in clock.sleeps
        assert len(reader.events("run_completed")) == 1


@pytest.mark.parametrize("order", ["cancel_then_event", "event_then_cancel"])
async def test_an_event_arriving_with_a_cancel_is_forwarded_exactly_once(
    bus: Bus, order: str
) -> None:
    # Both happen in one step while the run waits: the event wakes the wait and the cancel
    # expires it, in either order. The event is neither lost nor forwarded twice, and the
    # engine's completion (after the cancel) is the run's one completion.
    context, engine = runtime(bus)
    engine.complete_on_cancel = False
    reader = Reader(bus)
    async with Router(bus=bus, context=context, config=NO_DEADLINES) as router:
        run_id = await _parked(router, engine, reader)
        if order == "cancel_then_event":
            assert router.abort_run(run_id)
            engine.delta(run_id, "late")
        else:
            engine.delta(run_id, "late")
            assert router.abort_run(run_id)
        await reader.until("delta", run_id=run_id)
        engine.complete(run_id, ok=False, answer="", error="cancelled: user_requested")
        done = await reader.until("run_completed", run_id=run_id)
        assert done.payload.completed.synthetic is False
        await reader.until("run_phase_changed", run_id=run_id, phase="aborted")
        assert [e.payload.text for e in reader.events("delta")] == ["late"]
        assert len(reader.events("run_completed")) == 1


async def test_a_router_stop_racing_a_cancel_still_ends_the_run_once(bus: Bus) -> None:
    # The cancel has expired the wait's scope and the router's stop cancels the task in the
    # same step: the stop wins (it is not mistaken for the cancel's own expiry), the run
    # process still publishes one completion and the router stops.
    context, engine = runtime(bus)
    engine.complete_on_cancel = False
    reader = Reader(bus)
    router = Router(bus=bus, context=context, config=NO_DEADLINES)
    async with router:
        run_id = await _parked(router, engine, reader)
        assert router.abort_run(run_id)
    done = await reader.until("run_completed", run_id=run_id)
    assert done.payload.completed.synthetic is True
    assert done.payload.completed.error == "aborted: the router stopped"
    assert len(reader.events("run_completed")) == 1
    assert not router.running()


async def test_a_backlog_is_forwarded_in_slices_a_small_subscriber_keeps_up_with(
    bus: Bus,
) -> None:
    # 200 events queue at once; the run forwards them without waiting in between, but yields
    # to the loop every few: a session subscriber holding 32 entries drains between slices
    # and never overflows (as when the run yielded after every event).
    context, engine = runtime(bus)
    reader = Reader(bus, max_entries=32)
    async with Router(bus=bus, context=context, config=NO_DEADLINES) as router:
        run_id = await _parked(router, engine, reader)
        for n in range(200):
            engine.delta(run_id, f"d{n}")
        engine.complete(run_id, answer="all")
        done = await reader.until("run_completed", run_id=run_id)
        assert done.payload.completed.answer == "all"
        assert all(isinstance(item, Event) for item in reader.items), "the subscriber overflowed"
        assert [e.payload.text for e in reader.events("delta")] == [f"d{n}" for n in range(200)]
