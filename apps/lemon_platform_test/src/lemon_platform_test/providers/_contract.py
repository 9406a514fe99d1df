"""The provider contract kit: one test suite every lemon_ai provider passes.

Subclass :class:`ProviderContract` in a test module (the class name must start with ``Test``) and
define a ``provider_harness`` fixture that returns a :class:`ProviderHarness`::

    class TestMyProviderContract(ProviderContract):
        @pytest.fixture
        async def provider_harness(self, scripted_provider):
            sleeps = []

            async def record(delay):
                sleeps.append(delay)

            provider = MyProvider(retry=RetryPolicy(sleep=record, random=lambda: 0.0))
            base = scripted_provider.openai_base_url
            model = default_catalogue().resolve("openai:x", base_url=base)
            yield ProviderHarness(provider=provider, model=model, server=scripted_provider,
                                  retry_sleeps=sleeps)
            await provider.aclose()

A harness with a scripted server runs every test; one without (the offline provider) runs the
tests that make sense for a provider that cannot be told to fail, driving it with its own
documented syntax (``/echo``, ``/tool``).

The recorded-stream tests replay fixtures of real servers' quirks byte for byte
(``recordings/<wire>_<quirk>.sse``, see :class:`RecordedStream`) to the providers of that wire
(``openai_*`` to ``openai_completions``, ``anthropic_*`` to ``anthropic_messages``).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from lemon_ai import AssistantMessage as _Assistant
from lemon_ai import (
    Context,
    DoneEvent,
    ErrorEvent,
    ErrorKind,
    Model,
    Provider,
    StartEvent,
    StreamEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from lemon_platform_test.providers._script import (
    Gate,
    RecordedStream,
    ScriptedError,
    ScriptedToolCall,
    ScriptedTurn,
    recording_names,
)
from lemon_platform_test.providers._server import ScriptedProviderServer

__all__ = ["ProviderContract", "ProviderHarness"]


@dataclass(kw_only=True)
class ProviderHarness:
    """A provider under test, its model, and (for network providers) the scripted server.

    ``retry_sleeps`` must be the list the provider's ``RetryPolicy.sleep`` records into, so the
    kit can check backoff without waiting.
    """

    provider: Provider
    model: Model
    server: ScriptedProviderServer | None = None
    retry_sleeps: list[float] = field(default_factory=list)

    @property
    def scripted(self) -> bool:
        return self.server is not None

    def prepare_text(self, text: str) -> Context:
        """Arrange for the next response to be exactly ``text``; return the context to send."""
        if self.server is not None:
            self.server.script(ScriptedTurn(text=text))
            return Context(system_prompt="You are terse.", messages=(UserMessage(content="hi"),))
        return Context(messages=(UserMessage(content=f"/echo {text}"),))

    def prepare_tool_calls(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> Context:
        """Arrange for the next response to call these tools (in parallel)."""
        names = sorted({name for name, _ in calls})
        tools = tuple(
            ToolSpec(
                name=name,
                description=f"the {name} tool",
                parameters={"type": "object", "properties": {}, "additionalProperties": True},
            )
            for name in names
        )
        if self.server is not None:
            self.server.script(
                ScriptedTurn(
                    tool_calls=tuple(ScriptedToolCall(name=n, arguments=a) for n, a in calls)
                )
            )
            prompt = "use the tools"
        else:
            prompt = "\n".join(f"/tool {name} {json.dumps(args)}" for name, args in calls)
        return Context(messages=(UserMessage(content=prompt),), tools=tools)


async def collect(
    provider: Provider, model: Model, context: Context
) -> tuple[list[StreamEvent], _Assistant]:
    """All events of one stream, and the final (or partial) message."""
    events: list[StreamEvent] = []
    async with aclosing(provider.stream(model, context)) as stream:
        async for event in stream:
            events.append(event)
    terminal = events[-1]
    if isinstance(terminal, DoneEvent):
        return events, terminal.message
    assert isinstance(terminal, ErrorEvent), f"last event must be done or error, got {terminal}"
    return events, terminal.partial


def check_shape(events: list[StreamEvent]) -> None:
    """The structural contract of a stream (see lemon_ai.events)."""
    assert events, "a stream yields at least one event"
    terminals = [e for e in events if isinstance(e, DoneEvent | ErrorEvent)]
    assert len(terminals) == 1, f"exactly one done/error event, got {len(terminals)}"
    assert events[-1] is terminals[0], "the done/error event is the last one"
    if isinstance(events[0], StartEvent):
        assert not any(isinstance(e, StartEvent) for e in events[1:]), "one start event"
    else:
        assert isinstance(events[0], ErrorEvent), "a stream starts with start (or fails at once)"
    open_calls: dict[int, str] = {}
    for event in events:
        if isinstance(event, ToolCallStartEvent):
            assert event.index not in open_calls, "tool call index reused while open"
            open_calls[event.index] = event.id
        elif isinstance(event, ToolCallDeltaEvent):
            assert open_calls.get(event.index) == event.id, "delta for a tool call not started"
        elif isinstance(event, ToolCallEndEvent):
            assert open_calls.pop(event.index) == event.tool_call.id, "end of an unknown call"
    if isinstance(events[-1], DoneEvent):
        assert not open_calls, f"tool calls never ended: {open_calls}"


def _text(events: list[StreamEvent]) -> str:
    return "".join(e.delta for e in events if isinstance(e, TextDeltaEvent))


_WIRES: dict[str, str] = {"openai_completions": "openai", "anthropic_messages": "anthropic"}
"""The recorded-stream prefix of each wire protocol."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ProviderContract:
    """The provider contract (subclass it; see the module docstring)."""

    @pytest.fixture
    def provider_harness(self) -> ProviderHarness:
        raise NotImplementedError("define a provider_harness fixture in the subclass")

    # -- every provider -------------------------------------------------------------------------

    async def test_text_streams_between_start_and_done(
        self, provider_harness: ProviderHarness
    ) -> None:
        h = provider_harness
        events, message = await collect(h.provider, h.model, h.prepare_text("Hello, contract!"))
        check_shape(events)
        assert isinstance(events[0], StartEvent)
        assert isinstance(events[-1], DoneEvent)
        assert _text(events) == message.text == "Hello, contract!"
        assert message.stop_reason == "stop"
        assert message.provider == h.model.provider
        assert message.model == h.model.id

    async def test_text_deltas_name_a_text_block(self, provider_harness: ProviderHarness) -> None:
        h = provider_harness
        events, message = await collect(h.provider, h.model, h.prepare_text("one two three"))
        indices = {e.index for e in events if isinstance(e, TextDeltaEvent)}
        assert indices
        for index in indices:
            assert message.content[index].__class__.__name__ == "TextContent"

    async def test_parallel_tool_calls_round_trip(self, provider_harness: ProviderHarness) -> None:
        h = provider_harness
        calls: list[tuple[str, dict[str, Any]]] = [
            ("read", {"path": "a.txt"}),
            ("read", {"path": "b.txt", "limit": 2}),
            ("ls", {}),
        ]
        events, message = await collect(h.provider, h.model, h.prepare_tool_calls(calls))
        check_shape(events)
        assert isinstance(events[-1], DoneEvent)
        assert message.stop_reason == "tool_use"
        got = [(c.name, dict(c.arguments)) for c in message.tool_calls]
        assert got == calls
        assert len({c.id for c in message.tool_calls}) == len(calls), "tool call ids are unique"
        ends = [e.tool_call for e in events if isinstance(e, ToolCallEndEvent)]
        assert ends == list(message.tool_calls)
        for call in message.tool_calls:
            fragments = "".join(
                e.delta for e in events if isinstance(e, ToolCallDeltaEvent) and e.id == call.id
            )
            assert fragments == call.raw_arguments
            assert call.parse_error is None

    async def test_usage_and_cost_follow_the_model_prices(
        self, provider_harness: ProviderHarness
    ) -> None:
        h = provider_harness
        _, message = await collect(h.provider, h.model, h.prepare_text("count me"))
        usage = message.usage
        assert min(usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) >= 0
        assert usage.output_tokens > 0
        assert message.cost == h.model.cost(usage)

    async def test_tool_results_are_sent_back(self, provider_harness: ProviderHarness) -> None:
        h = provider_harness
        first = h.prepare_tool_calls([("ls", {"path": "."})])
        _, asked = await collect(h.provider, h.model, first)
        (call,) = asked.tool_calls
        followup = replace(
            first,
            messages=(
                *first.messages,
                asked,
                ToolResultMessage(tool_call_id=call.id, tool_name="ls", content="a.txt\nb.txt"),
            ),
        )
        if h.server is not None:
            h.server.script(ScriptedTurn(text="Two files."))
        events, message = await collect(h.provider, h.model, followup)
        assert isinstance(events[-1], DoneEvent)
        assert message.text
        if h.server is not None:
            sent = json.dumps(h.server.requests[-1].body)
            assert call.id in sent
            assert "b.txt" in sent
        else:
            assert "a.txt\nb.txt" in message.text

    async def test_closing_the_stream_early_is_clean(
        self, provider_harness: ProviderHarness
    ) -> None:
        h = provider_harness
        if h.server is not None:
            gate = Gate()  # hold the stream open so closing it is what ends it
            h.server.script(ScriptedTurn(text="a long answer " * 20, pause=gate, pause_after=5))
            context = Context(messages=(UserMessage(content="hi"),))
        else:
            context = h.prepare_text("a long answer " * 20)
        async with aclosing(h.provider.stream(h.model, context)) as stream:
            async for event in stream:
                if isinstance(event, TextDeltaEvent):
                    break
        if h.server is not None:
            assert await asyncio.to_thread(h.server.wait_cancelled, 1, 10.0)

    # -- scripted (network) providers -----------------------------------------------------------

    def _need_server(self, h: ProviderHarness) -> ScriptedProviderServer:
        if h.server is None:
            pytest.skip("needs a scripted server (this provider cannot be made to fail)")
        return h.server

    async def test_thinking_streams_as_thinking_deltas(
        self, provider_harness: ProviderHarness
    ) -> None:
        h = provider_harness
        server = self._need_server(h)
        server.script(ScriptedTurn(thinking="Let me think.", text="Done."))
        events, message = await collect(h.provider, h.model, Context(
            messages=(UserMessage(content="think"),)))  # fmt: skip
        thinking = "".join(e.delta for e in events if isinstance(e, ThinkingDeltaEvent))
        assert thinking == message.thinking == "Let me think."
        assert message.text == "Done."

    async def test_rate_limit_is_retried_after_retry_after(
        self, provider_harness: ProviderHarness
    ) -> None:
        h = provider_harness
        server = self._need_server(h)
        server.script(ScriptedError.rate_limited(retry_after=2), ScriptedTurn(text="ok"))
        events, message = await collect(h.provider, h.model, Context(
            messages=(UserMessage(content="hi"),)))  # fmt: skip
        assert isinstance(events[-1], DoneEvent)
        assert message.text == "ok"
        assert h.retry_sleeps == [2.0]
        assert len(server.requests) == 2

    @pytest.mark.parametrize(
        ("answer", "kind"),
        [
            (ScriptedError.unauthorized(), ErrorKind.AUTH),
            (ScriptedError.context_overflow(), ErrorKind.CONTEXT_OVERFLOW),
            (ScriptedError.bad_request("unknown field 'x'"), ErrorKind.BAD_REQUEST),
        ],
    )
    async def test_client_errors_are_classified_and_not_retried(
        self, provider_harness: ProviderHarness, answer: ScriptedError, kind: ErrorKind
    ) -> None:
        h = provider_harness
        server = self._need_server(h)
        server.script(answer)
        events, message = await collect(h.provider, h.model, Context(
            messages=(UserMessage(content="hi"),)))  # fmt: skip
        check_shape(events)
        terminal = events[-1]
        assert isinstance(terminal, ErrorEvent)
        assert terminal.error.kind is kind
        assert terminal.error.status == answer.status
        assert not terminal.error.retryable
        assert message.stop_reason == "error"
        assert len(server.requests) == 1
        assert h.retry_sleeps == []

    async def test_server_errors_are_retried_then_reported(
        self, provider_harness: ProviderHarness
    ) -> None:
        h = provider_harness
        server = self._need_server(h)
        server.script(*[ScriptedError.server_error(500)] * 3)
        events, _ = await collect(h.provider, h.model, Context(
            messages=(UserMessage(content="hi"),)))  # fmt: skip
        terminal = events[-1]
        assert isinstance(terminal, ErrorEvent)
        assert terminal.error.kind is ErrorKind.SERVER
        assert len(server.requests) == 3
        assert len(h.retry_sleeps) == 2

    async def test_mid_stream_disconnect_is_a_connection_error(
        self, provider_harness: ProviderHarness
    ) -> None:
        h = provider_harness
        server = self._need_server(h)
        server.script(ScriptedTurn(text="partial answer that breaks", chunk_size=4,
                                   disconnect_after=4))  # fmt: skip
        events, message = await collect(h.provider, h.model, Context(
            messages=(UserMessage(content="hi"),)))  # fmt: skip
        check_shape(events)
        terminal = events[-1]
        assert isinstance(terminal, ErrorEvent)
        assert terminal.error.kind is ErrorKind.CONNECTION
        assert message.stop_reason == "error"
        assert message.text == _text(events)
        assert len(server.requests) == 1, "no retry once output began"

    async def test_slow_stream_completes(self, provider_harness: ProviderHarness) -> None:
        h = provider_harness
        server = self._need_server(h)
        server.script(ScriptedTurn(text="slow but sure", chunk_size=3, delay=0.01))
        events, message = await collect(h.provider, h.model, Context(
            messages=(UserMessage(content="hi"),)))  # fmt: skip
        assert isinstance(events[-1], DoneEvent)
        assert message.text == "slow but sure"

    async def test_unreachable_server_is_a_connection_error(
        self, provider_harness: ProviderHarness
    ) -> None:
        h = provider_harness
        self._need_server(h)
        model = replace(h.model, base_url=f"http://127.0.0.1:{_free_port()}")
        events, _ = await collect(h.provider, model, Context(
            messages=(UserMessage(content="hi"),)))  # fmt: skip
        terminal = events[-1]
        assert isinstance(terminal, ErrorEvent)
        assert terminal.error.kind is ErrorKind.CONNECTION
        assert len(h.retry_sleeps) >= 1, "connection failures are retried"

    async def test_malformed_tool_arguments_surface_as_parse_errors(
        self, provider_harness: ProviderHarness
    ) -> None:
        h = provider_harness
        server = self._need_server(h)
        server.script(
            ScriptedTurn(tool_calls=(ScriptedToolCall(name="ls", arguments="{not json"),))
        )
        _, message = await collect(h.provider, h.model, Context(
            messages=(UserMessage(content="hi"),),
            tools=(ToolSpec(name="ls", description="list"),)))  # fmt: skip
        (call,) = message.tool_calls
        assert isinstance(call, ToolCall)
        assert call.parse_error is not None
        assert call.raw_arguments == "{not json"

    # -- recorded real-server streams -----------------------------------------------------------

    def _replay(
        self, h: ProviderHarness, quirk: str, *, chunk_size: int | None = None
    ) -> tuple[ScriptedProviderServer, str]:
        """Script the recorded stream ``<wire>_<quirk>`` for this provider's wire, or skip."""
        server = self._need_server(h)
        wire = _WIRES.get(h.model.api)
        name = f"{wire}_{quirk}"
        if wire is None or name not in recording_names():
            pytest.skip(f"no recorded {quirk!r} stream for the {h.model.api} wire")
        server.script(RecordedStream.load(name, chunk_size=chunk_size))
        return server, name

    @staticmethod
    def _ask(*tools: str) -> Context:
        specs = tuple(ToolSpec(name=t, description=f"the {t} tool") for t in tools)
        return Context(messages=(UserMessage(content="go"),), tools=specs)

    @pytest.mark.parametrize("chunk_size", [None, 5])
    async def test_recorded_streams_decode_the_same_in_any_chunking(
        self, provider_harness: ProviderHarness, chunk_size: int | None
    ) -> None:
        h = provider_harness
        server = self._need_server(h)
        wire = _WIRES.get(h.model.api, "")
        names = [n for n in recording_names() if n.startswith(f"{wire}_")]
        if not names:
            pytest.skip(f"no recorded streams for the {h.model.api} wire")
        for name in names:
            server.script(RecordedStream.load(name))
            _, whole = await collect(h.provider, h.model, self._ask("read", "ls", "write"))
            server.script(RecordedStream.load(name, chunk_size=chunk_size or 1))
            events, split = await collect(h.provider, h.model, self._ask("read", "ls", "write"))
            check_shape(events)
            assert isinstance(events[-1], DoneEvent), f"{name}: {events[-1]}"
            assert split == whole, name

    async def test_recorded_length_stop_inside_a_tool_call_is_a_truncated_call(
        self, provider_harness: ProviderHarness
    ) -> None:
        h = provider_harness
        wire = _WIRES.get(h.model.api)
        quirk = "length_in_tool_call" if wire == "openai" else "max_tokens_in_tool_use"
        self._replay(h, quirk)
        events, message = await collect(h.provider, h.model, self._ask("write"))
        check_shape(events)
        assert isinstance(events[-1], DoneEvent)
        assert message.stop_reason == "length", "a cut tool call is not a tool_use stop"
        cut = message.truncated_tool_call
        assert cut is not None
        assert (cut.name, cut.truncated) == ("write", True)
        assert cut.parse_error is not None
        assert "output-token limit" in cut.parse_error
        assert dict(cut.arguments) == {}
        assert cut.raw_arguments.startswith('{"path')

    async def test_recorded_parallel_calls_without_index_are_told_apart_by_id(
        self, provider_harness: ProviderHarness
    ) -> None:
        h = provider_harness
        self._replay(h, "parallel_tool_calls_without_index")
        events, message = await collect(h.provider, h.model, self._ask("read", "ls"))
        check_shape(events)
        assert message.stop_reason == "tool_use"
        got = [(c.name, dict(c.arguments), c.parse_error) for c in message.tool_calls]
        assert got == [
            ("read", {"path": "a.txt"}, None),
            ("read", {"path": "b.txt", "limit": 2}, None),
            ("ls", {}, None),
        ]
        assert [c.id for c in message.tool_calls] == [
            "function-call-11830911620364536040",
            "function-call-11830911620364536873",
            "function-call-11830911620364537291",
        ]

    async def test_recorded_arguments_sent_as_an_object_are_accepted(
        self, provider_harness: ProviderHarness
    ) -> None:
        h = provider_harness
        self._replay(h, "tool_arguments_as_object")
        events, message = await collect(h.provider, h.model, self._ask("read"))
        check_shape(events)
        assert isinstance(events[-1], DoneEvent), events[-1]
        (call,) = message.tool_calls
        assert (call.name, dict(call.arguments), call.parse_error) == (
            "read", {"path": "a.txt", "limit": 20}, None)  # fmt: skip
        assert json.loads(call.raw_arguments) == {"path": "a.txt", "limit": 20}

    async def test_recorded_refusal_is_the_answer(self, provider_harness: ProviderHarness) -> None:
        h = provider_harness
        self._replay(h, "refusal")
        events, message = await collect(h.provider, h.model, self._ask())
        assert isinstance(events[-1], DoneEvent)
        assert message.text == "I'm sorry, but I can't help with that."
        assert message.refusal == message.text
        assert _text(events) == message.text, "the refusal streams like answer text"

    async def test_recorded_think_tags_are_thinking_not_answer(
        self, provider_harness: ProviderHarness
    ) -> None:
        h = provider_harness
        self._replay(h, "think_tags_in_content")
        events, message = await collect(h.provider, h.model, self._ask())
        assert isinstance(events[-1], DoneEvent)
        assert message.text == "Hello! How can I help?"
        assert _text(events) == message.text
        assert "<think>" not in message.text
        assert "</think>" not in message.text
        thinking = "".join(e.delta for e in events if isinstance(e, ThinkingDeltaEvent))
        assert thinking == message.thinking
        assert message.thinking.strip() == "The user wants a greeting. Keep it short."

    async def test_recorded_reasoning_content_is_thinking_not_answer(
        self, provider_harness: ProviderHarness
    ) -> None:
        h = provider_harness
        self._replay(h, "reasoning_content")
        events, message = await collect(h.provider, h.model, self._ask())
        assert isinstance(events[-1], DoneEvent)
        assert message.text == "2 + 2 = 4."
        assert message.thinking == "The user asks for 2+2. That is 4."
        assert message.usage.output_tokens == 25

    @pytest.mark.parametrize("quirk", ["last_event_without_blank_line", "ends_after_stop_reason"])
    async def test_recorded_stream_that_ends_after_its_stop_reason_completes(
        self, provider_harness: ProviderHarness, quirk: str
    ) -> None:
        h = provider_harness
        self._replay(h, quirk)
        events, message = await collect(h.provider, h.model, self._ask())
        check_shape(events)
        assert isinstance(events[-1], DoneEvent), events[-1]
        assert message.text == "Hello! How can I help you today?"
        assert message.stop_reason == "stop"
        assert message.usage.output_tokens == 12

    async def test_recorded_thought_signature_is_sent_back_with_its_call(
        self, provider_harness: ProviderHarness
    ) -> None:
        h = provider_harness
        server, _ = self._replay(h, "gemini_thought_signature")
        first = self._ask("read")
        _, asked = await collect(h.provider, h.model, first)
        signed, unsigned = asked.tool_calls
        assert signed.signature == "CpcCAdHtim9Zr3oYs0H7bB2c+Q1t4lWm6Tj0eXx3vU8nKq5PZgRfA=="
        assert unsigned.signature == ""
        results = tuple(
            ToolResultMessage(tool_call_id=c.id, tool_name=c.name, content="text")
            for c in asked.tool_calls
        )
        server.script(ScriptedTurn(text="Both read."))
        followup = replace(first, messages=(*first.messages, asked, *results))
        events, _ = await collect(h.provider, h.model, followup)
        assert isinstance(events[-1], DoneEvent)
        sent = server.requests[-1].body["messages"]
        (assistant,) = [m for m in sent if m["role"] == "assistant"]
        first_call, second_call = assistant["tool_calls"]
        assert first_call["id"] == signed.id
        assert first_call["extra_content"] == {"google": {"thought_signature": signed.signature}}
        assert "extra_content" not in second_call

    @pytest.mark.parametrize("megabytes", [5])
    async def test_an_event_over_4_mib_is_accepted(
        self, provider_harness: ProviderHarness, megabytes: int
    ) -> None:
        h = provider_harness
        server = self._need_server(h)
        text = "z" * (megabytes * 1024 * 1024)
        server.script(ScriptedTurn(text=text, chunk_size=len(text)))
        events, message = await collect(h.provider, h.model, self._ask())
        assert isinstance(events[-1], DoneEvent), events[-1]
        assert message.text == text
