"""Tool registry, event stream policies, queues and the offline provider end to end."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lemon_agent import (
    AbortSignal,
    AgentBusyError,
    AgentConfig,
    AgentStartEvent,
    AgentUsageError,
    EventStream,
    MessageUpdateEvent,
    OverflowPolicy,
    QueueFullError,
    Tool,
    ToolContext,
    ToolRegistry,
    TurnStartEvent,
)
from lemon_agent import Agent as AgentClass
from lemon_ai import OfflineProvider, ToolResultMessage, offline_model


async def _echo(ctx: ToolContext) -> str:
    return f"echo: {ctx.arguments.get('text', '')}"


ECHO = Tool(
    name="echo",
    description="Echo text back",
    execute=_echo,
    parameters={"type": "object", "properties": {"text": {"type": "string"}},
                "required": ["text"]},
)  # fmt: skip


def test_registry_refuses_duplicates_bad_names_and_invalid_schemas() -> None:
    registry = ToolRegistry([ECHO])
    with pytest.raises(AgentUsageError, match="already registered"):
        registry.register(ECHO)
    with pytest.raises(AgentUsageError, match="name 'bad name' is invalid"):
        registry.register(Tool(name="bad name", description="", execute=_echo))
    with pytest.raises(AgentUsageError, match='"type": "object"'):
        registry.register(Tool(name="x", description="", execute=_echo,
                               parameters={"type": "string"}))  # fmt: skip
    with pytest.raises(AgentUsageError, match="invalid parameters schema"):
        registry.register(Tool(name="y", description="", execute=_echo,
                               parameters={"type": "object", "properties": 3}))  # fmt: skip
    assert registry.names() == ("echo",)
    assert "echo" in registry
    assert len(registry) == 1


def test_a_schema_is_checked_once_however_many_registries_hold_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jsonschema import validators

    checked: list[object] = []
    cls = validators.validator_for({})
    original = cls.check_schema

    def check(schema: object, **kw: Any) -> None:
        checked.append(schema)
        original(schema, **kw)

    monkeypatch.setattr(cls, "check_schema", check)
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 7331}}}
    for _ in range(3):  # a registry per run, as the coding executor builds them
        ToolRegistry([Tool(name="n", description="", execute=_echo, parameters=schema)])
    assert checked == [schema]
    broken = {"type": "object", "properties": {"n": 7331}}
    for _ in range(2):  # a broken schema is never remembered: refused every time
        with pytest.raises(AgentUsageError, match="invalid parameters schema"):
            ToolRegistry([Tool(name="n", description="", execute=_echo, parameters=broken)])


def test_validation_messages_name_the_argument() -> None:
    registry = ToolRegistry([ECHO])
    assert registry.validate("echo", {"text": "hi"}) is None
    assert registry.validate("echo", {}) == "(root): 'text' is a required property"
    assert registry.validate("echo", {"text": 5}) == "text: 5 is not of type 'string'"
    assert registry.validate("nope", {}) == "unknown tool 'nope'"


def _update(i: int) -> MessageUpdateEvent:
    from lemon_ai import TextDeltaEvent

    return MessageUpdateEvent(turn=1, event=TextDeltaEvent(index=0, delta=str(i)))


async def test_drop_updates_policy_drops_only_deltas_when_full() -> None:
    stream = EventStream(capacity=2, policy=OverflowPolicy.DROP_UPDATES)
    await stream.publish(_update(1))
    await stream.publish(_update(2))
    await stream.publish(_update(3))  # full: dropped
    lifecycle = asyncio.create_task(stream.publish(TurnStartEvent(turn=2)))  # waits for room
    await asyncio.sleep(0)
    assert not lifecycle.done()
    received = [await stream.__aiter__().__anext__()]
    await lifecycle
    stream.close()
    received += [event async for event in _rest(stream)]
    assert [e.type for e in received] == ["message_update", "message_update", "turn_start"]
    stats = stream.statistics()
    assert (stats.dropped, stats.producer_waits, stats.high_water) == (1, 1, 2)


async def _rest(stream: EventStream) -> Any:
    while True:
        try:
            yield await stream.__anext__()
        except StopAsyncIteration:
            return


async def test_block_policy_waits_for_the_consumer_and_loses_nothing() -> None:
    stream = EventStream(capacity=1)
    await stream.publish(_update(1))
    second = asyncio.create_task(stream.publish(_update(2)))
    await asyncio.sleep(0)
    assert not second.done(), "a full BLOCK stream makes the producer wait"
    iterator = stream.__aiter__()
    assert (await iterator.__anext__()).event.delta == "1"  # type: ignore[union-attr]
    await second
    stream.close()
    assert (await iterator.__anext__()).event.delta == "2"  # type: ignore[union-attr]
    with pytest.raises(StopAsyncIteration):
        await iterator.__anext__()
    with pytest.raises(AgentUsageError, match="one consumer"):
        stream.__aiter__()


@given(
    capacity=st.integers(1, 8),
    plan=st.lists(st.booleans(), max_size=60),
)
def test_block_stream_delivers_everything_in_order(capacity: int, plan: list[bool]) -> None:
    """Any interleaving of producer steps (True) and consumer steps (False) keeps order."""

    async def scenario() -> None:
        stream = EventStream(capacity=capacity)
        produced = sum(plan)

        async def produce() -> None:
            for i in range(produced):
                await stream.publish(_update(i))
            stream.close()

        producer = asyncio.create_task(produce())
        received: list[str] = []
        for step in plan:
            if step:
                await asyncio.sleep(0)
            elif stream.statistics().queued:
                received.append((await stream.__anext__()).event.delta)  # type: ignore[union-attr]
        async for event in _rest(stream):
            received.append(event.event.delta)  # type: ignore[union-attr]
        await producer
        assert received == [str(i) for i in range(produced)]
        assert stream.statistics().high_water <= capacity

    asyncio.run(scenario())


def test_abort_signal_runs_callbacks_once_and_keeps_the_first_reason() -> None:
    signal = AbortSignal()
    seen: list[str] = []
    remove = signal.add_callback(lambda: seen.append("a"))
    signal.add_callback(lambda: seen.append("b"))
    remove()
    signal.abort("first")
    signal.abort("second")
    assert signal.reason == "first"
    assert seen == ["b"]
    late: list[str] = []
    signal.add_callback(lambda: late.append("now"))
    assert late == ["now"]


def _offline_agent(**overrides: Any) -> AgentClass:
    config = AgentConfig(model=offline_model(), provider=OfflineProvider(),
                         tools=ToolRegistry([ECHO]), **overrides)  # fmt: skip
    return AgentClass(config)


async def test_offline_provider_exercises_tools_without_a_key() -> None:
    agent = _offline_agent()
    result = await agent.prompt('/tool echo {"text": "hello"}')
    assert result.outcome == "completed"
    assert result.turns == 2
    results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert results[0].content == "echo: hello"
    assert "tool `echo` returned:\necho: hello" in result.text
    plain = await agent.prompt("hello?")
    assert "offline" in plain.text


async def test_one_run_at_a_time_and_bounded_queues() -> None:
    agent = _offline_agent(steering_capacity=1, follow_up_capacity=1)
    async with agent.start("hi") as run:
        with pytest.raises(AgentBusyError):
            agent.start("again")
        async for _ in run:
            pass
    agent.steer("one")
    with pytest.raises(QueueFullError, match="steering queue is full"):
        agent.steer("two")
    agent.follow_up("one")
    with pytest.raises(QueueFullError, match="follow-up queue is full"):
        agent.follow_up("two")
    stats = agent.statistics()
    assert (stats.steering_queued, stats.follow_ups_queued) == (1, 1)


async def test_leaving_the_run_context_early_cancels_the_run() -> None:
    agent = _offline_agent(event_capacity=1)
    async with agent.start("/echo " + "word " * 200) as run:
        first = await run.__aiter__().__anext__()
        assert isinstance(first, AgentStartEvent)
    assert run.done
    assert not agent.running


def test_invalid_config_is_refused() -> None:
    with pytest.raises(AgentUsageError, match="max_tool_concurrency"):
        AgentConfig(model=offline_model(), provider=OfflineProvider(), max_tool_concurrency=0)


async def test_a_run_needs_something_to_answer() -> None:
    agent = _offline_agent()
    with pytest.raises(AgentUsageError, match="nothing to run"):
        agent.start()
    agent.follow_up("/echo queued")
    result = await agent.prompt()
    assert result.text == "queued"
