"""Compaction through the real gateway and the scripted provider (real HTTP on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from coding_agent import (
    SUMMARY_PREFIX,
    CodingAgentUsageError,
    CodingExecutor,
    CompactionReason,
    CompactionSettings,
    Compactor,
    ExecutorSettings,
    SessionNotFoundError,
    SessionStore,
    tool_result_cap,
)
from lemon_ai import (
    AssistantMessage,
    Cost,
    Message,
    Model,
    OfflineProvider,
    OpenAICompletionsProvider,
    RetryPolicy,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    default_catalogue,
    offline_model,
)
from lemon_core import ExecApprovals
from lemon_core.bus import Bus, Delivery, Subscription, run_topic
from lemon_core.events import Completion, EngineAction, Event, RunCompleted
from lemon_core.execution import ExecutionCommand, ResumeToken, ToolPolicy
from lemon_gateway import Gateway
from lemon_platform_test.providers import (
    Gate,
    ScriptedError,
    ScriptedProviderServer,
    ScriptedToolCall,
    ScriptedTurn,
)

SESSION = "agent:coder:main"
SUMMARY = "SUMMARY: the user's code word is PLUM; nothing else is pending."


class Watch:
    """One run's events from its bus topic, awaited (never polled by wall clock)."""

    def __init__(self, bus: Bus, run_id: str) -> None:
        delivery = Delivery(max_entries=10_000, bind_current_task=False)
        self.sub: Subscription = bus.subscribe(run_topic(run_id), delivery=delivery)
        self.events: list[Event] = []

    async def completion(self) -> Completion:
        while True:
            item = await asyncio.wait_for(self.sub.get(), 30)
            assert isinstance(item, Event), item
            self.events.append(item)
            if item.type == "run_completed":
                assert isinstance(item.payload, RunCompleted)
                return item.payload.completed

    def compactions(self) -> list[EngineAction]:
        return [
            e.payload
            for e in self.events
            if isinstance(e.payload, EngineAction) and e.payload.action.kind.value == "compaction"
        ]


@dataclass
class Env:
    bus: Bus
    gateway: Gateway
    executor: CodingExecutor
    server: ScriptedProviderServer
    home: Path
    cwd: Path

    async def run(
        self, run_id: str, prompt: str, resume: ResumeToken | None = None
    ) -> tuple[Completion, Watch]:
        key = ("resume", "lemon", resume.value) if resume else ("session", SESSION)
        command = ExecutionCommand(
            run_id=run_id,
            session_key=SESSION,
            prompt=prompt,
            conversation_key=key,
            cwd=str(self.cwd),
            resume=resume,
        )
        watch = Watch(self.bus, run_id)
        completion = await self.gateway.submit_execution(command)
        assert isinstance(completion, Completion)
        await watch.completion()
        return completion, watch

    def body(self, number: int) -> dict[str, Any]:
        body = self.server.requests[number].body
        assert isinstance(body, dict)
        return body

    def lines(self, session_id: str) -> list[dict[str, Any]]:
        path = self.home / "agent" / "sessions" / f"{session_id}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]


def _model(server: ScriptedProviderServer, *, window: int, max_tokens: int = 500) -> Model:
    model = default_catalogue().resolve("openai:gpt-4o-mini", base_url=server.openai_base_url)
    return replace(model, context_window=window, max_tokens=max_tokens)


@contextlib.asynccontextmanager
async def _env(
    tmp_path: Path, server: ScriptedProviderServer, *, window: int
) -> AsyncIterator[Env]:
    provider = OpenAICompletionsProvider(api_key="sk-test", retry=RetryPolicy(max_attempts=1))
    home, cwd = tmp_path / "home", tmp_path / "work"
    cwd.mkdir(parents=True)
    bus = Bus()
    executor = CodingExecutor(
        home=home,
        model=_model(server, window=window),
        provider=provider,
        approvals=ExecApprovals(bus),
        settings=ExecutorSettings(default_policy=ToolPolicy()),
    )
    try:
        async with Gateway(bus=bus, executor=executor) as gateway:
            yield Env(bus, gateway, executor, server, home, cwd)
    finally:
        await provider.aclose()


