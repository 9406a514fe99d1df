"""The coding executor through the real gateway, against the scripted provider (real HTTP)."""

from __future__ import annotations

import asyncio
import json
import os
import select
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from coding_agent import CodingExecutor, ExecutorSettings, resolve_model
from lemon_ai import OpenAICompletionsProvider, RetryPolicy, default_catalogue
from lemon_core import ExecApprovals
from lemon_core.bus import Bus, Delivery, Subscription, run_topic
from lemon_core.events import Completion, Delta, EngineAction, ErrorCode, Event, RunCompleted
from lemon_core.execution import ExecutionCommand, ResumeToken, ToolPolicy
from lemon_gateway import Gateway, validate_executor
from lemon_platform_test.providers import (
    Gate,
    ScriptedError,
    ScriptedProviderServer,
    ScriptedToolCall,
    ScriptedTurn,
)

SESSION = "agent:coder:main"


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs 5 s after it was killed (waits for the exit notification)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        readable, _, _ = select.select([fd], [], [], 5.0)
    finally:
        os.close(fd)
    return not readable


class Watch:
    """One run's events from its bus topic, awaited (never polled by wall clock)."""

    def __init__(self, bus: Bus, run_id: str) -> None:
        delivery = Delivery(max_entries=10_000, bind_current_task=False)
        self.sub: Subscription = bus.subscribe(run_topic(run_id), delivery=delivery)
        self.events: list[Event] = []

    async def until(self, predicate: Callable[[Event], bool]) -> Event:
        for event in self.events:
            if predicate(event):
                return event
        while True:
            item = await asyncio.wait_for(self.sub.get(), 30)
            assert isinstance(item, Event), item
            self.events.append(item)
            if predicate(item):
                return item

    async def completion(self) -> Completion:
        event = await self.until(lambda e: e.type == "run_completed")
        assert isinstance(event.payload, RunCompleted)
        return event.payload.completed

    def actions(self) -> list[EngineAction]:
        return [e.payload for e in self.events if isinstance(e.payload, EngineAction)]

    def text(self) -> str:
        return "".join(e.payload.text for e in self.events if isinstance(e.payload, Delta))


@dataclass
class Env:
    bus: Bus
    gateway: Gateway
    executor: CodingExecutor
    approvals: ExecApprovals
    server: ScriptedProviderServer
    home: Path
    cwd: Path
    sleeps: list[float]

    def command(self, run_id: str, prompt: str, **kw: Any) -> ExecutionCommand:
        key = ("resume", "lemon", kw["resume"].value) if kw.get("resume") else ("session", SESSION)
        return ExecutionCommand(
            run_id=run_id,
            session_key=SESSION,
            prompt=prompt,
            conversation_key=key,
            cwd=str(self.cwd),
            **kw,
        )

    async def run(self, run_id: str, prompt: str, **kw: Any) -> tuple[Completion, Watch]:
        watch = Watch(self.bus, run_id)
        completion = await self.gateway.submit_execution(self.command(run_id, prompt, **kw))
        assert isinstance(completion, Completion)
        await watch.completion()
        return completion, watch

    def body(self, number: int) -> str:
        return json.dumps(self.server.requests[number].body)


@pytest.fixture
async def env(tmp_path: Path, scripted_provider: ScriptedProviderServer) -> AsyncIterator[Env]:
    sleeps: list[float] = []

    async def record(delay: float) -> None:
        sleeps.append(delay)

    provider = OpenAICompletionsProvider(
        api_key="sk-test", retry=RetryPolicy(sleep=record, random=lambda: 0.0)
    )
    model = default_catalogue().resolve(
        "openai:gpt-4o-mini", base_url=scripted_provider.openai_base_url
    )
    home, cwd = tmp_path / "home", tmp_path / "work"
    cwd.mkdir()
    bus = Bus()
    approvals = ExecApprovals(bus)
    executor = CodingExecutor(
        home=home,
        model=model,
        provider=provider,
        approvals=approvals,
        settings=ExecutorSettings(default_policy=ToolPolicy()),
    )
    async with Gateway(bus=bus, executor=executor) as gateway:
        yield Env(bus, gateway, executor, approvals, scripted_provider, home, cwd, sleeps)
    await provider.aclose()


