"""BusAllSessionsStream: one delivery over many session topics, each event under its own
session; a session let go (over ``max_sessions``) is followed again once it is added again."""

from __future__ import annotations

import asyncio

from lemon_core.bus import Bus, session_topic
from lemon_core.events import Event, RunPhase, RunPhaseChanged
from lemon_core.sessions import BusAllSessionsStream, RunPhaseNotice


def _phase(bus: Bus, session_key: str, run_id: str) -> None:
    payload = RunPhaseChanged.build(
        run_id=run_id, session_key=session_key, phase=RunPhase.ACCEPTED, source="router"
    )
    event = bus.broadcast_event(
        f"run:{run_id}",
        "run_phase_changed",
        payload,
        {"run_id": run_id, "session_key": session_key},
    )
    bus.broadcast(session_topic(session_key), event)


async def _next(stream: BusAllSessionsStream) -> RunPhaseNotice:
    item = await asyncio.wait_for(stream.get(), 5)
    assert isinstance(item, RunPhaseNotice), item
    return item


async def test_the_least_recently_added_session_is_let_go_and_followed_again_when_added() -> None:
    async with Bus(validation="raise") as bus:
        stream = BusAllSessionsStream(bus, max_sessions=2)
        for key in ("agent:a:main", "agent:b:main", "agent:c:main"):
            stream.add(key)
        assert stream.sessions == ("agent:b:main", "agent:c:main")
        _phase(bus, "agent:a:main", "r-a1")  # let go: not seen
        _phase(bus, "agent:c:main", "r-c1")
        assert (await _next(stream)).session_key == "agent:c:main"
        stream.add("agent:a:main")  # it changes again: followed again (b is let go)
        assert stream.sessions == ("agent:c:main", "agent:a:main")
        _phase(bus, "agent:b:main", "r-b1")
        _phase(bus, "agent:a:main", "r-a2")
        seen = await _next(stream)
        assert (seen.session_key, seen.run_id) == ("agent:a:main", "r-a2")
        stream.close()
        assert bus.topics() == ()


async def test_an_event_without_a_session_in_its_meta_is_filed_by_its_run() -> None:
    async with Bus(validation="raise") as bus:
        stream = BusAllSessionsStream(bus)
        stream.add("agent:a:main")
        _phase(bus, "agent:a:main", "r1")
        assert (await _next(stream)).session_key == "agent:a:main"
        # A raw event naming only its run (no session in meta or payload).
        bus.broadcast(
            session_topic("agent:a:main"),
            Event.new(
                "run_phase_changed",
                RunPhaseChanged.build(run_id="r1", phase=RunPhase.STREAMING, source="router"),
                {"run_id": "r1"},
            ),
        )
        later = await _next(stream)
        assert (later.session_key, later.phase) == ("agent:a:main", RunPhase.STREAMING)
        stream.close()