@pytest.fixture
async def small(tmp_path: Path, scripted_provider: ScriptedProviderServer) -> AsyncIterator[Env]:
    """A model with a 4,000-token window (3,500 usable: 500 reserved for the answer)."""
    async with _env(tmp_path, scripted_provider, window=4_000) as env:
        yield env


@pytest.fixture
async def large(tmp_path: Path, scripted_provider: ScriptedProviderServer) -> AsyncIterator[Env]:
    """gpt-4o-mini's own 128,000-token window."""
    async with _env(tmp_path, scripted_provider, window=128_000) as env:
        yield env


def _contents(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body["messages"]]


def _is_summary_request(body: dict[str, Any]) -> bool:
    return "You compact a coding session" in json.dumps(body)


LONG = "".join(f"line {n}: the quick brown fox jumps over the lazy dog. " for n in range(250))


async def test_a_session_that_would_overflow_is_compacted_and_the_run_succeeds(
    small: Env,
) -> None:
    env = small
    env.server.script(
        ScriptedTurn(text=LONG, chunk_size=4_000),  # about 4,000 tokens: above the window
        ScriptedTurn(text=SUMMARY),
        ScriptedTurn(text="The code word is PLUM."),
    )
    first, _ = await env.run("r1", "remember the code word PLUM, then tell me a long story")
    assert first.ok, first.error
    assert first.resume is not None
    token = ResumeToken.from_dict(first.resume)

    second, watch = await env.run("r2", "what is the code word?", resume=token)
    assert second.ok, second.error
    assert second.answer == "The code word is PLUM."
    assert len(env.server.requests) == 3
    assert _is_summary_request(env.body(1))
    assert "the quick brown fox" in json.dumps(env.body(1)), "the summariser saw the story"
    request = env.body(2)
    assert not _is_summary_request(request)
    assert "the quick brown fox" not in json.dumps(request), "the old turns were replaced"
    contents = _contents(request)
    assert contents[1] == SUMMARY_PREFIX + SUMMARY
    assert contents[-1] == "what is the code word?"
    # The summarisation request is part of the run's usage (12 input tokens each).
    assert second.usage is not None
    assert second.usage is not None
    assert second.usage.input_tokens == 24
    started, completed = watch.compactions()
    assert (started.phase, completed.phase) == ("started", "completed")
    assert started.action.id == completed.action.id
    assert completed.ok is True
    assert completed.message == SUMMARY
    assert completed.action.detail["reason"] == "threshold"
    assert completed.action.detail["tokens_after"] < completed.action.detail["tokens_before"]
    assert env.executor.statistics().compactions == 1


async def test_the_original_lines_stay_and_a_reload_gives_the_summary_and_the_tail(
    small: Env,
) -> None:
    env = small
    env.server.script(
        ScriptedTurn(text=LONG, chunk_size=4_000),
        ScriptedTurn(text=SUMMARY),
        ScriptedTurn(text="PLUM."),
        ScriptedTurn(text="You asked for the code word."),
    )
    first, _ = await env.run("r1", "remember PLUM and tell a long story")
    assert first.resume is not None
    token = ResumeToken.from_dict(first.resume)
    before = env.lines(token.value)
    second, _ = await env.run("r2", "the code word?", resume=token)
    assert second.ok, second.error

    lines = env.lines(token.value)
    assert lines[: len(before)] == before, "compaction only appends"
    assert LONG in json.dumps(lines), "the original answer is still on disk"
    kinds = [line.get("message", {}).get("role", line["type"]) for line in lines]
    assert kinds == ["session", "user", "assistant", "user", "compaction", "user", "assistant"]
    record = lines[4]
    assert record["summary"] == SUMMARY
    assert record["reason"] == "threshold"
    assert record["summarised"] == 2
    assert record["parent_id"] == lines[3]["id"]
    assert lines[5]["message"] == lines[3]["message"], "the kept tail is copied after it"
    assert [line.get("parent_id") for line in lines[1:]] == [None] + [x["id"] for x in lines[1:-1]]

    _, messages = await env.executor.sessions().load(token.value)
    assert [type(m).__name__ for m in messages] == [
        "UserMessage",
        "UserMessage",
        "AssistantMessage",
    ]
    assert messages[0] == UserMessage(content=SUMMARY_PREFIX + SUMMARY)
    assert messages[1] == UserMessage(content="the code word?")

    third, _ = await env.run("r3", "what did I ask?", resume=token)
    assert third.ok, third.error
    assert len(env.server.requests) == 4, "the compacted session fits: no second compaction"
    assert _contents(env.body(3))[1:] == [
        SUMMARY_PREFIX + SUMMARY,
        "the code word?",
        "PLUM.",
        "what did I ask?",
    ]