def _transcript(env: Env, session_id: str) -> list[dict[str, Any]]:
    path = env.home / "agent" / "sessions" / f"{session_id}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_entry_point_names_the_coding_executor() -> None:
    status = validate_executor()
    assert status.ready, status.reason
    assert isinstance(status.executor, CodingExecutor)


async def test_multi_turn_run_with_parallel_tool_calls(env: Env) -> None:
    (env.cwd / "notes.txt").write_text("alpha\nbeta\n")
    env.server.script(
        ScriptedTurn(text="Looking. ", tool_calls=(
            ScriptedToolCall(id="c1", name="read", arguments={"path": "notes.txt"}),
            ScriptedToolCall(id="c2", name="bash", arguments={"command": "echo hi"}),
            ScriptedToolCall(id="c3", name="write", arguments={"path": "out.txt",
                                                               "content": "done\n"}),
        )),
        ScriptedTurn(text="All done.", input_tokens=30, output_tokens=5),
    )  # fmt: skip
    completion, watch = await env.run("r1", "summarise notes")
    assert completion.ok, completion.error
    assert completion.answer == "All done."
    assert completion.engine == "lemon"
    assert completion.resume is not None
    assert completion.resume["engine"] == "lemon"
    assert completion.usage is not None
    assert completion.usage.input_tokens == 12 + 30
    assert completion.usage.output_tokens == 7 + 5
    assert completion.usage.model == "openai:gpt-4o-mini"
    assert watch.text() == "Looking. All done."
    started = {a.action.id: a.action.kind.value for a in watch.actions() if a.phase == "started"}
    assert started == {"c1": "tool", "c2": "command", "c3": "file_change"}
    done = {a.action.id: a.ok for a in watch.actions() if a.phase == "completed"}
    assert done == {"c1": True, "c2": True, "c3": True}
    assert (env.cwd / "out.txt").read_text() == "done\n"
    second = env.body(1)
    assert "alpha" in second
    assert "[exit code 0]" in second
    lines = _transcript(env, completion.resume["value"])
    assert lines[0]["type"] == "session"
    assert lines[0]["id"] == completion.resume["value"]
    roles = [line["message"]["role"] for line in lines[1:]]
    assert roles == ["user", "assistant", "tool_result", "tool_result", "tool_result", "assistant"]
    assert [line["parent_id"] for line in lines[1:]] == [None] + [x["id"] for x in lines[1:-1]]


async def test_a_tool_error_is_returned_to_the_model(env: Env) -> None:
    env.server.script(
        ScriptedTurn(tool_calls=(
            ScriptedToolCall(id="c1", name="read", arguments={"path": "missing.txt"}),)),
        ScriptedTurn(text="The file is missing."),
    )  # fmt: skip
    completion, watch = await env.run("r1", "read it")
    assert completion.ok
    (end,) = [a for a in watch.actions() if a.phase == "completed"]
    assert end.ok is False
    assert "missing.txt" in (end.message or "")
    assert "missing.txt" in env.body(1)


async def test_abort_mid_stream_cancels_the_provider_stream(env: Env) -> None:
    gate = Gate()
    env.server.script(
        ScriptedTurn(text="This answer is cut off " * 5, chunk_size=4, pause=gate, pause_after=4)
    )
    watch = Watch(env.bus, "r1")
    handle = env.gateway.submit_execution(env.command("r1", "talk"))
    await watch.until(lambda e: e.type == "delta")
    assert await gate.wait_reached_async()
    assert env.gateway.cancel("r1", "user pressed stop")
    completion = await handle
    assert not completion.ok
    assert completion.error_code is ErrorCode.CANCELLED
    assert completion.answer
    assert "This answer is cut off".startswith(completion.answer[:8])
    assert await asyncio.to_thread(env.server.wait_cancelled, 1, 10.0)
    gate.open()
    # What was said is in the transcript: the prompt and the partial answer.
    assert completion.resume is not None
    lines = _transcript(env, completion.resume["value"])
    assert [line["message"]["role"] for line in lines[1:]] == ["user", "assistant"]
    assert lines[2]["message"]["stop_reason"] == "aborted"


