"""The coding tools driven by the agent loop against the scripted provider (real HTTP)."""

from __future__ import annotations

import json
import os
import select
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from coding_agent import Workspace, coding_tool_registry
from lemon_agent import Agent, AgentConfig, AgentEvent, ToolExecutionUpdateEvent
from lemon_ai import OpenAICompletionsProvider, ToolResultMessage, default_catalogue
from lemon_platform_test.providers import ScriptedProviderServer, ScriptedToolCall, ScriptedTurn


def _alive(pid: int) -> bool:
    """Whether ``pid`` is still running 5 s after it was SIGKILLed.

    SIGKILL is delivered asynchronously, so wait for the kernel's exit notification (a pidfd
    becomes readable when the process terminates) instead of sampling /proc once.
    """
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        readable, _, _ = select.select([fd], [], [], 5.0)
    finally:
        os.close(fd)
    return not readable


@pytest.fixture
async def provider() -> AsyncIterator[OpenAICompletionsProvider]:
    p = OpenAICompletionsProvider(api_key="sk-test")
    yield p
    await p.aclose()


def _agent(tmp_path: Path, server: ScriptedProviderServer, provider: OpenAICompletionsProvider,
           **overrides: object) -> Agent:  # fmt: skip
    model = default_catalogue().resolve("openai:gpt-4o-mini", base_url=server.openai_base_url)
    config = AgentConfig(model=model, provider=provider,
                         tools=coding_tool_registry(Workspace(cwd=tmp_path)), **overrides)  # type: ignore[arg-type]  # fmt: skip
    return Agent(config)


async def test_read_and_bash_in_parallel_then_edit(
    tmp_path: Path, scripted_provider: ScriptedProviderServer, provider: OpenAICompletionsProvider
) -> None:
    (tmp_path / "greet.py").write_text('print("helo")\n')
    scripted_provider.script(
        ScriptedTurn(tool_calls=(
            ScriptedToolCall(name="read", arguments={"path": "greet.py"}),
            ScriptedToolCall(name="bash", arguments={"command": "python3 greet.py"}),
        )),
        ScriptedTurn(tool_calls=(ScriptedToolCall(name="edit", arguments={
            "path": "greet.py", "old_text": '"helo"', "new_text": '"hello"'}),)),
        ScriptedTurn(text="Fixed the typo."),
    )  # fmt: skip
    agent = _agent(tmp_path, scripted_provider, provider)
    result = await agent.prompt("fix the typo in greet.py")
    assert result.outcome == "completed"
    assert (tmp_path / "greet.py").read_text() == 'print("hello")\n'
    results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert [r.tool_name for r in results] == ["read", "bash", "edit"]
    assert results[0].content == 'print("helo")\n'
    assert results[1].content == "helo\n[exit code 0]"
    second = json.dumps(scripted_provider.requests[1].body)
    assert "helo" in second
    assert "[exit code 0]" in second


async def test_abort_mid_bash_kills_the_process_group(
    tmp_path: Path, scripted_provider: ScriptedProviderServer, provider: OpenAICompletionsProvider
) -> None:
    command = "echo $$ > sh.pid; sleep 60 & echo $! > bg.pid; echo ready; wait"
    scripted_provider.script(
        ScriptedTurn(tool_calls=(ScriptedToolCall(name="bash", arguments={"command": command}),))
    )
    agent = _agent(tmp_path, scripted_provider, provider)
    events: list[AgentEvent] = []
    async with agent.start("run it") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, ToolExecutionUpdateEvent) and "ready" in event.update:
                run.abort("user stop")
        result = await run.result()
    assert result.outcome == "aborted"
    (tool_result,) = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert tool_result.is_error
    assert "process group was killed" in tool_result.content
    for name in ("sh.pid", "bg.pid"):
        assert not _alive(int((tmp_path / name).read_text()))
    assert len(scripted_provider.requests) == 1