async def test_the_reported_prompt_size_triggers_compaction_and_copies_carry_no_usage(
    large: Env,
) -> None:
    env = large
    # Few characters, but the provider reported 127,400 prompt tokens: above the 127,500
    # usable (128,000 less the 500-token answer reserve) with the answer and the new prompt.
    env.server.script(
        ScriptedTurn(text="noted", input_tokens=127_400, output_tokens=200),
        ScriptedTurn(text=SUMMARY),
        ScriptedTurn(tool_calls=(ScriptedToolCall(id="c1", name="todo",
                                                  arguments={"action": "read"}),)),
        ScriptedTurn(text="PLUM."),
        ScriptedTurn(text="Still PLUM."),
    )  # fmt: skip
    first, _ = await env.run("r1", "remember PLUM")
    assert first.resume is not None
    token = ResumeToken.from_dict(first.resume)
    second, watch = await env.run("r2", "the code word?", resume=token)
    assert second.ok, second.error
    assert len(env.server.requests) == 4, "one compaction for the run's two model calls"
    assert _is_summary_request(env.body(1))
    assert len(watch.compactions()) == 2
    # The kept "noted" answer is copied after the compaction entry without its usage, so the
    # stale 127,400-token prompt size never triggers another compaction after a reload.
    lines = env.lines(token.value)
    noted = [line for line in lines if "noted" in json.dumps(line.get("message", {}))]
    assert [n["message"]["usage"]["input_tokens"] for n in noted] == [127_400, 0]
    third, _ = await env.run("r3", "and now?", resume=token)
    assert third.ok, third.error
    assert len(env.server.requests) == 5
    assert env.executor.statistics().compactions == 1


async def test_a_context_overflow_answer_compacts_once_and_retries_once(large: Env) -> None:
    env = large
    env.server.script(
        ScriptedTurn(text="hi there"),
        ScriptedError.context_overflow(),
        ScriptedTurn(text=SUMMARY),
        ScriptedTurn(text="PLUM."),
    )
    first, _ = await env.run("r1", "hello, the code word is PLUM")
    assert first.resume is not None
    second, watch = await env.run(
        "r2", "the code word?", resume=ResumeToken.from_dict(first.resume)
    )
    assert second.ok, second.error
    assert second.answer == "PLUM."
    assert len(env.server.requests) == 4
    assert _is_summary_request(env.body(2))
    retried = _contents(env.body(3))
    assert retried[1] == SUMMARY_PREFIX + SUMMARY
    assert retried[-1] == "the code word?"
    assert "hello, the code word is PLUM" not in retried
    _, completed = watch.compactions()
    assert completed.ok is True
    assert completed.action.detail["reason"] == "overflow"
    stats = env.executor.statistics()
    assert (stats.compactions, stats.compaction_retries) == (1, 1)


async def test_a_second_overflow_is_the_runs_error_not_a_loop(large: Env) -> None:
    env = large
    env.server.script(
        ScriptedTurn(text="hi there"),
        ScriptedError.context_overflow(),
        ScriptedTurn(text=SUMMARY),
        ScriptedError.context_overflow(),
    )
    first, _ = await env.run("r1", "hello")
    assert first.resume is not None
    second, _ = await env.run("r2", "again", resume=ResumeToken.from_dict(first.resume))
    assert not second.ok
    assert second.error is not None
    assert "context_overflow" in second.error
    assert len(env.server.requests) == 4, "one compaction and one retry, then the error"
    assert env.server.pending == 0


async def test_an_overflow_with_nothing_older_to_summarise_fails_without_a_summary(
    large: Env,
) -> None:
    env = large
    env.server.script(ScriptedError.context_overflow())
    completion, watch = await env.run("r1", "one huge prompt")
    assert not completion.ok
    assert completion.error is not None
    assert "context_overflow" in completion.error
    assert len(env.server.requests) == 1
    _, done = watch.compactions()
    assert done.ok is False
    assert "nothing to compact" in done.action.title


