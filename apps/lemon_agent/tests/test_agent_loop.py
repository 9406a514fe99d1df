"""The agent loop against the scripted provider server (real HTTP on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from lemon_agent import (
    Agent,
    AgentConfig,
    AgentEndEvent,
    AgentErrorEvent,
    AgentEvent,
    CanceledEvent,
    MessageUpdateEvent,
    Tool,
    ToolContext,
    ToolError,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    ToolRegistry,
    ToolResult,
    TurnEndEvent,
    TurnStartEvent,
)
from lemon_ai import (
    AnthropicMessagesProvider,
    ContextOverflowError,
    OpenAICompletionsProvider,
    Provider,
    RetryPolicy,
    ToolResultMessage,
    UserMessage,
    decode_image,
    default_catalogue,
)
from lemon_ai import AssistantMessage as Assistant
from lemon_platform_test.providers import (
    Gate,
    ScriptedError,
    ScriptedProviderServer,
    ScriptedToolCall,
    ScriptedTurn,
)

PATH_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}


class Harness:
    def __init__(self, server: ScriptedProviderServer, wire: str) -> None:
        self.server = server
        self.sleeps: list[float] = []

        async def record(delay: float) -> None:
            self.sleeps.append(delay)

        retry = RetryPolicy(sleep=record, random=lambda: 0.0)
        catalogue = default_catalogue()
        self.provider: Provider
        if wire == "openai":
            self.provider = OpenAICompletionsProvider(api_key="sk-test", retry=retry)
            self.model = catalogue.resolve("openai:gpt-4o-mini", base_url=server.openai_base_url)
        else:
            self.provider = AnthropicMessagesProvider(api_key="sk-ant", retry=retry)
            self.model = catalogue.resolve(
                "anthropic:claude-sonnet-4-20250514", base_url=server.url
            )

    def agent(self, *tools: Tool, **overrides: Any) -> Agent:
        config = AgentConfig(
            model=self.model,
            provider=self.provider,
            system_prompt="You are a test agent.",
            tools=ToolRegistry(tools),
            **overrides,
        )
        return Agent(config)

    def request_text(self, number: int) -> str:
        return json.dumps(self.server.requests[number].body)


@pytest.fixture(params=["openai", "anthropic"])
async def harness(
    request: pytest.FixtureRequest, scripted_provider: ScriptedProviderServer
) -> AsyncIterator[Harness]:
    h = Harness(scripted_provider, request.param)
    yield h
    await h.provider.aclose()


@pytest.fixture
async def openai(scripted_provider: ScriptedProviderServer) -> AsyncIterator[Harness]:
    h = Harness(scripted_provider, "openai")
    yield h
    await h.provider.aclose()


def tool(
    name: str, body: Callable[[ToolContext], Any], schema: dict[str, Any] | None = None
) -> Tool:
    return Tool(name=name, description=f"{name} tool", execute=body,
                parameters=schema or PATH_SCHEMA)  # fmt: skip


async def run_collect(agent: Agent, prompt: str) -> tuple[list[AgentEvent], Any]:
    events: list[AgentEvent] = []
    async with agent.start(prompt) as run:
        async for event in run:
            events.append(event)
        return events, await run.result()


async def test_multi_turn_run_with_parallel_tool_calls(harness: Harness) -> None:
    both_running = asyncio.Barrier(2)

    async def read(ctx: ToolContext) -> str:
        await asyncio.wait_for(both_running.wait(), 10)  # only passes if both run at once
        await ctx.update(f"reading {ctx.arguments['path']}")
        return f"contents of {ctx.arguments['path']}"

    harness.server.script(
        ScriptedTurn(text="Reading both.", tool_calls=(
            ScriptedToolCall(name="read", arguments={"path": "a.txt"}),
            ScriptedToolCall(name="read", arguments={"path": "b.txt"}),
        )),
        ScriptedTurn(text="Both files read."),
    )  # fmt: skip
    agent = harness.agent(tool("read", read))
    events, result = await run_collect(agent, "read a and b")

    assert result.outcome == "completed"
    assert result.turns == 2
    assert result.text == "Both files read."
    kinds = [e.type for e in events]
    assert kinds[0] == "agent_start"
    assert kinds[-1] == "agent_end"
    assert kinds.count("turn_start") == kinds.count("turn_end") == 2
    assert kinds.count("tool_execution_start") == kinds.count("tool_execution_end") == 2
    assert kinds.count("tool_execution_update") == 2
    updates = [e for e in events if isinstance(e, MessageUpdateEvent)]
    assert updates
    # the conversation: user, assistant(2 calls), 2 results in call order, assistant
    messages = agent.messages
    assert isinstance(messages[0], UserMessage)
    assert isinstance(messages[1], Assistant)
    assert [m.content for m in messages[2:4] if isinstance(m, ToolResultMessage)] == [
        "contents of a.txt",
        "contents of b.txt",
    ]
    assert isinstance(messages[4], Assistant)
    assert messages[1].tool_calls[0].id == messages[2].tool_call_id  # type: ignore[union-attr]
    # the second request carried both results back to the model
    second = harness.request_text(1)
    assert "contents of a.txt" in second
    assert "contents of b.txt" in second
    assert result.usage.output_tokens == 14  # 7 per scripted turn
    end = events[-1]
    assert isinstance(end, AgentEndEvent)
    assert end.messages == result.messages


async def test_tool_concurrency_is_bounded(openai: Harness) -> None:
    active = 0
    peak = 0

    async def work(ctx: ToolContext) -> str:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        for _ in range(3):
            await asyncio.sleep(0)
        active -= 1
        return "ok"

    calls = tuple(ScriptedToolCall(name="work", arguments={"path": str(i)}) for i in range(5))
    openai.server.script(ScriptedTurn(tool_calls=calls), ScriptedTurn(text="done"))
    agent = openai.agent(tool("work", work), max_tool_concurrency=2)
    result = await agent.prompt("go")
    assert result.outcome == "completed"
    assert peak == 2


async def test_tool_errors_are_returned_to_the_model(harness: Harness) -> None:
    async def missing(ctx: ToolContext) -> str:
        raise ToolError(f"no such file: {ctx.arguments['path']}")

    async def broken(ctx: ToolContext) -> str:
        raise RuntimeError("disk on fire")

    harness.server.script(
        ScriptedTurn(tool_calls=(
            ScriptedToolCall(name="missing", arguments={"path": "nope.txt"}),
            ScriptedToolCall(name="broken", arguments={"path": "x"}),
        )),
        ScriptedTurn(text="Sorry, both failed."),
    )  # fmt: skip
    agent = harness.agent(tool("missing", missing), tool("broken", broken))
    events, result = await run_collect(agent, "try")
    assert result.outcome == "completed"
    ends = [e for e in events if isinstance(e, ToolExecutionEndEvent)]
    assert all(e.result.is_error for e in ends)
    results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert results[0].content == "no such file: nope.txt"
    assert "RuntimeError: disk on fire" in results[1].content
    second = harness.request_text(1)
    assert "no such file: nope.txt" in second
    assert "disk on fire" in second


async def test_a_tools_image_reaches_the_model_over_both_wires(harness: Harness) -> None:
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    )
    image = decode_image(base64.b64encode(png).decode())

    async def shoot(ctx: ToolContext) -> ToolResult:
        return ToolResult(content="a screenshot", images=(image,))

    harness.server.script(
        ScriptedTurn(tool_calls=(ScriptedToolCall(name="shoot", arguments={"path": "x"}),)),
        ScriptedTurn(text="I see it."),
    )
    result = await harness.agent(tool("shoot", shoot)).prompt("look")
    assert result.outcome == "completed"
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert results[0].images == (image,)
    second = harness.server.requests[1].body
    if harness.model.api == "openai_completions":
        parts = second["messages"][-1]["content"]
        assert second["messages"][-1]["role"] == "user"
        assert parts[1] == {
            "type": "image_url",
            "image_url": {"url": f"data:image/png;base64,{image.data}"},
        }
    else:
        block = second["messages"][-1]["content"][0]
        assert block["type"] == "tool_result"
        assert block["content"][1]["source"]["data"] == image.data


async def test_invalid_tool_arguments_never_reach_the_tool(harness: Harness) -> None:
    ran: list[Any] = []

    async def read(ctx: ToolContext) -> str:
        ran.append(ctx.arguments)
        return "read"

    harness.server.script(
        ScriptedTurn(tool_calls=(
            ScriptedToolCall(name="read", arguments={"path": 3}),
            ScriptedToolCall(name="read", arguments={"path": "a", "extra": True}),
            ScriptedToolCall(name="read", arguments="{not json"),
            ScriptedToolCall(name="write", arguments={"path": "a"}),
            ScriptedToolCall(name="read", arguments={"path": "ok.txt"}),
        )),
        ScriptedTurn(text="fixed"),
    )  # fmt: skip
    agent = harness.agent(tool("read", read))
    result = await agent.prompt("go")
    assert result.outcome == "completed"
    assert ran == [{"path": "ok.txt"}]
    results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert [r.is_error for r in results] == [True, True, True, True, False]
    assert "path: 3 is not of type 'string'" in results[0].content
    assert "'extra' was unexpected" in results[1].content
    assert "not valid JSON" in results[2].content
    assert results[3].content == "Unknown tool 'write'. Available tools: read."


async def test_abort_mid_stream_keeps_the_partial_answer(harness: Harness) -> None:
    gate = Gate()
    harness.server.script(
        ScriptedTurn(text="This answer will be cut off " * 5, chunk_size=4, pause=gate,
                     pause_after=6)
    )  # fmt: skip
    agent = harness.agent()
    events: list[AgentEvent] = []
    async with agent.start("talk") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, MessageUpdateEvent):
                run.abort("user pressed stop")
        result = await run.result()
    assert result.outcome == "aborted"
    assert result.abort_reason == "user pressed stop"
    assert [e.type for e in events[-3:]] == ["turn_end", "canceled", "agent_end"]
    canceled = next(e for e in events if isinstance(e, CanceledEvent))
    assert canceled.reason == "user pressed stop"
    partial = agent.messages[-1]
    assert isinstance(partial, Assistant)
    assert partial.stop_reason == "aborted"
    assert partial.text
    assert "This answer will be cut off".startswith(partial.text[:8])
    assert await asyncio.to_thread(harness.server.wait_cancelled, 1, 10.0)


async def test_abort_mid_tool_stops_cooperative_and_cancels_stubborn_tools(
    openai: Harness,
) -> None:
    stubborn_cancelled = asyncio.Event()

    async def cooperative(ctx: ToolContext) -> str:
        reason = await asyncio.wait_for(ctx.signal.wait(), 10)
        return f"stopped early: {reason}"

    async def stubborn(ctx: ToolContext) -> str:
        try:
            await asyncio.Event().wait()  # ignores the signal
        except asyncio.CancelledError:
            stubborn_cancelled.set()
            raise
        return "never"

    openai.server.script(
        ScriptedTurn(tool_calls=(
            ScriptedToolCall(name="cooperative", arguments={"path": "a"}),
            ScriptedToolCall(name="stubborn", arguments={"path": "b"}),
        ))
    )  # fmt: skip
    agent = openai.agent(tool("cooperative", cooperative), tool("stubborn", stubborn),
                         abort_grace=0.05)  # fmt: skip
    started = 0
    events: list[AgentEvent] = []
    async with agent.start("go") as run:
        async for event in run:
            events.append(event)
            if isinstance(event, ToolExecutionStartEvent):
                started += 1
                if started == 2:
                    run.abort("stop now")
        result = await run.result()
    assert result.outcome == "aborted"
    assert stubborn_cancelled.is_set()
    results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert len(results) == 2, "every tool call has exactly one result"
    assert results[0].content == "stopped early: stop now"
    assert results[1].is_error
    assert "aborted" in results[1].content
    assert len([e for e in events if isinstance(e, ToolExecutionEndEvent)]) == 2
    assert len(openai.server.requests) == 1, "no model call after the abort"


async def test_abort_before_a_model_call_makes_none(openai: Harness) -> None:
    async def stop(ctx: ToolContext) -> str:
        ctx.signal.abort("tool decided")
        return "stopping"

    openai.server.script(
        ScriptedTurn(tool_calls=(ScriptedToolCall(name="stop", arguments={"path": "a"}),))
    )
    agent = openai.agent(tool("stop", stop))
    result = await agent.prompt("go")
    assert result.outcome == "aborted"
    assert len(openai.server.requests) == 1


async def test_retry_after_429_honours_retry_after(harness: Harness) -> None:
    harness.server.script(ScriptedError.rate_limited(retry_after=1.5), ScriptedTurn(text="hi"))
    result = await harness.agent().prompt("hello")
    assert result.outcome == "completed"
    assert result.text == "hi"
    assert harness.sleeps == [1.5]
    assert len(harness.server.requests) == 2


async def test_context_overflow_is_classified(harness: Harness) -> None:
    harness.server.script(ScriptedError.context_overflow())
    events, result = await run_collect(harness.agent(), "a very long prompt")
    assert result.outcome == "error"
    assert isinstance(result.error, ContextOverflowError)
    error = next(e for e in events if isinstance(e, AgentErrorEvent))
    assert error.kind == "context_overflow"
    assert [e.type for e in events[-2:]] == ["error", "agent_end"]
    assert harness.sleeps == [], "context overflow is not retried"


async def test_steering_is_injected_between_turns(harness: Harness) -> None:
    agent_ref: list[Agent] = []

    async def look(ctx: ToolContext) -> str:
        agent_ref[0].steer("Also look at b.txt, please.")
        return "a.txt is empty"

    harness.server.script(
        ScriptedTurn(tool_calls=(ScriptedToolCall(name="look", arguments={"path": "a.txt"}),)),
        ScriptedTurn(text="Will do."),
    )
    agent = harness.agent(tool("look", look))
    agent_ref.append(agent)
    result = await agent.prompt("look at a.txt")
    assert result.outcome == "completed"
    kinds = [type(m).__name__ for m in agent.messages]
    assert kinds == [
        "UserMessage", "AssistantMessage", "ToolResultMessage", "UserMessage", "AssistantMessage",
    ]  # fmt: skip
    second = harness.request_text(1)
    assert second.index("a.txt is empty") < second.index("Also look at b.txt")


async def test_follow_up_starts_another_turn_when_the_model_stops(harness: Harness) -> None:
    harness.server.script(ScriptedTurn(text="First answer."), ScriptedTurn(text="Second answer."))
    agent = harness.agent()
    agent.follow_up("And one more thing.")
    events, result = await run_collect(agent, "first question")
    assert result.outcome == "completed"
    assert result.turns == 2
    assert result.text == "Second answer."
    assert "And one more thing." in harness.request_text(1)
    assert "And one more thing." not in harness.request_text(0)
    assert [e.turn for e in events if isinstance(e, TurnStartEvent)] == [1, 2]


async def test_turn_limit_stops_a_looping_model(openai: Harness) -> None:
    async def again(ctx: ToolContext) -> str:
        return "again"

    call = ScriptedToolCall(name="again", arguments={"path": "x"})
    openai.server.script(ScriptedTurn(tool_calls=(call,)), ScriptedTurn(tool_calls=(call,)))
    events, result = await run_collect(openai.agent(tool("again", again), max_turns=2), "loop")
    assert result.outcome == "max_turns"
    error = next(e for e in events if isinstance(e, AgentErrorEvent))
    assert "max_turns" in error.message
    assert isinstance(events[-1], AgentEndEvent)


async def test_tool_updates_and_results_are_truncated_to_the_bound(openai: Harness) -> None:
    async def big(ctx: ToolContext) -> str:
        return "x" * 500

    openai.server.script(
        ScriptedTurn(tool_calls=(ScriptedToolCall(name="big", arguments={"path": "x"}),)),
        ScriptedTurn(text="ok"),
    )
    agent = openai.agent(tool("big", big), max_tool_result_chars=100)
    await agent.prompt("go")
    (result,) = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert result.content.startswith("x" * 100)
    assert "[... truncated: 400 more characters of 500]" in result.content


async def test_events_arrive_in_lifecycle_order(openai: Harness) -> None:
    async def read(ctx: ToolContext) -> str:
        await ctx.update("half way")
        return "done"

    openai.server.script(
        ScriptedTurn(text="Let me read.",
                     tool_calls=(ScriptedToolCall(name="read", arguments={"path": "a"}),)),
        ScriptedTurn(text="All done."),
    )  # fmt: skip
    events, _ = await run_collect(openai.agent(tool("read", read)), "go")
    compact = [e.type for e in events if not isinstance(e, MessageUpdateEvent)]
    assert compact == [
        "agent_start",
        "message_start", "message_end",  # the prompt
        "turn_start", "message_start", "message_end",
        "tool_execution_start", "tool_execution_update", "tool_execution_end",
        "message_start", "message_end",  # the tool result
        "turn_end",
        "turn_start", "message_start", "message_end", "turn_end",
        "agent_end",
    ]  # fmt: skip
    update = next(e for e in events if isinstance(e, ToolExecutionUpdateEvent))
    assert update.update == "half way"
    turn_ends = [e for e in events if isinstance(e, TurnEndEvent)]
    assert [len(e.tool_results) for e in turn_ends] == [1, 0]
