"""Steering a running coding execution, through the real gateway and the scripted provider."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from coding_agent import CodingExecution, CodingExecutor, ExecutorSettings, Transcript
from lemon_ai import AssistantMessage, OpenAICompletionsProvider, default_catalogue
from lemon_ai import Message as AiMessage
from lemon_core.bus import Bus
from lemon_core.events import Completion, ErrorCode
from lemon_core.execution import ExecutionCommand, ExecutionJob, ResumeToken, ToolPolicy
from lemon_gateway import Gateway
from lemon_platform_test.providers import (
    Gate,
    ScriptedProviderServer,
    ScriptedToolCall,
    ScriptedTurn,
)

SESSION = "agent:coder:steer"


class Capturing:
    """The coding executor as the gateway sees it, keeping each prepared execution.

    It also tries a steer on every execution the moment it is prepared, before the gateway
    starts it (``early`` records the answers).
    """

    def __init__(self, inner: CodingExecutor) -> None:
        self.inner = inner
        self.executions: dict[str, CodingExecution] = {}
        self.early: dict[str, bool] = {}

    async def prepare(self, job: ExecutionJob) -> CodingExecution:
        execution = await self.inner.prepare(job)
        self.early[job.run_id] = execution.steer("too early")
        self.executions[job.run_id] = execution
        return execution


@dataclass
class Env:
    gateway: Gateway
    executor: CodingExecutor
    capture: Capturing
    server: ScriptedProviderServer
    home: Path
    cwd: Path
    handles: dict[str, Any] = field(default_factory=dict)

    def submit(self, run_id: str, prompt: str, resume: ResumeToken | None = None) -> Any:
        key = ("resume", "lemon", resume.value) if resume else ("session", SESSION)
        command = ExecutionCommand(
            run_id=run_id,
            session_key=SESSION,
            prompt=prompt,
            conversation_key=key,
            cwd=str(self.cwd),
            resume=resume,
        )
        return self.gateway.submit_execution(command)

    def messages(self, number: int) -> list[dict[str, Any]]:
        """The chat messages of the server's request ``number`` (OpenAI wire format)."""
        messages = self.server.requests[number].body["messages"]
        assert isinstance(messages, list)
        return messages

    def transcript(self, session_id: str) -> list[dict[str, Any]]:
        path = self.home / "agent" / "sessions" / f"{session_id}.jsonl"
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        return [line["message"] for line in lines[1:]]


def _env_factory(
    tmp_path: Path, server: ScriptedProviderServer, settings: ExecutorSettings
) -> tuple[CodingExecutor, OpenAICompletionsProvider]:
    provider = OpenAICompletionsProvider(api_key="sk-test")
    model = default_catalogue().resolve("openai:gpt-4o-mini", base_url=server.openai_base_url)
    executor = CodingExecutor(
        home=tmp_path / "home", model=model, provider=provider, settings=settings
    )
    return executor, provider


@pytest.fixture
async def env(tmp_path: Path, scripted_provider: ScriptedProviderServer) -> AsyncIterator[Env]:
    cwd = tmp_path / "work"
    cwd.mkdir()
    settings = ExecutorSettings(default_policy=ToolPolicy(), steering_capacity=3)
    executor, provider = _env_factory(tmp_path, scripted_provider, settings)
    capture = Capturing(executor)
    try:
        async with Gateway(bus=Bus(), executor=capture) as gateway:
            yield Env(gateway, executor, capture, scripted_provider, tmp_path / "home", cwd)
    finally:
        await provider.aclose()


async def _paused(env: Env, gate: Gate, run_id: str) -> CodingExecution:
    """Wait until the server holds the run's stream at ``gate``; the run's execution."""
    assert await gate.wait_reached_async()
    execution = env.capture.executions[run_id]
    assert execution.steerable
    return execution


def _loop_task(run_id: str) -> asyncio.Task[Any]:
    """The agent loop's task of a run (alive: its stream is held at a gate)."""
    (task,) = [
        task
        for task in asyncio.all_tasks()
        if task.get_name() == run_id and task.get_coro().__qualname__ == "AgentRun._main"
    ]
    return task