async def test_a_failed_summary_request_leaves_the_session_as_it_was(small: Env) -> None:
    env = small
    env.server.script(
        ScriptedTurn(text=LONG, chunk_size=4_000),
        ScriptedError.bad_request("summaries are not allowed here"),
        ScriptedError.context_overflow(),
    )
    first, _ = await env.run("r1", "tell a long story")
    assert first.resume is not None
    token = ResumeToken.from_dict(first.resume)
    second, watch = await env.run("r2", "more", resume=token)
    assert not second.ok
    assert second.error is not None
    assert "context_overflow" in second.error
    assert len(env.server.requests) == 3, "no second summary attempt after a failed one"
    _, failed = watch.compactions()
    assert failed.ok is False
    assert "bad_request" in (failed.message or "")
    assert "compaction" not in [line["type"] for line in env.lines(token.value)]


async def test_compact_on_demand_keeps_the_newest_exchange(large: Env) -> None:
    env = large
    env.server.script(
        ScriptedTurn(text=LONG, chunk_size=4_000),
        ScriptedTurn(text="It is sunny."),
        ScriptedTurn(text=SUMMARY),
    )
    first, _ = await env.run("r1", "the code word is PLUM")
    assert first.resume is not None
    token = ResumeToken.from_dict(first.resume)
    await env.run("r2", "how is the weather?", resume=token)
    before = env.lines(token.value)

    info = await env.executor.compact(token.value, instructions="keep the code word")
    assert info.compacted
    assert info.reason == "manual"
    assert info.summary == SUMMARY
    assert (info.messages_summarised, info.messages_kept) == (2, 2)
    assert info.tokens_after < info.tokens_before
    assert info.context_window == 128_000
    assert info.usage.input_tokens == 12
    assert _is_summary_request(env.body(2))
    assert "adds: keep the code word" in json.dumps(env.body(2))
    lines = env.lines(token.value)
    assert lines[: len(before)] == before
    _, messages = await env.executor.sessions().load(token.value)
    assert [m.content if isinstance(m, UserMessage) else m.text for m in messages] == [
        SUMMARY_PREFIX + SUMMARY,
        "how is the weather?",
        "It is sunny.",
    ]
    again = await env.executor.compact(token.value)
    assert not again.compacted
    assert "nothing to compact" in again.note
    assert len(env.server.requests) == 3
    assert env.executor.statistics().compactions == 1
    with pytest.raises(SessionNotFoundError):
        await env.executor.compact("no-such-session")


async def test_compact_refuses_a_session_a_run_is_using(large: Env) -> None:
    env = large
    gate = Gate()
    env.server.script(ScriptedTurn(text="first"), ScriptedTurn(text="slow", pause=gate))
    first, _ = await env.run("r1", "hello")
    assert first.resume is not None
    token = ResumeToken.from_dict(first.resume)
    command = ExecutionCommand(
        run_id="r2",
        session_key=SESSION,
        prompt="again",
        conversation_key=("resume", "lemon", token.value),
        cwd=str(env.cwd),
        resume=token,
    )
    handle = env.gateway.submit_execution(command)
    assert await gate.wait_reached_async()
    with pytest.raises(CodingAgentUsageError, match="in use by a running run"):
        await env.executor.compact(token.value)
    gate.open()
    assert (await handle).ok


def test_the_tool_result_cap_scales_with_the_window(
    scripted_provider: ScriptedProviderServer,
) -> None:
    settings = CompactionSettings()
    caps = [
        tool_result_cap(_model(scripted_provider, window=window), settings)
        for window in (1_000, 8_000, 128_000, 1_047_576)
    ]
    # 15% of the window at 3 characters a token, between 2,000 and 200,000 characters.
    assert caps == [2_000, 3_600, 57_600, 200_000]


