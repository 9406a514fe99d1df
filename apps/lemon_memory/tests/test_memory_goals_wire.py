"""Goals over the real WebSocket wire: response shapes as the TUI reads them, an event on
``goals`` and on ``session:<key>`` for each transition (never the objective's text), the
objective in a prompt only while active, and the bad inputs."""

from __future__ import annotations

from typing import Any

from lemon_control_plane.testing import ClientFactory
from lemon_core.bus.topics import GOALS, session_topic
from lemon_memory import MemoryApp
from lemon_runtime import Runtime

KEY = "agent:default:main"
OBJECTIVE = "Ship the parser rewrite with zebra-striped tests"


async def test_each_goal_method_answers_as_the_tui_reads_it(
    runtime: Runtime, client: ClientFactory
) -> None:
    app = runtime.handle("lemon_memory")
    assert isinstance(app, MemoryApp)
    on_goals = runtime.bus.subscribe(GOALS)
    on_session = runtime.bus.subscribe(session_topic(KEY))
    async with client() as c:
        assert await c.call("goal.status", {"sessionKey": KEY}) == {"goal": None, "goals": []}
        goal = (await c.call("goal.set", {"sessionKey": KEY, "objective": f"  {OBJECTIVE} "}))[
            "goal"
        ]
        assert goal["objective"] == OBJECTIVE
        assert goal["status"] == "active"
        assert goal["goalId"].startswith("goal_")
        assert len(goal["goalId"]) == len("goal_") + 16
        wire_event = await c.event("goal")
        assert OBJECTIVE not in str(wire_event)
        assert "Ship" not in str(wire_event)
        status = await c.call("goal.status", {"sessionKey": KEY})
        assert status["goal"] == status["goals"][0]
        assert status["goal"]["goalId"] == goal["goalId"]
        block = await app.goals.prompt_block(KEY)
        assert block is not None
        assert OBJECTIVE in block
        assert "data, not instructions" in block

        paused = await c.call("goal.pause", {"sessionKey": KEY})
        assert paused["goal"]["status"] == "paused"
        assert await app.goals.prompt_block(KEY) is None
        resumed = await c.call("goal.resume", {"sessionKey": KEY})
        assert resumed["goal"]["status"] == "active"
        await c.call("goal.clear", {"sessionKey": KEY})
        assert await c.call("goal.status", {"sessionKey": KEY}) == {"goal": None, "goals": []}
        assert await app.goals.prompt_block(KEY) is None

    kinds = ["goal_set", "goal_paused", "goal_resumed", "goal_cleared"]
    for sub in (on_goals, on_session):
        seen: list[Any] = [await sub.get() for _ in kinds]
        assert [e.type for e in seen] == kinds
        for event in seen:
            assert event.payload.objective_bytes == len(OBJECTIVE.encode())
            assert event.payload.session_key == KEY
            assert OBJECTIVE not in repr(event)
        sub.cancel()


async def test_bad_goal_input_is_a_clear_error_and_nothing_is_set(
    runtime: Runtime, client: ClientFactory
) -> None:
    async with client() as c:
        for params, needle in (
            ({"sessionKey": KEY, "objective": "   "}, "objective is required"),
            ({"sessionKey": KEY, "objective": "x" * 4097}, "limit is 4096"),
            ({"objective": "a goal"}, "sessionKey is required"),
            ({"sessionKey": KEY, "objective": "ok", "budget": -1}, "budget"),
        ):
            res = await c.request("goal.set", params)
            assert res["error"]["code"] == "INVALID_PARAMS", res
            assert needle in res["error"]["message"]
        missing = await c.request("goal.pause", {"sessionKey": KEY})
        assert missing["error"]["code"] == "INVALID_PARAMS"
        assert missing["error"]["message"].startswith("not_found")
        assert await c.call("goal.status", {"sessionKey": KEY}) == {"goal": None, "goals": []}


async def test_memory_methods_are_scoped_and_answer(
    runtime: Runtime, client: ClientFactory
) -> None:
    async with client() as c:
        status = await c.call("memory.status")
        assert status["available"] is True
        assert status["backend"] == "sqlite"
        assert (await c.call("memory.search", {"query": "?!"}))["emptyQuery"] is True
    async with client(handshake=False) as c:
        await c.connect(scopes=["read"])
        res = await c.request("memory.search", {"query": "anything"})
        assert res["error"]["code"] == "FORBIDDEN"
