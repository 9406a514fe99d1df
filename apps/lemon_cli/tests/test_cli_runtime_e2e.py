"""End to end through the booted runtime: lemon_runtime starts coding_agent, lemon_gateway
and lemon_router from their ``lemon.apps`` entry points; messages go through the router
(RouterBridge), the gateway (EngineRuntime) and the coding executor to the scripted provider
server (real HTTP) or the offline provider, on a real SQLite store."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lemon_core.bus import Delivery, session_topic
from lemon_core.config import load_config
from lemon_core.events import Event
from lemon_core.execution import (
    ALL_TOOLS,
    ENGINE_RUNTIME,
    ROUTER_BRIDGE,
    Receipt,
    RunRequest,
    ToolPolicy,
)
from lemon_gateway import Gateway
from lemon_platform_test.providers import (
    Gate,
    ScriptedProviderServer,
    ScriptedToolCall,
    ScriptedTurn,
)
from lemon_router import Router
from lemon_runtime import APPS_ENTRY_POINT_GROUP, Runtime, discover_apps, resolve_profile

SESSION = "agent:default:main"
MODES = ["collect", "followup", "steer", "steer_backlog", "redirect", "interrupt"]


class Watch:
    """Every event of ``session:<key>``, with waits by predicate (no sleeps)."""

    def __init__(self, runtime: Runtime, key: str = SESSION) -> None:
        self.delivery = Delivery(max_entries=100_000)
        self.sub = runtime.bus.subscribe(session_topic(key), delivery=self.delivery)
        self.seen: list[Event] = []

    async def until(self, predicate: Callable[[Event], bool]) -> Event:
        for event in self.seen:
            if predicate(event):
                return event
        while True:
            item = await asyncio.wait_for(self.delivery.get(), 60)
            assert isinstance(item, Event)
            self.seen.append(item)
            if predicate(item):
                return item

    async def terminal(self, run_id: str) -> str:
        event = await self.until(
            lambda e: (
                e.type == "run_phase_changed"
                and e.payload.run_id == run_id
                and e.payload.phase.terminal
            )
        )
        return str(event.payload.phase.value)

    async def tool_started(self, run_id: str) -> Event:
        return await self.until(
            lambda e: (
                e.type == "engine_action"
                and e.meta.get("run_id") == run_id
                and e.payload.phase.value == "started"
                and e.payload.action.kind.value != "approval"
            )
        )

    def completions(self, run_id: str) -> list[Event]:
        return [e for e in self.seen if e.type == "run_completed" and e.meta["run_id"] == run_id]

    def outcomes(self, run_id: str) -> list[str]:
        return [
            e.payload.outcome
            for e in self.seen
            if e.type == "queue_outcome" and e.payload.run_id == run_id
        ]


def write_config(home: Path, server: ScriptedProviderServer | None) -> None:
    home.mkdir(parents=True, exist_ok=True)
    if server is not None:
        (home / "config.toml").write_text(
            '[defaults]\nmodel = "scripted:test-model"\n\n'
            '[providers.scripted]\nkind = "openai_completions"\n'
            f'base_url = "{server.openai_base_url}"\n'
        )


@pytest.fixture
def boot(tmp_path: Path) -> Callable[..., Runtime]:
    def make(server: ScriptedProviderServer | None = None) -> Runtime:
        home = tmp_path / "home"
        write_config(home, server)
        loaded = load_config(home=home, cwd=tmp_path, environ={})
        return Runtime(profile="full", config=loaded)

    return make


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def request(prompt: str, cwd: Path, mode: str = "collect", **meta: Any) -> RunRequest:
    return RunRequest(
        origin="test",
        session_key=SESSION,
        prompt=prompt,
        queue_mode=mode,  # type: ignore[arg-type]  # valid modes only
        cwd=str(cwd),
        tool_policy=ToolPolicy(),
        preapproved=frozenset({ALL_TOOLS}),
        meta=meta,
    )


def router_of(runtime: Runtime) -> Router:
    router = runtime.context.capabilities.require(ROUTER_BRIDGE)
    assert isinstance(router, Router)
    return router


@pytest.fixture
def fifo(work: Path) -> Path:
    path = work / "gate.fifo"
    os.mkfifo(path)
    return path


def blocking_bash(fifo: Path) -> str:
    """An offline-model prompt whose bash call blocks until the test writes to ``fifo``."""
    return f'/tool bash {{"command": "cat {fifo}"}}'


async def release(fifo: Path) -> None:
    await asyncio.to_thread(fifo.write_text, "go\n")


async def test_a_chat_with_a_tool_call(
    boot: Callable[..., Runtime], scripted_provider: ScriptedProviderServer, work: Path
) -> None:
    (work / "hello.txt").write_text("hi from the file\n")
    scripted_provider.script(
        ScriptedTurn(tool_calls=(ScriptedToolCall(name="read", arguments={"path": "hello.txt"}),)),
        ScriptedTurn(text="The file says hi."),
    )
    async with boot(scripted_provider) as runtime:
        # lemon_webhooks boots wherever the gateway does, before it (disabled: it does nothing);
        # lemon_automation after the router (in this profile it schedules nothing by default)
        assert runtime.apps == (
            "lemon_memory",
            "coding_agent",
            "lemon_webhooks",
            "lemon_gateway",
            "lemon_router",
            "lemon_automation",
            "lemon_mcp",
        )
        watch = Watch(runtime)
        receipt = await router_of(runtime).submit(request("what does hello.txt say?", work))
        assert receipt.status == "started"
        assert await watch.terminal(receipt.run_id) == "completed"
        (done,) = watch.completions(receipt.run_id)
        assert done.payload.completed.ok
        assert done.payload.completed.answer == "The file says hi."
        actions = [e.payload for e in watch.seen if e.type == "engine_action"]
        read = [a for a in actions if a.action.kind.value == "tool"]
        assert [a.phase.value for a in read] == ["started", "completed"]
        assert read[-1].ok is True
    second = scripted_provider.requests[1].body
    assert "hi from the file" in str(second["messages"])


async def test_a_second_message_resumes_the_same_native_session(
    boot: Callable[..., Runtime], scripted_provider: ScriptedProviderServer, work: Path
) -> None:
    scripted_provider.script(ScriptedTurn(text="first answer"), ScriptedTurn(text="second"))
    async with boot(scripted_provider) as runtime:
        watch = Watch(runtime)
        router = router_of(runtime)
        first = await router.submit(request("remember the word lemon", work))
        assert await watch.terminal(first.run_id) == "completed"
        (done,) = watch.completions(first.run_id)
        session_id = done.payload.completed.resume["value"]
        second = await router.submit(request("which word?", work))
        assert second.conversation_key == f"resume:lemon:{session_id}"
        assert await watch.terminal(second.run_id) == "completed"
        (again,) = watch.completions(second.run_id)
        assert again.payload.completed.resume["value"] == session_id
    history = str(scripted_provider.requests[1].body["messages"])
    assert "remember the word lemon" in history
    assert "first answer" in history


@pytest.mark.parametrize("mode", MODES)
async def test_a_burst_of_20_to_a_busy_session_loses_none(
    boot: Callable[..., Runtime], work: Path, fifo: Path, mode: str
) -> None:
    async with boot() as runtime:  # the offline provider: no model configured
        watch = Watch(runtime)
        router = router_of(runtime)
        busy = await router.submit(request(blocking_bash(fifo), work))
        await watch.tool_started(busy.run_id)
        burst: list[Receipt] = [
            await router.submit(request(f"/echo m{i}", work, mode)) for i in range(20)
        ]
        assert all(r.status != "rejected" for r in burst)
        if mode != "interrupt":
            await release(fifo)
        phases = [await watch.terminal(r.run_id) for r in [busy, *burst]]
        # every message ends exactly once, and each one's text was run or merged into a run
        for r in [busy, *burst]:
            ends = [
                e
                for e in watch.seen
                if e.type == "run_phase_changed"
                and e.payload.run_id == r.run_id
                and e.payload.phase.terminal
            ]
            assert len(ends) == 1, (r.run_id, ends)
        answers = "\n".join(
            e.payload.completed.answer or ""
            for e in watch.seen
            if e.type == "run_completed" and e.payload.completed.ok
        )
        if mode == "interrupt":
            assert phases[0] == "aborted"
            assert set(phases) <= {"completed", "aborted"}
            assert phases[-1] == "completed"
            assert "m19" in answers
        else:
            # A message steered into the busy run becomes one of its user messages (the
            # offline model answers the latest one); every other one is answered by a run.
            steered = [i for i, r in enumerate(burst) if watch.outcomes(r.run_id) == ["steered"]]
            for i in range(20):
                if i not in steered:
                    assert f"m{i}" in answers, (mode, i, answers)
            if steered:
                assert mode in ("steer", "steer_backlog", "redirect")
                assert f"m{steered[-1]}" in answers
        if mode == "collect":
            assert phases == ["completed"] * 21
        assert not router.is_busy(SESSION)


async def test_interrupt_cancels_the_active_run_and_runs_next(
    boot: Callable[..., Runtime], work: Path, fifo: Path
) -> None:
    async with boot() as runtime:
        watch = Watch(runtime)
        router = router_of(runtime)
        busy = await router.submit(request(blocking_bash(fifo), work))
        await watch.tool_started(busy.run_id)
        later = await router.submit(request("/echo later", work))
        now = await router.submit(request("/echo now", work, "interrupt"))
        assert await watch.terminal(busy.run_id) == "aborted"
        assert await watch.terminal(now.run_id) == "completed"
        assert await watch.terminal(later.run_id) == "completed"
        started = [e.meta["run_id"] for e in watch.seen if e.type == "run_started"]
        assert started == [busy.run_id, now.run_id, later.run_id]
        assert len(watch.completions(busy.run_id)) == 1
        assert not router.is_busy(SESSION)


async def test_steer_accepted_by_the_coding_executor(
    boot: Callable[..., Runtime], work: Path, fifo: Path
) -> None:
    async with boot() as runtime:  # the coding executor on the offline provider
        watch = Watch(runtime)
        router = router_of(runtime)
        busy = await router.submit(request(blocking_bash(fifo), work))
        await watch.tool_started(busy.run_id)
        steer = await router.submit(request("/echo steered in", work, "steer"))
        assert steer.status == "dispatched_to_active"
        await watch.until(lambda e: e.type == "queue_outcome" and e.payload.run_id == steer.run_id)
        assert watch.outcomes(steer.run_id) == ["steered"]
        await release(fifo)
        assert await watch.terminal(busy.run_id) == "completed"
        (done,) = watch.completions(busy.run_id)
        assert "steered in" in (done.payload.completed.answer or "")  # its next turn answered
        assert await watch.terminal(steer.run_id) == "completed"
        assert [e.meta["run_id"] for e in watch.seen if e.type == "run_started"] == [busy.run_id]


async def test_steer_rejected_falls_back_to_the_next_run(
    boot: Callable[..., Runtime], work: Path, fifo: Path, tmp_path: Path
) -> None:
    # One execution slot, held by another session's blocked run: this session's active run is
    # accepted by the gateway but not executing, so the gateway refuses the steer ("cannot
    # take it now") and the router queues it as the next run.
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[gateway]\nmax_concurrent_runs = 1\n")
    loaded = load_config(home=home, cwd=tmp_path, environ={})
    async with Runtime(profile="full", config=loaded) as runtime:
        other = "agent:default:main:sub:other"
        watch = Watch(runtime)
        other_watch = Watch(runtime, other)
        router = router_of(runtime)
        blocker = await router.submit(
            RunRequest(
                origin="test",
                session_key=other,
                prompt=blocking_bash(fifo),
                cwd=str(work),
                tool_policy=ToolPolicy(),
                preapproved=frozenset({ALL_TOOLS}),
            )
        )
        await other_watch.tool_started(blocker.run_id)
        waiting = await router.submit(request("/echo first", work))
        await watch.until(
            lambda e: (
                e.type == "run_phase_changed"
                and e.payload.run_id == waiting.run_id
                and e.payload.phase.value == "dispatched_to_gateway"
            )
        )
        steer = await router.submit(request("/echo fell back", work, "steer"))
        assert steer.status == "dispatched_to_active"
        await watch.until(lambda e: e.type == "queue_outcome" and e.payload.run_id == steer.run_id)
        assert watch.outcomes(steer.run_id) == ["fallback_queued"]
        await release(fifo)
        assert await other_watch.terminal(blocker.run_id) == "completed"
        assert await watch.terminal(waiting.run_id) == "completed"
        assert await watch.terminal(steer.run_id) == "completed"
        (done,) = watch.completions(steer.run_id)
        assert done.payload.completed.answer == "fell back"
        gateway = runtime.context.capabilities.require(ENGINE_RUNTIME)
        assert isinstance(gateway, Gateway)
        assert gateway.statistics().steers.refused == 1


async def test_gateway_killed_mid_stream_gives_one_synthetic_completion(
    boot: Callable[..., Runtime], scripted_provider: ScriptedProviderServer, work: Path
) -> None:
    gate = Gate()
    scripted_provider.script(
        ScriptedTurn(text="a long answer that never ends", chunk_size=4, pause=gate)
    )
    async with boot(scripted_provider) as runtime:
        watch = Watch(runtime)
        router = router_of(runtime)
        receipt = await router.submit(request("talk", work))
        await watch.until(lambda e: e.type == "delta")
        assert await gate.wait_reached_async()
        gateway = runtime.handle("lemon_gateway")
        assert isinstance(gateway, Gateway)
        await gateway.stop()  # the gateway goes away while the answer streams
        phase = await watch.terminal(receipt.run_id)
        assert phase in ("failed", "aborted")
        (done,) = watch.completions(receipt.run_id)
        assert done.payload.completed.ok is False
        assert done.payload.completed.synthetic is True
        assert not router.is_busy(SESSION)
        gate.open()
    assert len(watch.completions(receipt.run_id)) == 1


async def test_profiles_boot_in_dependency_order_and_stop_in_reverse(
    boot: Callable[..., Runtime], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    write_config(home, None)
    loaded = load_config(home=home, cwd=tmp_path, environ={})
    async with Runtime(profile="execution-only", config=loaded) as runtime:
        assert runtime.apps == (
            "lemon_memory",
            "coding_agent",
            "lemon_webhooks",
            "lemon_gateway",
            "lemon_mcp",
        )
        stats = runtime.statistics()
        assert set(stats.capabilities) == {
            "AgentRuntime",
            "EngineRuntime",
            "ExecApprovals",
            "GoalStore",
            "HttpMounts",
            "McpHub",
            "MemoryStore",
            "ModelCatalog",
            "SessionCompactor",
            "TranscriptReader",
            "WireMethods",
        }
    assert runtime.statistics().capabilities == {}


def test_installed_apps_are_found_through_entry_points() -> None:
    apps = discover_apps(APPS_ENTRY_POINT_GROUP)
    assert {"coding_agent", "lemon_gateway", "lemon_router"} <= set(apps)
    assert "lemon_cli" not in apps  # one executor: the terminal has no fallback of its own
    assert [a.name for a in resolve_profile("full", apps)] == [
        "lemon_memory",  # before the agent: its runs find MEMORY_STORE
        "coding_agent",
        "lemon_webhooks",  # before the gateway: its VANISHED_RUN_LISTENER must be registered
        "lemon_gateway",
        "lemon_router",
        "lemon_automation",  # after the router: it submits through SESSION_PORT
        "lemon_mcp",
    ]