async def test_a_tool_result_is_cut_to_the_windows_cap(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    server = scripted_provider
    text = "".join(f"{n:05d} {'x' * 93}\n" for n in range(300))  # 30,000 characters
    for window, whole in ((8_000, False), (128_000, True)):
        server.reset()
        async with _env(tmp_path / str(window), server, window=window) as env:
            (env.cwd / "big.txt").write_text(text)
            server.script(
                ScriptedTurn(tool_calls=(
                    ScriptedToolCall(id="c1", name="read", arguments={"path": "big.txt"}),)),
                ScriptedTurn(text="read it"),
            )  # fmt: skip
            completion, _ = await env.run("r1", "read big.txt")
            assert completion.ok, completion.error
            (result,) = [m for m in env.body(1)["messages"] if m["role"] == "tool"]
            cap = tool_result_cap(_model(server, window=window), CompactionSettings())
            assert len(result["content"]) <= cap
            assert ("00299 " in result["content"]) is whole


async def test_a_compaction_record_round_trips_through_the_store(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    transcript = await store.create(cwd=str(tmp_path))
    answer = AssistantMessage(
        content=(TextContent(text="old answer"),), usage=Usage(input_tokens=50, output_tokens=5)
    )
    await transcript.append([UserMessage(content="old question"), answer])
    kept = [UserMessage(content="new question")]
    await transcript.append(kept)
    await transcript.append_compaction(
        "the summary", kept, reason="manual", summarised=2, tokens_before=99
    )
    await transcript.append([AssistantMessage(content=(TextContent(text="new answer"),))])
    _, messages = await store.load(transcript.session_id)
    assert [m.content if isinstance(m, UserMessage) else m.text for m in messages] == [
        SUMMARY_PREFIX + "the summary",
        "new question",
        "new answer",
    ]
    reloaded, _ = await store.load(transcript.session_id)
    assert reloaded.last_entry_id == transcript.last_entry_id


async def test_a_compaction_mid_run_on_the_anthropic_wire_keeps_calls_with_their_results(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    from lemon_ai import AnthropicMessagesProvider

    server = scripted_provider
    provider = AnthropicMessagesProvider(api_key="sk-ant")
    model = default_catalogue().resolve("anthropic:claude-3-5-haiku-20241022", base_url=server.url)
    model = replace(model, context_window=3_000, max_tokens=500)
    cwd = tmp_path / "work"
    cwd.mkdir()
    for name in ("a", "b", "c"):
        (cwd / f"{name}.txt").write_text("".join(f"{name} {n:04d} {'y' * 40}\n" for n in range(60)))
    executor = CodingExecutor(home=tmp_path / "home", model=model, provider=provider)
    server.script(
        ScriptedTurn(tool_calls=tuple(
            ScriptedToolCall(id=f"t{name}", name="read", arguments={"path": f"{name}.txt"})
            for name in "abc"
        )),
        ScriptedTurn(text=SUMMARY),
        ScriptedTurn(text="read all three"),
    )  # fmt: skip
    bus = Bus()
    watch = Watch(bus, "r1")
    try:
        async with Gateway(bus=bus, executor=executor) as gateway:
            completion = await gateway.submit_execution(
                ExecutionCommand(
                    run_id="r1",
                    session_key=SESSION,
                    prompt="read a.txt, b.txt and c.txt",
                    conversation_key=("session", SESSION),
                    cwd=str(cwd),
                )
            )
            await watch.completion()
    finally:
        await provider.aclose()
    assert completion.ok, completion.error
    assert len(server.requests) == 3
    assert _is_summary_request(server.requests[1].body)
    messages = server.requests[2].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[0]["content"][0]["text"] == SUMMARY_PREFIX + SUMMARY
    calls = [b["id"] for b in messages[1]["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for b in messages[2]["content"] if b["type"] == "tool_result"]
    assert calls == results == ["ta", "tb", "tc"]
    assert completion.resume is not None
    path = tmp_path / "home" / "agent" / "sessions" / f"{completion.resume['value']}.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    kinds = [line.get("message", {}).get("role", line["type"]) for line in lines]
    tool_turn = ["assistant", "tool_result", "tool_result", "tool_result"]
    assert kinds == ["session", "user", *tool_turn, "compaction", *tool_turn, "assistant"]
    assert watch.compactions()[-1].ok is True


def _exchange(draw: st.DrawFn, index: int) -> list[Message]:
    """One user message and the assistant's turns: tool batches (each call answered) and a
    final text answer (sometimes missing: the conversation may end on tool results)."""
    size = st.integers(min_value=0, max_value=3_000)
    out: list[Message] = [UserMessage(content=f"q{index} " + "u" * draw(size))]
    for batch in range(draw(st.integers(min_value=0, max_value=2))):
        calls = tuple(
            ToolCall(id=f"c{index}_{batch}_{n}", name="read", arguments={"path": f"f{n}"})
            for n in range(draw(st.integers(min_value=1, max_value=3)))
        )
        out.append(
            AssistantMessage(
                content=(TextContent(text="t" * draw(size)), *calls),
                stop_reason="tool_use",
                usage=Usage(input_tokens=draw(st.integers(min_value=0, max_value=5_000))),
            )
        )
        out.extend(
            ToolResultMessage(tool_call_id=c.id, tool_name="read", content="r" * draw(size))
            for c in calls
        )
    if draw(st.booleans()):
        out.append(AssistantMessage(content=(TextContent(text="a" * draw(size)),)))
    return out


@st.composite
def _conversations(draw: st.DrawFn) -> list[Message]:
    count = draw(st.integers(min_value=1, max_value=6))
    return [m for index in range(count) for m in _exchange(draw, index)]


@settings(max_examples=60, deadline=None)
@given(
    _conversations(),
    st.sampled_from(["threshold", "overflow", "manual"]),
    st.integers(min_value=2_000, max_value=40_000),
)
def test_a_compacted_view_is_a_valid_conversation_and_is_what_a_reload_gives(
    messages: list[Message], reason: CompactionReason, window: int
) -> None:
    model = replace(offline_model(), context_window=window)

    async def scenario(directory: Path) -> None:
        store = SessionStore(directory)
        transcript = await store.create(cwd=str(directory))
        await transcript.append(messages)
        compactor = Compactor(
            model=model,
            provider=OfflineProvider(),
            transcript=transcript,
            settings=CompactionSettings(),
        )
        info = await compactor.compact(messages, reason=reason)
        view = compactor.view(messages)
        _, loaded = await store.load(transcript.session_id)
        event("compacted" if info.compacted else "nothing to compact")
        if not info.compacted:
            assert info.note
            assert view == tuple(messages)
            assert loaded == messages
            return
        assert isinstance(view[0], UserMessage)
        assert view[0].content.startswith(SUMMARY_PREFIX)
        assert view[-1] == messages[-1], "the newest message is always kept"
        assert not isinstance(view[1], ToolResultMessage), "no result without its call"
        called: set[str] = set()
        for message in view[1:]:
            if isinstance(message, AssistantMessage):
                called |= {c.id for c in message.tool_calls}
            elif isinstance(message, ToolResultMessage):
                assert message.tool_call_id in called
        assert info.messages_summarised + info.messages_kept == len(messages)
        assert len(loaded) == len(view)
        for got, shown in zip(loaded, view, strict=True):
            if isinstance(shown, AssistantMessage):
                assert got == replace(shown, usage=Usage(), cost=Cost())
            else:
                assert got == shown

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp)))


async def test_a_run_cancelled_during_the_summary_request_keeps_a_valid_transcript(
    small: Env,
) -> None:
    env = small
    gate = Gate()
    env.server.script(
        ScriptedTurn(text=LONG, chunk_size=4_000),
        ScriptedTurn(text=SUMMARY, pause=gate, pause_after=2),
    )
    first, _ = await env.run("r1", "tell a long story")
    assert first.resume is not None
    token = ResumeToken.from_dict(first.resume)
    command = ExecutionCommand(
        run_id="r2",
        session_key=SESSION,
        prompt="and then?",
        conversation_key=("resume", "lemon", token.value),
        cwd=str(env.cwd),
        resume=token,
    )
    handle = env.gateway.submit_execution(command)
    assert await gate.wait_reached_async(), "the summary request is streaming"
    assert env.gateway.cancel("r2")
    completion = await handle
    assert not completion.ok
    assert await asyncio.to_thread(env.server.wait_cancelled, 1, 10.0)
    gate.open()
    kinds = [line.get("message", {}).get("role", line["type"]) for line in env.lines(token.value)]
    assert kinds == ["session", "user", "assistant", "user"], "the prompt once, no compaction"
    _, messages = await env.executor.sessions().load(token.value)
    assert [type(m).__name__ for m in messages] == [
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
    ]
