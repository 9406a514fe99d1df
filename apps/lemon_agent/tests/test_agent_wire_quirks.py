"""What the agent's caller sees of provider quirks: thinking apart from the answer, refusals.

Recorded real-server streams replayed by the scripted provider server (real HTTP on 127.0.0.1).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from lemon_agent import Agent, AgentConfig, AgentEvent, MessageEndEvent, MessageUpdateEvent
from lemon_ai import (
    AssistantMessage,
    OpenAICompletionsProvider,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    default_catalogue,
)
from lemon_platform_test.providers import RecordedStream, ScriptedProviderServer


@pytest.fixture
async def agent(scripted_provider: ScriptedProviderServer) -> AsyncIterator[Agent]:
    provider = OpenAICompletionsProvider(api_key="sk-test")
    model = default_catalogue().resolve(
        "ollama:deepseek-r1", base_url=scripted_provider.openai_base_url
    )
    yield Agent(AgentConfig(model=model, provider=provider))
    await provider.aclose()


async def events_of(agent: Agent, prompt: str) -> list[AgentEvent]:
    async with agent.start(prompt) as run:
        return [event async for event in run]


@pytest.mark.parametrize("name", ["openai_think_tags_in_content", "openai_reasoning_content"])
async def test_reasoning_reaches_the_caller_as_thinking_never_as_answer(
    agent: Agent, scripted_provider: ScriptedProviderServer, name: str
) -> None:
    scripted_provider.script(RecordedStream.load(name, chunk_size=3))
    events = await events_of(agent, "hello")
    inner = [e.event for e in events if isinstance(e, MessageUpdateEvent)]
    text = "".join(e.delta for e in inner if isinstance(e, TextDeltaEvent))
    thinking = "".join(e.delta for e in inner if isinstance(e, ThinkingDeltaEvent))
    (answer,) = [
        e.message
        for e in events
        if isinstance(e, MessageEndEvent) and isinstance(e.message, AssistantMessage)
    ]
    assert thinking
    assert answer.thinking == thinking
    assert text == answer.text
    assert "think>" not in text
    assert thinking.strip() not in text


async def test_a_refusal_is_the_answer_the_caller_gets(
    agent: Agent, scripted_provider: ScriptedProviderServer
) -> None:
    scripted_provider.script(RecordedStream.load("openai_refusal"))
    result = await agent.prompt("do something bad")
    assert result.outcome == "completed"
    assert result.text == "I'm sorry, but I can't help with that."
    assert result.final is not None
    assert result.final.refusal == result.text
