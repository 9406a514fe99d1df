"""The offline provider: plain about being offline, and tools through its documented syntax."""

from __future__ import annotations

from lemon_ai import (
    AssistantMessage,
    Context,
    OfflineProvider,
    ToolCallEndEvent,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
    complete,
    create_provider,
    offline_model,
)

TOOLS = (ToolSpec(name="read", description="Read a file"),
         ToolSpec(name="ls", description="List a directory"))  # fmt: skip


def ctx(prompt: str, *more: object) -> Context:
    messages = (UserMessage(content=prompt), *more)
    return Context(messages=messages, tools=TOOLS)  # type: ignore[arg-type]


async def test_says_it_is_offline_and_how_to_configure_a_model() -> None:
    message = await complete(OfflineProvider(), offline_model(), ctx("What is 2+2?"))
    assert "offline" in message.text
    assert "lemon setup" in message.text
    assert "/tool" in message.text
    assert message.stop_reason == "stop"
    assert message.cost.total == 0.0


async def test_tool_lines_become_parallel_tool_calls() -> None:
    provider = create_provider("offline")
    events = [e async for e in provider.stream(offline_model(), ctx(
        'please\n/tool read {"path": "README.md"}\n/tool ls'))]  # fmt: skip
    ends = [e.tool_call for e in events if isinstance(e, ToolCallEndEvent)]
    assert [(c.name, dict(c.arguments)) for c in ends] == [
        ("read", {"path": "README.md"}),
        ("ls", {}),
    ]
    assert len({c.id for c in ends}) == 2


async def test_tool_results_are_reported_back() -> None:
    first = await complete(OfflineProvider(), offline_model(), ctx("/tool ls {}"))
    (call,) = first.tool_calls
    result = ToolResultMessage(tool_call_id=call.id, tool_name="ls", content="a.txt")
    second = await complete(OfflineProvider(), offline_model(), ctx("/tool ls {}", first, result))
    assert "tool `ls` returned:\na.txt" in second.text
    assert isinstance(first, AssistantMessage)


async def test_mistakes_in_the_syntax_are_explained() -> None:
    unknown = await complete(OfflineProvider(), offline_model(), ctx("/tool rm {}"))
    assert "no tool 'rm' (available: ls, read)" in unknown.text
    bad = await complete(OfflineProvider(), offline_model(), ctx("/tool read {oops"))
    assert "not valid JSON" in bad.text
    assert not bad.tool_calls


async def test_echo_and_tool_listing() -> None:
    echoed = await complete(OfflineProvider(), offline_model(), ctx("/echo exactly\nthis"))
    assert echoed.text == "exactly\nthis"
    listing = await complete(OfflineProvider(), offline_model(), ctx("/tools"))
    assert "- read: Read a file" in listing.text