async def test_abort_mid_tool_kills_the_bash_process_group(env: Env) -> None:
    command = "echo $$ > sh.pid; sleep 60 & echo $! > bg.pid; echo ready; wait"
    env.server.script(
        ScriptedTurn(tool_calls=(
            ScriptedToolCall(id="c1", name="bash", arguments={"command": command}),))
    )  # fmt: skip
    watch = Watch(env.bus, "r1")
    handle = env.gateway.submit_execution(env.command("r1", "run it"))
    await watch.until(
        lambda e: isinstance(e.payload, EngineAction) and "ready" in (e.payload.message or "")
    )
    assert env.gateway.cancel("r1")
    completion = await handle
    assert completion.error_code is ErrorCode.CANCELLED
    for name in ("sh.pid", "bg.pid"):
        assert not _alive(int((env.cwd / name).read_text()))
    assert completion.resume is not None
    roles = [x["message"]["role"] for x in _transcript(env, completion.resume["value"])[1:]]
    assert roles[:2] == ["user", "assistant"]


async def test_retry_after_a_429_honours_retry_after(env: Env) -> None:
    env.server.script(ScriptedError.rate_limited(retry_after=1.5), ScriptedTurn(text="hi"))
    completion, _ = await env.run("r1", "hello")
    assert completion.ok
    assert completion.answer == "hi"
    assert env.sleeps == [1.5]
    assert len(env.server.requests) == 2


async def test_context_overflow_is_classified(env: Env) -> None:
    env.server.script(ScriptedError.context_overflow())
    completion, _ = await env.run("r1", "a very long prompt")
    assert not completion.ok
    assert completion.error is not None
    assert "context_overflow" in completion.error
    assert completion.error_code is ErrorCode.CONTEXT_OVERFLOW
    assert env.sleeps == []


async def test_a_session_resumes_across_two_runs_through_the_gateway(env: Env) -> None:
    env.server.script(
        ScriptedTurn(text="Nice to meet you, Ada."),
        ScriptedTurn(text="Your name is Ada."),
    )
    first, _ = await env.run("r1", "my name is Ada")
    assert first.ok
    assert first.resume is not None
    token = ResumeToken.from_dict(first.resume)
    assert token.is_native
    assert env.gateway.chat_state is not None
    assert await env.gateway.chat_state.resume_token(SESSION) == token
    second, _ = await env.run("r2", "what is my name?", resume=token)
    assert second.ok, second.error
    assert second.resume == first.resume
    body = env.server.requests[1].body
    contents = [m.get("content") for m in body["messages"]]
    assert "my name is Ada" in contents
    assert "Nice to meet you, Ada." in contents
    assert contents[-1] == "what is my name?"
    roles = [x["message"]["role"] for x in _transcript(env, token.value)[1:]]
    assert roles == ["user", "assistant", "user", "assistant"]


async def test_a_corrupt_transcript_fails_an_explicit_resume_clearly(env: Env) -> None:
    env.server.script(ScriptedTurn(text="first"), ScriptedTurn(text="fresh"))
    first, _ = await env.run("r1", "hello")
    assert first.resume is not None
    token = ResumeToken.from_dict(first.resume)
    path = env.home / "agent" / "sessions" / f"{token.value}.jsonl"
    original = path.read_bytes()
    # JSON, but not a valid record (damage or a newer format, not a torn write): refused.
    path.write_bytes(original + b'{"type": "message", "id": "broken"}\n')
    corrupted = path.read_bytes()

    explicit, _ = await env.run("r2", "continue", resume=token)
    assert not explicit.ok
    assert explicit.error is not None
    assert "corrupt_transcript" in explicit.error
    assert "line 4" in explicit.error
    assert path.read_bytes() == corrupted, "a corrupt transcript is left untouched"

    automatic, watch = await env.run("r3", "continue", resume=token, resume_mode="auto")
    assert automatic.ok
    assert automatic.answer == "fresh"
    assert automatic.resume is not None
    assert automatic.resume["value"] != token.value
    (note,) = [a for a in watch.actions() if a.action.kind.value == "note"]
    assert "started a new session" in note.action.title
    assert path.read_bytes() == corrupted
    stats = env.executor.statistics()
    assert (stats.runs_started, stats.runs_ok, stats.runs_failed, stats.runs_running) == (
        3,
        2,
        1,
        0,
    )
    assert (stats.sessions_created, stats.sessions_resumed, stats.resumes_started_fresh) == (
        2,
        0,
        1,
    )


