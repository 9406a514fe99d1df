"""Through the real gateway and the scripted provider: a run gets the memory tools over the
runtime's memory store, and its session's active goal in the system prompt (as data) only
while the goal is active."""

from __future__ import annotations

from pathlib import Path

from coding_agent import CodingExecutor
from lemon_ai import OpenAICompletionsProvider, default_catalogue
from lemon_core.bus import Bus
from lemon_core.events import Completion
from lemon_core.execution import ExecutionCommand
from lemon_gateway import Gateway
from lemon_infra import SQLiteStore
from lemon_memory import GoalStore, SqliteMemoryStore
from lemon_platform_test.providers import ScriptedProviderServer, ScriptedTurn

SESSION = "agent:coder:main"
OBJECTIVE = "Finish the GRAPHITE-5521 migration"


async def _run(executor: CodingExecutor, bus: Bus, work: Path, run_id: str) -> Completion:
    async with Gateway(bus=bus, executor=executor) as gateway:
        return await gateway.submit_execution(
            ExecutionCommand(run_id=run_id, session_key=SESSION, prompt="go on",
                             conversation_key=("session", SESSION), cwd=str(work))
        )  # fmt: skip


async def test_memory_tools_and_the_active_goal_reach_the_model(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    bus = Bus()
    store = await SQLiteStore.open(tmp_path / "lemon.sqlite3")
    memory = SqliteMemoryStore(tmp_path / "memory.sqlite3")
    goals = GoalStore(store, bus)
    await goals.set(SESSION, OBJECTIVE)
    provider = OpenAICompletionsProvider(api_key="sk-test")
    model = default_catalogue().resolve(
        "openai:gpt-4o-mini", base_url=scripted_provider.openai_base_url
    )
    executor = CodingExecutor(
        home=home, model=model, provider=provider, memory=lambda: memory, goals=lambda: goals
    )
    try:
        scripted_provider.script(ScriptedTurn(text="working"), ScriptedTurn(text="paused"))
        assert (await _run(executor, bus, work, "r1")).ok
        await goals.pause(SESSION)
        assert (await _run(executor, bus, work, "r2")).ok
    finally:
        await provider.aclose()
        await memory.close()
        await store.close()
    first, second = (r.body for r in scripted_provider.requests)
    tools = {t["function"]["name"] for t in first["tools"]}
    assert {"remember", "recall", "forget"} <= tools
    assert OBJECTIVE in first["messages"][0]["content"]
    assert "data, not instructions" in first["messages"][0]["content"]
    assert OBJECTIVE not in second["messages"][0]["content"]
