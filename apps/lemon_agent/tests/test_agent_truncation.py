"""A response cut by max_tokens inside a tool call, and errors reported once.

Driven through the scripted provider server (real HTTP on 127.0.0.1) over both wire formats; the
number of model calls is counted at the server.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from lemon_agent import (
    Agent,
    AgentConfig,
    AgentErrorEvent,
    AgentEvent,
    AgentResult,
    Tool,
    ToolCallTruncatedEvent,
    ToolContext,
    ToolExecutionStartEvent,
    ToolRegistry,
    TruncatedToolCallError,
)
from lemon_ai import (
    AnthropicMessagesProvider,
    AssistantMessage,
    Model,
    OpenAICompletionsProvider,
    Provider,
    RetryPolicy,
    StreamOptions,
    UserMessage,
    default_catalogue,
)
from lemon_platform_test.providers import (
    ScriptedError,
    ScriptedProviderServer,
    ScriptedToolCall,
    ScriptedTurn,
)

WRITE_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
}
CUT = ScriptedTurn(
    text="Writing it.",
    tool_calls=(
        ScriptedToolCall(name="write", arguments='{"path": "big.txt", "content": "line 1\\nline'),
    ),
    stop_reason="length",
)
WHOLE = ScriptedTurn(
    tool_calls=(ScriptedToolCall(name="write", arguments={"path": "big.txt", "content": "ok"}),)
)


class Wire:
    def __init__(self, server: ScriptedProviderServer, wire: str) -> None:
        self.server = server
        self.wire = wire

        async def no_sleep(delay: float) -> None:
            return None

        retry = RetryPolicy(sleep=no_sleep, random=lambda: 0.0)
        catalogue = default_catalogue()
        self.provider: Provider
        self.model: Model
        if wire == "openai":
            self.provider = OpenAICompletionsProvider(api_key="sk-test", retry=retry)
            self.model = catalogue.resolve("openai:gpt-4o-mini", base_url=server.openai_base_url)
            self.budget_key = "max_completion_tokens"
        else:
            self.provider = AnthropicMessagesProvider(api_key="sk-ant", retry=retry)
            self.model = catalogue.resolve(
                "anthropic:claude-sonnet-4-20250514", base_url=server.url
            )
            self.budget_key = "max_tokens"
        self.written: list[dict[str, Any]] = []

    def agent(self, **overrides: Any) -> Agent:
        async def write(ctx: ToolContext) -> str:
            self.written.append(dict(ctx.arguments))
            return "written"

        tools = ToolRegistry(
            [Tool(name="write", description="Write a file", parameters=WRITE_SCHEMA,
                  execute=write)]
        )  # fmt: skip
        return Agent(AgentConfig(model=self.model, provider=self.provider, tools=tools,
                                 **overrides))  # fmt: skip

    def body(self, number: int) -> dict[str, Any]:
        body: dict[str, Any] = self.server.requests[number].body
        return body


@pytest.fixture(params=["openai", "anthropic"])
async def wire(
    request: pytest.FixtureRequest, scripted_provider: ScriptedProviderServer
) -> AsyncIterator[Wire]:
    w = Wire(scripted_provider, request.param)
    yield w
    await w.provider.aclose()


async def run(agent: Agent, prompt: str) -> tuple[list[AgentEvent], AgentResult]:
    events: list[AgentEvent] = []
    async with agent.start(prompt) as handle:
        async for event in handle:
            events.append(event)
        return events, await handle.result()


def truncations(events: list[AgentEvent]) -> list[ToolCallTruncatedEvent]:
    return [e for e in events if isinstance(e, ToolCallTruncatedEvent)]


async def test_a_model_that_keeps_cutting_its_tool_call_stops_after_three_calls(
    wire: Wire,
) -> None:
    wire.server.script(CUT, CUT, CUT)
    agent = wire.agent(options=StreamOptions(max_tokens=1000))
    events, result = await run(agent, "write a big file")

    assert len(wire.server.requests) == 3, "a bounded, small number of model calls"
    assert wire.written == [], "a cut tool call is never run"
    assert not any(isinstance(e, ToolExecutionStartEvent) for e in events)
    cut = truncations(events)
    assert [(e.action, e.max_tokens, e.attempt) for e in cut] == [
        ("raise_budget", 1000, 1),
        ("ask_smaller", 2000, 2),
        ("stop", 2000, 3),
    ]
    assert (cut[0].next_max_tokens, cut[0].tool_name) == (2000, "write")
    assert [wire.body(n)[wire.budget_key] for n in range(3)] == [1000, 2000, 2000]
    assert "cut off by the output limit" in json.dumps(wire.body(2)["messages"])
    assert "Invalid arguments" not in json.dumps(wire.body(2)["messages"])

    assert result.outcome == "error"
    assert isinstance(result.error, TruncatedToolCallError)
    assert (result.error.tool_name, result.error.attempts) == ("write", 3)
    errors = [e for e in events if isinstance(e, AgentErrorEvent)]
    assert [e.kind for e in errors] == ["truncated_tool_call"]
    assert events[-1].type == "agent_end"


async def test_a_larger_budget_lets_the_cut_call_finish(wire: Wire) -> None:
    wire.server.script(CUT, WHOLE, ScriptedTurn(text="Done."))
    agent = wire.agent(options=StreamOptions(max_tokens=1000))
    events, result = await run(agent, "write a big file")

    assert result.outcome == "completed", result.error
    assert result.text == "Done."
    assert len(wire.server.requests) == 3
    assert wire.written == [{"path": "big.txt", "content": "ok"}]
    assert [e.action for e in truncations(events)] == ["raise_budget"]
    assert [wire.body(n)[wire.budget_key] for n in range(3)] == [1000, 2000, 2000]
    assert wire.body(1)["messages"] == wire.body(0)["messages"], "the same request, more room"
    kept = [m for m in agent.messages if isinstance(m, AssistantMessage)]
    assert all(m.truncated_tool_call is None for m in kept), "the cut response is not kept"


async def test_at_the_catalogue_maximum_the_model_is_asked_for_smaller_pieces(
    wire: Wire,
) -> None:
    wire.server.script(CUT, WHOLE, ScriptedTurn(text="Done."))
    agent = wire.agent()  # no max_tokens option: the budget is the model's maximum already
    events, result = await run(agent, "write a big file")

    assert result.outcome == "completed", result.error
    assert len(wire.server.requests) == 3
    (cut,) = truncations(events)
    assert (cut.action, cut.max_tokens) == ("ask_smaller", wire.model.max_tokens)
    assert wire.written == [{"path": "big.txt", "content": "ok"}]
    nudges = [m for m in agent.messages if isinstance(m, UserMessage)][1:]
    assert len(nudges) == 1
    assert "smaller pieces" in nudges[0].content
    # the text before the cut call is kept, the cut call is not (no result would match it)
    first = agent.messages[1]
    assert isinstance(first, AssistantMessage)
    assert (first.text, first.tool_calls) == ("Writing it.", ())


async def test_the_truncation_bound_is_configurable(wire: Wire) -> None:
    wire.server.script(CUT)
    agent = wire.agent(max_truncated_retries=0)
    events, result = await run(agent, "write a big file")
    assert len(wire.server.requests) == 1
    assert [e.action for e in truncations(events)] == ["stop"]
    assert isinstance(result.error, TruncatedToolCallError)


async def test_a_provider_failure_is_reported_once(wire: Wire) -> None:
    wire.server.script(*[ScriptedError.server_error(500)] * 3)
    events, result = await run(wire.agent(), "hi")
    errors = [e for e in events if isinstance(e, AgentErrorEvent)]
    assert [e.kind for e in errors] == ["server"], "one error event for one failed call"
    assert result.outcome == "error"
    assert len(wire.server.requests) == 3, "the provider's own retries, nothing more"
