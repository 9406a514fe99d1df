"""Wire details of the HTTP providers, checked against the scripted server's recorded requests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from lemon_ai import (
    AnthropicMessagesProvider,
    AssistantMessage,
    Context,
    ErrorKind,
    OpenAICompletionsProvider,
    ProviderError,
    RetryPolicy,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
    complete,
    default_catalogue,
)
from lemon_platform_test.providers import (
    RecordedStream,
    ScriptedError,
    ScriptedProviderServer,
    ScriptedToolCall,
    ScriptedTurn,
)

PATH_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
TOOLS = (ToolSpec(name="read", description="Read a file", parameters=PATH_SCHEMA),)

CALL = ToolCall(id="call_1", name="read", arguments={"path": "a.txt"},
                raw_arguments='{"path": "a.txt"}')  # fmt: skip
HISTORY = Context(
    system_prompt="Be brief.",
    messages=(
        UserMessage(content="read a.txt"),
        AssistantMessage(content=(
            ThinkingContent(thinking="I should read it.", signature="sig-1"),
            TextContent(text="Reading."),
            CALL,
        ), stop_reason="tool_use"),
        ToolResultMessage(tool_call_id="call_1", tool_name="read", content="no such file",
                          is_error=True),
        UserMessage(content="never mind"),
    ),
    tools=TOOLS,
)  # fmt: skip


@pytest.fixture
def sleeps() -> list[float]:
    return []


def _retry(sleeps: list[float]) -> RetryPolicy:
    async def record(delay: float) -> None:
        sleeps.append(delay)

    return RetryPolicy(sleep=record, random=lambda: 0.0)


@pytest.fixture
async def openai(
    scripted_provider: ScriptedProviderServer, sleeps: list[float]
) -> AsyncIterator[OpenAICompletionsProvider]:
    provider = OpenAICompletionsProvider(api_key="sk-test", retry=_retry(sleeps))
    yield provider
    await provider.aclose()


@pytest.fixture
async def anthropic(
    scripted_provider: ScriptedProviderServer, sleeps: list[float]
) -> AsyncIterator[AnthropicMessagesProvider]:
    provider = AnthropicMessagesProvider(api_key="sk-ant-test", retry=_retry(sleeps))
    yield provider
    await provider.aclose()


async def test_openai_request_shape(
    scripted_provider: ScriptedProviderServer, openai: OpenAICompletionsProvider
) -> None:
    scripted_provider.script(ScriptedTurn(text="ok"))
    model = default_catalogue().resolve("openai:gpt-4o", base_url=scripted_provider.openai_base_url)
    await complete(openai, model, HISTORY, StreamOptions(max_tokens=100, temperature=0.2))
    (request,) = scripted_provider.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    body: dict[str, Any] = request.body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 100
    assert body["temperature"] == 0.2
    assert body["tools"][0]["function"]["name"] == "read"
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "user"]
    assistant = body["messages"][2]
    assert assistant["content"] == "Reading."
    assert assistant["tool_calls"][0]["id"] == "call_1"
    assert assistant["tool_calls"][0]["function"]["arguments"] == '{"path": "a.txt"}'
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1",
                                   "content": "Error: no such file"}  # fmt: skip


async def test_openai_compatible_servers_get_max_tokens(
    scripted_provider: ScriptedProviderServer, openai: OpenAICompletionsProvider
) -> None:
    scripted_provider.script(ScriptedTurn(text="ok"))
    model = default_catalogue().resolve(
        "ollama:llama3.2", base_url=scripted_provider.openai_base_url
    )
    await complete(openai, model, HISTORY, StreamOptions(max_tokens=64))
    assert scripted_provider.requests[0].body["max_tokens"] == 64


async def test_anthropic_request_shape(
    scripted_provider: ScriptedProviderServer, anthropic: AnthropicMessagesProvider
) -> None:
    scripted_provider.script(ScriptedTurn(text="ok"))
    model = default_catalogue().resolve(
        "anthropic:claude-sonnet-4-20250514", base_url=scripted_provider.url
    )
    await complete(anthropic, model, HISTORY, StreamOptions(thinking="medium", max_tokens=1000))
    (request,) = scripted_provider.requests
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    body: dict[str, Any] = request.body
    assert body["system"] == "Be brief."
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert body["max_tokens"] == 8192 + 1024, "max_tokens is raised to fit the thinking budget"
    assert "temperature" not in body
    assert body["tools"][0]["input_schema"]["properties"]["path"] == {"type": "string"}
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assistant = body["messages"][1]["content"]
    assert assistant[0] == {"type": "thinking", "thinking": "I should read it.",
                            "signature": "sig-1"}  # fmt: skip
    assert assistant[2] == {"type": "tool_use", "id": "call_1", "name": "read",
                            "input": {"path": "a.txt"}}  # fmt: skip
    merged = body["messages"][2]["content"]
    assert merged[0] == {"type": "tool_result", "tool_use_id": "call_1",
                         "content": "no such file", "is_error": True}  # fmt: skip
    assert merged[1] == {"type": "text", "text": "never mind"}


async def test_anthropic_thinking_signature_is_kept(
    scripted_provider: ScriptedProviderServer, anthropic: AnthropicMessagesProvider
) -> None:
    scripted_provider.script(ScriptedTurn(thinking="hmm", text="ok"))
    model = default_catalogue().resolve("anthropic:claude-3-5-haiku-20241022",
                                        base_url=scripted_provider.url)  # fmt: skip
    message = await complete(anthropic, model, Context(messages=(UserMessage(content="x"),)))
    thinking = message.content[0]
    assert isinstance(thinking, ThinkingContent)
    assert thinking.signature == "scripted-signature-1"


async def test_openai_cached_tokens_are_split_from_input(
    scripted_provider: ScriptedProviderServer, openai: OpenAICompletionsProvider
) -> None:
    scripted_provider.script(ScriptedTurn(text="ok", input_tokens=100, cached_tokens=900,
                                          output_tokens=10))  # fmt: skip
    model = default_catalogue().resolve("openai:gpt-4o", base_url=scripted_provider.openai_base_url)
    message = await complete(openai, model, Context(messages=(UserMessage(content="x"),)))
    assert (message.usage.input_tokens, message.usage.cache_read_tokens) == (100, 900)
    assert message.usage.prompt_tokens == 1000
    assert message.cost.total == pytest.approx((100 * 2.5 + 900 * 1.25 + 10 * 10.0) / 1e6)


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_in_stream_error_events_are_classified(
    scripted_provider: ScriptedProviderServer,
    openai: OpenAICompletionsProvider,
    anthropic: AnthropicMessagesProvider,
    wire: str,
) -> None:
    scripted_provider.script(
        ScriptedTurn(text="partial", chunk_size=2, error=ScriptedError.server_error(529),
                     error_after=3)
    )  # fmt: skip
    provider = openai if wire == "openai" else anthropic
    base = scripted_provider.openai_base_url if wire == "openai" else scripted_provider.url
    ref = "openai:gpt-4o" if wire == "openai" else "anthropic:claude-sonnet-4-20250514"
    model = default_catalogue().resolve(ref, base_url=base)
    with pytest.raises(ProviderError) as caught:
        await complete(provider, model, Context(messages=(UserMessage(content="x"),)))
    assert caught.value.kind is ErrorKind.SERVER
    assert "server had an error" in str(caught.value)


async def test_forbidden_is_auth_and_spent_quota_is_not_retried(
    scripted_provider: ScriptedProviderServer, openai: OpenAICompletionsProvider,
    sleeps: list[float],
) -> None:  # fmt: skip
    model = default_catalogue().resolve("openai:gpt-4o", base_url=scripted_provider.openai_base_url)
    context = Context(messages=(UserMessage(content="x"),))
    scripted_provider.script(ScriptedError(status=403, message="forbidden"))
    with pytest.raises(ProviderError) as forbidden:
        await complete(openai, model, context)
    assert forbidden.value.kind is ErrorKind.AUTH
    assert "check the API key" in str(forbidden.value)
    scripted_provider.script(
        ScriptedError(status=429, message="You exceeded your current quota",
                      openai_code="insufficient_quota")
    )  # fmt: skip
    with pytest.raises(ProviderError) as quota:
        await complete(openai, model, context)
    assert quota.value.kind is ErrorKind.RATE_LIMIT
    assert not quota.value.retryable
    assert sleeps == []


async def test_overloaded_anthropic_is_retried_with_backoff(
    scripted_provider: ScriptedProviderServer, anthropic: AnthropicMessagesProvider,
    sleeps: list[float],
) -> None:  # fmt: skip
    scripted_provider.script(ScriptedError.server_error(529), ScriptedError.server_error(529),
                             ScriptedTurn(text="finally"))  # fmt: skip
    model = default_catalogue().resolve("anthropic:claude-sonnet-4-20250514",
                                        base_url=scripted_provider.url)  # fmt: skip
    message = await complete(anthropic, model, Context(messages=(UserMessage(content="x"),)))
    assert message.text == "finally"
    assert sleeps == [0.5, 1.0]


async def test_an_unscripted_request_is_refused_clearly(
    scripted_provider: ScriptedProviderServer, openai: OpenAICompletionsProvider
) -> None:
    model = default_catalogue().resolve("openai:gpt-4o", base_url=scripted_provider.openai_base_url)
    with pytest.raises(ProviderError, match="no scripted answer left"):
        await complete(openai, model, Context(messages=(UserMessage(content="x"),)))


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_an_event_over_the_bound_is_a_clear_protocol_error(
    scripted_provider: ScriptedProviderServer, wire: str
) -> None:
    provider: OpenAICompletionsProvider | AnthropicMessagesProvider
    if wire == "openai":
        provider = OpenAICompletionsProvider(max_event_bytes=1024 * 1024)
        base = scripted_provider.openai_base_url
        ref = "openai:gpt-4o-mini"
    else:
        provider = AnthropicMessagesProvider(max_event_bytes=1024 * 1024)
        base, ref = scripted_provider.url, "anthropic:claude-sonnet-4-20250514"
    text = "z" * (2 * 1024 * 1024)
    scripted_provider.script(ScriptedTurn(text=text, chunk_size=len(text)))
    model = default_catalogue().resolve(ref, base_url=base)
    with pytest.raises(ProviderError) as caught:
        await complete(provider, model, Context(messages=(UserMessage(content="hi"),)))
    await provider.aclose()
    assert caught.value.kind is ErrorKind.PROTOCOL
    assert "larger than 1 MiB" in str(caught.value)


async def test_an_unexpected_field_type_is_a_protocol_error_not_a_traceback(
    scripted_provider: ScriptedProviderServer, openai: OpenAICompletionsProvider
) -> None:
    body = (
        b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":"not a list"}}]}\n\n'
        b"data: [DONE]\n\n"
    )
    scripted_provider.script(RecordedStream(body=body))
    model = default_catalogue().resolve(
        "openai:gpt-4o-mini", base_url=scripted_provider.openai_base_url
    )
    with pytest.raises(ProviderError) as caught:
        await complete(openai, model, Context(messages=(UserMessage(content="hi"),)))
    assert caught.value.kind is ErrorKind.PROTOCOL
    assert "cannot read" in str(caught.value)


async def test_a_truncated_call_is_sent_back_with_empty_arguments(
    scripted_provider: ScriptedProviderServer, openai: OpenAICompletionsProvider
) -> None:
    cut = ToolCall(id="call_9", name="read", raw_arguments='{"pa', truncated=True,
                   parse_error="cut")  # fmt: skip
    history = Context(messages=(
        UserMessage(content="read"),
        AssistantMessage(content=(cut,), stop_reason="length"),
        ToolResultMessage(tool_call_id="call_9", tool_name="read", content="cut", is_error=True),
    ))  # fmt: skip
    scripted_provider.script(ScriptedTurn(text="ok"))
    model = default_catalogue().resolve(
        "openai:gpt-4o-mini", base_url=scripted_provider.openai_base_url
    )
    await complete(openai, model, history)
    sent = scripted_provider.requests[0].body["messages"][1]["tool_calls"][0]
    assert sent["function"]["arguments"] == "{}", "invalid JSON never goes back to the server"


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_a_length_stop_after_complete_calls_is_an_ordinary_tool_use(
    scripted_provider: ScriptedProviderServer, wire: str
) -> None:
    provider: OpenAICompletionsProvider | AnthropicMessagesProvider
    if wire == "openai":
        provider = OpenAICompletionsProvider()
        base, ref = scripted_provider.openai_base_url, "openai:gpt-4o-mini"
    else:
        provider = AnthropicMessagesProvider()
        base, ref = scripted_provider.url, "anthropic:claude-sonnet-4-20250514"
    complete_call = ScriptedToolCall(name="read", arguments={"path": "a.txt"})
    empty_call = ScriptedToolCall(name="read", arguments="")
    scripted_provider.script(
        ScriptedTurn(tool_calls=(complete_call,), stop_reason="length"),
        ScriptedTurn(tool_calls=(complete_call, empty_call), stop_reason="length"),
    )
    model = default_catalogue().resolve(ref, base_url=base)
    context = Context(messages=(UserMessage(content="hi"),), tools=TOOLS)
    whole = await complete(provider, model, context)
    cut = await complete(provider, model, context)
    await provider.aclose()
    assert (whole.stop_reason, whole.truncated_tool_call) == ("tool_use", None)
    assert [c.truncated for c in whole.tool_calls] == [False]
    assert cut.stop_reason == "length", "a call whose arguments never began was cut"
    assert [c.truncated for c in cut.tool_calls] == [False, True]
    assert cut.truncated_tool_call is cut.tool_calls[1]


def _calls_stream(*fragments: dict[str, Any]) -> RecordedStream:
    frames = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}, "finish_reason": None}]}
        for fragment in fragments
    ]
    frames.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    body = "".join(f"data: {json.dumps(frame)}\n\n" for frame in frames) + "data: [DONE]\n\n"
    return RecordedStream(body=body.encode())


async def test_calls_that_all_say_index_0_are_told_apart_by_id(
    scripted_provider: ScriptedProviderServer, openai: OpenAICompletionsProvider
) -> None:
    def call(call_id: str, path: str) -> dict[str, Any]:
        arguments = json.dumps({"path": path})
        return {"index": 0, "id": call_id, "type": "function",
                "function": {"name": "read", "arguments": arguments}}  # fmt: skip

    scripted_provider.script(_calls_stream(call("call_a", "a.txt"), call("call_b", "b.txt")))
    model = default_catalogue().resolve(
        "openai:gpt-4o-mini", base_url=scripted_provider.openai_base_url
    )
    message = await complete(openai, model, Context(messages=(UserMessage(content="hi"),)))
    assert [(c.id, dict(c.arguments)) for c in message.tool_calls] == [
        ("call_a", {"path": "a.txt"}),
        ("call_b", {"path": "b.txt"}),
    ]


async def test_a_new_id_inside_unfinished_arguments_continues_the_call(
    scripted_provider: ScriptedProviderServer, openai: OpenAICompletionsProvider
) -> None:
    scripted_provider.script(_calls_stream(
        {"index": 0, "id": "call_1", "function": {"name": "read", "arguments": '{"pa'}},
        {"index": 0, "id": "call_1b", "function": {"arguments": 'th": "a.txt"}'}},
    ))  # fmt: skip
    model = default_catalogue().resolve(
        "openai:gpt-4o-mini", base_url=scripted_provider.openai_base_url
    )
    message = await complete(openai, model, Context(messages=(UserMessage(content="hi"),)))
    assert [(c.id, dict(c.arguments)) for c in message.tool_calls] == [
        ("call_1", {"path": "a.txt"})
    ]