def _role_texts(messages: Sequence[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(m["role"], m.get("content")) for m in messages]


async def test_a_steer_mid_run_reaches_the_next_model_call(env: Env) -> None:
    (env.cwd / "a.txt").write_text("a\n")
    gate = Gate()
    env.server.script(
        ScriptedTurn(text="Looking around. ", pause=gate, pause_after=1, tool_calls=(
            ScriptedToolCall(id="c1", name="ls", arguments={"path": "."}),)),
        ScriptedTurn(text="Done, and hidden files too."),
    )  # fmt: skip
    handle = env.submit("r1", "list the files")
    execution = await _paused(env, gate, "r1")
    assert execution.steer("also list hidden files")
    gate.open()
    completion: Completion = await handle
    assert completion.ok, completion.error
    assert completion.answer == "Done, and hidden files too."

    # The model's second request: the tool result, then the steer, as a user message.
    second = env.messages(1)
    assert second[-1] == {"role": "user", "content": "also list hidden files"}
    assert second[-2]["role"] == "tool"
    assert "a.txt" in second[-2]["content"]
    assert "also list hidden files" not in json.dumps(env.messages(0))

    # The transcript has it where it was injected.
    assert completion.resume is not None
    roles = [(m["role"], m.get("content")) for m in env.transcript(completion.resume["value"])]
    assert [r for r, _ in roles] == ["user", "assistant", "tool_result", "user", "assistant"]
    assert roles[3] == ("user", "also list hidden files")

    # Before the gateway started it, and after it finished, a steer is refused.
    assert env.capture.early["r1"] is False
    assert execution.finished
    assert execution.steer("too late") is False
    stats = env.executor.statistics()
    assert (stats.steers_accepted, stats.steers_refused, stats.steers_dropped) == (1, 2, 0)
    assert stats.steer_continuations == 0
    assert len(env.server.requests) == 2


async def test_a_steer_while_the_last_answer_streams_gets_one_more_turn(env: Env) -> None:
    gate = Gate()
    env.server.script(
        ScriptedTurn(text="The answer is 4.", pause=gate, pause_after=1),
        ScriptedTurn(text="In words: four."),
    )
    handle = env.submit("r1", "what is 2+2?")
    execution = await _paused(env, gate, "r1")
    assert execution.steer("say it in words")
    gate.open()
    completion: Completion = await handle
    assert completion.ok, completion.error
    assert completion.answer == "In words: four."
    assert _role_texts(env.messages(1))[-3:] == [
        ("user", "what is 2+2?"),
        ("assistant", "The answer is 4."),
        ("user", "say it in words"),
    ]
    assert completion.usage is not None
    assert completion.usage.turns == 2
    stats = env.executor.statistics()
    assert (stats.steers_accepted, stats.steer_continuations) == (1, 0)


async def test_a_steer_after_the_loops_last_drain_is_not_lost_and_survives_resume(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race: the model has given its final answer and the agent loop has already looked
    at its steering queue for the last time, but the execution has not finished yet."""
    final_persisted = asyncio.Event()
    release = asyncio.Event()
    original = Transcript.append

    async def append(self: Transcript, messages: Sequence[AiMessage]) -> None:
        last = messages[-1] if messages else None
        if (
            isinstance(last, AssistantMessage)
            and last.text == "The answer is 4."
            and not final_persisted.is_set()
        ):
            final_persisted.set()
            await release.wait()
        await original(self, messages)

    monkeypatch.setattr(Transcript, "append", append)
    gate = Gate()
    env.server.script(
        ScriptedTurn(text="The answer is 4.", pause=gate, pause_after=1),
        ScriptedTurn(text="In words: four."),
        ScriptedTurn(text="You asked for it in words."),
    )
    handle = env.submit("r1", "what is 2+2?")
    execution = await _paused(env, gate, "r1")
    loop_task = _loop_task("r1")
    gate.open()
    # The execution is writing the final turn (held); wait until the agent loop itself has
    # ended: it drained its (empty) steering queue for the last time and returned.
    await final_persisted.wait()
    await asyncio.wait({loop_task})
    assert execution.steer("say it in words"), "not finished yet: the steer is accepted"
    release.set()
    completion: Completion = await handle
    assert completion.ok, completion.error
    assert completion.answer == "In words: four."
    assert _role_texts(env.messages(1))[-3:] == [
        ("user", "what is 2+2?"),
        ("assistant", "The answer is 4."),
        ("user", "say it in words"),
    ]
    stats = env.executor.statistics()
    assert (stats.steers_accepted, stats.steer_continuations, stats.steers_dropped) == (1, 1, 0)
    assert execution.steer("after the end") is False

    # Persisted at the point it was injected, and seen by the model after a resume.
    assert completion.resume is not None
    token = ResumeToken.from_dict(completion.resume)
    assert _role_texts(env.transcript(token.value)) == [
        ("user", "what is 2+2?"),
        ("assistant", [{"type": "text", "text": "The answer is 4."}]),
        ("user", "say it in words"),
        ("assistant", [{"type": "text", "text": "In words: four."}]),
    ]
    resumed: Completion = await env.submit("r2", "what did I ask?", resume=token)
    assert resumed.ok, resumed.error
    assert _role_texts(env.messages(2))[-5:] == [
        ("user", "what is 2+2?"),
        ("assistant", "The answer is 4."),
        ("user", "say it in words"),
        ("assistant", "In words: four."),
        ("user", "what did I ask?"),
    ]


async def test_a_full_steering_queue_refuses_without_raising(env: Env) -> None:
    gate = Gate()
    env.server.script(
        ScriptedTurn(text="Working on it.", pause=gate, pause_after=1),
        ScriptedTurn(text="Noted all three."),
    )
    handle = env.submit("r1", "start")
    execution = await _paused(env, gate, "r1")
    assert [execution.steer(f"note {n}") for n in range(4)] == [True, True, True, False]
    assert execution.steer("") is False
    gate.open()
    completion: Completion = await handle
    assert completion.ok, completion.error
    assert _role_texts(env.messages(1))[-3:] == [
        ("user", "note 0"),
        ("user", "note 1"),
        ("user", "note 2"),
    ]
    stats = env.executor.statistics()
    assert (stats.steers_accepted, stats.steers_refused) == (3, 3)


async def test_a_cancelled_run_refuses_steers_and_drops_the_unanswered_one(env: Env) -> None:
    gate = Gate()
    env.server.script(ScriptedTurn(text="This will be cut off.", pause=gate, pause_after=1))
    handle = env.submit("r1", "talk")
    execution = await _paused(env, gate, "r1")
    assert execution.steer("and then?")
    assert env.gateway.cancel("r1", "stop")
    completion: Completion = await handle
    gate.open()
    assert not completion.ok
    assert completion.error_code is ErrorCode.CANCELLED
    assert execution.steer("still there?") is False
    stats = env.executor.statistics()
    assert (stats.steers_accepted, stats.steers_dropped) == (1, 1)
    assert completion.resume is not None
    assert "and then?" not in json.dumps(env.transcript(completion.resume["value"]))
    assert len(env.server.requests) == 1


async def test_a_steer_at_the_turn_limit_fails_the_run_instead_of_vanishing(
    tmp_path: Path, scripted_provider: ScriptedProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    executor, provider = _env_factory(
        tmp_path, scripted_provider, ExecutorSettings(default_policy=ToolPolicy(), max_turns=1)
    )
    capture = Capturing(executor)
    persisted = asyncio.Event()
    release = asyncio.Event()
    original = Transcript.append

    async def append(self: Transcript, messages: Sequence[AiMessage]) -> None:
        if messages and isinstance(messages[-1], AssistantMessage) and not persisted.is_set():
            persisted.set()
            await release.wait()
        await original(self, messages)

    monkeypatch.setattr(Transcript, "append", append)
    gate = Gate()
    scripted_provider.script(ScriptedTurn(text="only turn", pause=gate, pause_after=1))
    try:
        async with Gateway(bus=Bus(), executor=capture) as gateway:
            handle = gateway.submit_execution(
                ExecutionCommand(run_id="r1", session_key=SESSION, prompt="go",
                                 conversation_key=("session", SESSION), cwd=str(cwd))
            )  # fmt: skip
            assert await gate.wait_reached_async()
            loop_task = _loop_task("r1")
            gate.open()
            await persisted.wait()
            await asyncio.wait({loop_task})
            assert capture.executions["r1"].steer("one more thing")
            release.set()
            completion: Completion = await handle
    finally:
        await provider.aclose()
    assert not completion.ok
    assert completion.error is not None
    assert "max_turns" in completion.error
    assert "1 steering message(s) not yet answered" in completion.error
    assert completion.answer == "only turn"
    assert executor.statistics().steers_dropped == 1
    assert len(scripted_provider.requests) == 1


async def test_a_continuation_stops_at_the_executions_turn_limit(
    tmp_path: Path, scripted_provider: ScriptedProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    executor, provider = _env_factory(
        tmp_path, scripted_provider, ExecutorSettings(default_policy=ToolPolicy(), max_turns=2)
    )
    capture = Capturing(executor)
    persisted = asyncio.Event()
    release = asyncio.Event()
    original = Transcript.append

    async def append(self: Transcript, messages: Sequence[AiMessage]) -> None:
        if messages and isinstance(messages[-1], AssistantMessage) and not persisted.is_set():
            persisted.set()
            await release.wait()
        await original(self, messages)

    monkeypatch.setattr(Transcript, "append", append)
    first = Gate()
    scripted_provider.script(
        ScriptedTurn(text="first answer", pause=first, pause_after=1),
        ScriptedTurn(tool_calls=(ScriptedToolCall(id="c1", name="ls", arguments={"path": "."}),)),
    )
    try:
        async with Gateway(bus=Bus(), executor=capture) as gateway:
            handle = gateway.submit_execution(
                ExecutionCommand(run_id="r1", session_key=SESSION, prompt="go",
                                 conversation_key=("session", SESSION), cwd=str(cwd))
            )  # fmt: skip
            assert await first.wait_reached_async()
            loop_task = _loop_task("r1")
            first.open()
            await persisted.wait()
            await asyncio.wait({loop_task})
            assert capture.executions["r1"].steer("now list the files")
            release.set()
            completion: Completion = await handle
    finally:
        await provider.aclose()
    assert not completion.ok
    assert completion.error is not None
    assert completion.error.startswith("max_turns: the run reached its limit of 2 model calls")
    stats = executor.statistics()
    assert (stats.steer_continuations, stats.steers_dropped) == (1, 0)
    assert completion.resume is not None
    path = tmp_path / "home" / "agent" / "sessions" / f"{completion.resume['value']}.jsonl"
    roles = [json.loads(line)["message"]["role"] for line in path.read_text().splitlines()[1:]]
    assert roles == ["user", "assistant", "user", "assistant", "tool_result"]
    assert len(scripted_provider.requests) == 2, "the limit is kept without a third call"