async def test_a_torn_last_line_is_quarantined_and_the_session_continues(env: Env) -> None:
    env.server.script(
        ScriptedTurn(text="Nice to meet you, Ada."), ScriptedTurn(text="Your name is Ada.")
    )
    first, _ = await env.run("r1", "my name is Ada")
    assert first.resume is not None
    token = ResumeToken.from_dict(first.resume)
    path = env.home / "agent" / "sessions" / f"{token.value}.jsonl"
    complete = path.read_bytes()
    torn = b'{"type":"message","id":"0badf00d","parent_id":null,"timestamp":1,"mess'
    path.write_bytes(complete + torn)  # a crash in the middle of the next append

    for mode in ("explicit", "auto"):
        if mode == "auto":  # a second resume of the repaired file: nothing left to report
            env.server.script(ScriptedTurn(text="Still Ada."))
        meta = {"resume_mode": "auto"} if mode == "auto" else {}
        completion, watch = await env.run(f"r-{mode}", "what is my name?", resume=token, meta=meta)
        assert completion.ok, completion.error
        assert completion.resume == first.resume, "the same session continues"
        notes = [a for a in watch.actions() if a.action.kind.value == "note"]
        if mode == "explicit":
            (note,) = notes
            assert "was recovered" in note.action.title
            assert "last line was cut short" in note.action.title
            assert f"{token.value}.jsonl.torn" in note.action.title
        else:
            assert notes == []
    contents = [m.get("content") for m in env.server.requests[1].body["messages"]]
    assert "my name is Ada" in contents
    assert "Nice to meet you, Ada." in contents
    assert (path.parent / f"{token.value}.jsonl.torn").read_bytes() == torn + b"\n"
    assert path.read_bytes().startswith(complete)
    roles = [x["message"]["role"] for x in _transcript(env, token.value)[1:]]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]
    stats = env.executor.statistics()
    assert (stats.sessions_resumed, stats.resumes_started_fresh, stats.transcripts_repaired) == (
        2, 0, 1)  # fmt: skip


async def test_a_missing_transcript_fails_an_explicit_resume(env: Env) -> None:
    completion, _ = await env.run("r1", "continue", resume=ResumeToken.native("nosuchsession"))
    assert not completion.ok
    assert completion.error is not None
    assert "session_not_found" in completion.error


async def test_the_offline_default_runs_tools_without_a_key(tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "work"
    cwd.mkdir()
    (cwd / "hello.txt").write_text("hi\n")
    bus = Bus()
    executor = CodingExecutor(environ={"LEMON_HOME": str(home)})
    async with Gateway(bus=bus, executor=executor) as gateway:
        watch = Watch(bus, "r1")
        completion = await gateway.submit_execution(
            ExecutionCommand(run_id="r1", session_key=SESSION, prompt='/tool ls {"path": "."}',
                             conversation_key=("session", SESSION), cwd=str(cwd))
        )  # fmt: skip
    await watch.completion()
    assert completion.ok, completion.error
    assert completion.usage is not None
    assert completion.usage.model == "offline:offline"
    assert "hello.txt" in (completion.answer or "")
    assert [a.action.kind.value for a in watch.actions() if a.phase == "started"] == ["tool"]
    assert executor.home == home


async def test_concurrent_runs_keep_their_own_workspace_and_todos(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    provider = OpenAICompletionsProvider(api_key="sk-test")
    model = default_catalogue().resolve(
        "openai:gpt-4o-mini", base_url=scripted_provider.openai_base_url
    )
    executor = CodingExecutor(home=tmp_path / "home", model=model, provider=provider,
                              settings=ExecutorSettings(default_policy=ToolPolicy()))  # fmt: skip
    gate = Gate()
    todo = {"action": "write", "todos": [{"content": "only in a"}]}
    scripted_provider.script(
        ScriptedTurn(tool_calls=(ScriptedToolCall(id="a1", name="todo", arguments=todo),)),
        ScriptedTurn(text="a paused", pause=gate, pause_after=1),
        ScriptedTurn(tool_calls=(
            ScriptedToolCall(id="b1", name="ls", arguments={"path": "."}),
            ScriptedToolCall(id="b2", name="todo", arguments={"action": "read"}),
        )),
        ScriptedTurn(text="b done"),
    )  # fmt: skip
    dirs = {}
    for name in ("a", "b"):
        dirs[name] = tmp_path / name
        dirs[name].mkdir()
        (dirs[name] / f"only_{name}.txt").write_text(name)
    bus = Bus()
    try:
        async with Gateway(bus=bus, executor=executor) as gateway:

            def submit(name: str) -> Any:
                key = f"agent:coder:{name}"
                return gateway.submit_execution(
                    ExecutionCommand(run_id=name, session_key=key, prompt="go",
                                     conversation_key=("session", key), cwd=str(dirs[name]))
                )  # fmt: skip

            first = submit("a")
            assert await gate.wait_reached_async()
            second = await submit("b")
            gate.open()
            await first
    finally:
        await provider.aclose()
    assert second.ok, second.error
    results = [m["content"] for m in scripted_provider.requests[3].body["messages"]
               if m["role"] == "tool"]  # fmt: skip
    assert "only_b.txt" in results[0]
    assert "only_a.txt" not in results[0]
    assert results[1] == "The todo list is empty."


async def test_a_second_run_gets_tools_built_for_its_own_workspace(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    """The tool registry is the run's own: a second run of one executor, in another workspace
    on a model with a larger window, sees tools described with its own bounds (the bash
    output kept), not those of the executor's first run; and its system prompt names its own
    workspace."""
    from coding_agent.compaction import run_limits

    home = tmp_path / "home"
    home.mkdir()
    base = scripted_provider.openai_base_url
    (home / "config.toml").write_text(
        f'[providers.local]\nkind = "openai_completions"\nbase_url = "{base}"\n'
        'api_key_env = "K"\n'
        f'[providers.openai]\nkind = "openai_completions"\nbase_url = "{base}"\n'
        'api_key_env = "K"\n'
    )
    environ = {"K": "sk-test"}
    executor = CodingExecutor(home=home, environ=environ)
    scripted_provider.script(ScriptedTurn(text="small"), ScriptedTurn(text="large"))
    dirs = {}
    for name in ("small", "large"):
        dirs[name] = tmp_path / name
        dirs[name].mkdir()
    models = {"small": "local:tiny-coder", "large": "openai:gpt-4o-mini"}
    async with Gateway(bus=Bus(), executor=executor) as gateway:
        for name in ("small", "large"):
            key = f"agent:coder:{name}"
            completion = await gateway.submit_execution(
                ExecutionCommand(run_id=name, session_key=key, prompt="go", model=models[name],
                                 conversation_key=("session", key), cwd=str(dirs[name]))
            )  # fmt: skip
            assert completion.ok, completion.error
    from lemon_core.config import load_config

    config = load_config(environ=environ, cwd=tmp_path, home=home).config
    settings = ExecutorSettings()
    for number, name in enumerate(("small", "large")):
        body = scripted_provider.requests[number].body
        model, _ = resolve_model(config, models[name], environ=environ)
        limits = run_limits(settings.limits, model, settings.compaction)
        bash = next(t["function"] for t in body["tools"] if t["function"]["name"] == "bash")
        assert f"the last {limits.bash_output_bytes} bytes" in bash["description"], name
        system = body["messages"][0]["content"]
        assert str(dirs[name]) in system
    small = run_limits(settings.limits, resolve_model(config, models["small"], environ=environ)[0],
                       settings.compaction)  # fmt: skip
    large = run_limits(settings.limits, resolve_model(config, models["large"], environ=environ)[0],
                       settings.compaction)  # fmt: skip
    assert small.bash_output_bytes < large.bash_output_bytes, "the two runs' bounds differ"


async def test_an_unknown_model_fails_the_run_clearly(tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    executor = CodingExecutor(environ={"LEMON_HOME": str(tmp_path / "home")})
    async with Gateway(bus=Bus(), executor=executor) as gateway:
        completion = await gateway.submit_execution(
            ExecutionCommand(run_id="r1", session_key=SESSION, prompt="hi",
                             conversation_key=("session", SESSION), cwd=str(cwd),
                             model="nosuch:model")
        )  # fmt: skip
    assert not completion.ok
    assert completion.error is not None
    assert completion.error.startswith("model_unavailable: UnknownModelError")
    assert "nosuch" in completion.error


def test_models_resolve_from_the_configuration(tmp_path: Path) -> None:
    from lemon_core.config import load_config

    (tmp_path / "config.toml").write_text(
        '[providers.local]\nkind = "openai_completions"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'api_key_env = "LOCAL_KEY"\n'
        '[providers.openai]\nkind = "openai_completions"\nbase_url = "https://api.openai.com/v1"\n'
        '[providers.claude]\nkind = "anthropic_messages"\n'
    )
    config = load_config(environ={}, cwd=tmp_path, home=tmp_path).config
    env = {"LOCAL_KEY": "k-local", "OPENAI_API_KEY": "k-openai"}
    local, _ = resolve_model(config, "local:qwen2.5-coder", environ=env)
    assert (local.api, local.base_url, local.id) == (
        "openai_completions", "http://127.0.0.1:9/v1", "qwen2.5-coder")  # fmt: skip
    hosted, _ = resolve_model(config, "openai:gpt-4o-mini", environ=env)
    assert hosted.base_url == "https://api.openai.com/v1"
    assert hosted.input_price > 0, "the catalogue's prices are kept"
    claude, _ = resolve_model(config, "claude:some-model", environ=env)
    assert (claude.api, claude.base_url) == ("anthropic_messages", "https://api.anthropic.com")
    offline, _ = resolve_model(config, None, environ=env)
    assert offline.api == "offline"


async def test_the_anthropic_wire_format_runs_tools_and_resumes(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    from lemon_ai import AnthropicMessagesProvider

    provider = AnthropicMessagesProvider(api_key="sk-ant")
    model = default_catalogue().resolve(
        "anthropic:claude-sonnet-4-20250514", base_url=scripted_provider.url
    )
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "a.txt").write_text("from a\n")
    executor = CodingExecutor(home=tmp_path / "home", model=model, provider=provider)
    scripted_provider.script(
        ScriptedTurn(thinking="let me look", tool_calls=(
            ScriptedToolCall(id="t1", name="read", arguments={"path": "a.txt"}),
            ScriptedToolCall(id="t2", name="ls", arguments={"path": "."}),
        )),
        ScriptedTurn(text="a.txt says: from a"),
        ScriptedTurn(text="still here"),
    )  # fmt: skip
    bus = Bus()
    try:
        async with Gateway(bus=bus, executor=executor) as gateway:

            def command(run_id: str, resume: ResumeToken | None = None) -> ExecutionCommand:
                key = ("resume", "lemon", resume.value) if resume else ("session", SESSION)
                return ExecutionCommand(
                    run_id=run_id,
                    session_key=SESSION,
                    prompt=run_id,
                    conversation_key=key,
                    cwd=str(cwd),
                    resume=resume,
                )

            first = await gateway.submit_execution(command("r1"))
            assert first.ok, first.error
            assert first.resume is not None
            second = await gateway.submit_execution(
                command("r2", ResumeToken.from_dict(first.resume))
            )
    finally:
        await provider.aclose()
    assert first.answer == "a.txt says: from a"
    assert second.ok, second.error
    body = json.dumps(scripted_provider.requests[2].body)
    assert "from a" in body
    assert "let me look" in body, "thinking is sent back on resume"
    assert scripted_provider.requests[2].body["messages"][-1]["content"][-1]["text"] == "r2"
