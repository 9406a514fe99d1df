"""Tool policy and approvals of coding runs, through the real gateway and the scripted provider."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coding_agent import (
    DEFAULT_TOOL_POLICY,
    CodingExecutor,
    ExecutorSettings,
    Workspace,
    approval_action,
    shell_action,
)
from lemon_ai import OpenAICompletionsProvider, default_catalogue
from lemon_core import ExecApprovals
from lemon_core.bus import EXEC_APPROVALS, Bus, Delivery, Subscription
from lemon_core.events import (
    ApprovalDecision,
    ApprovalRequested,
    ApprovalResolved,
    Completion,
    EngineAction,
    ErrorCode,
    Event,
)
from lemon_core.execution import ExecutionCommand, ToolPolicy
from lemon_gateway import Gateway
from lemon_platform_test.providers import ScriptedProviderServer, ScriptedToolCall, ScriptedTurn

SESSION = "agent:coder:main"


@dataclass
class Env:
    bus: Bus
    gateway: Gateway
    approvals: ExecApprovals
    server: ScriptedProviderServer
    cwd: Path
    asks: Subscription

    def submit(self, run_id: str, prompt: str = "go") -> asyncio.Future[Completion]:
        handle = self.gateway.submit_execution(
            ExecutionCommand(run_id=run_id, session_key=SESSION, prompt=prompt,
                             conversation_key=("session", SESSION), cwd=str(self.cwd))
        )  # fmt: skip
        return asyncio.ensure_future(handle)

    async def next_approval(self, type_: str) -> Any:
        while True:
            item = await asyncio.wait_for(self.asks.get(), 30)
            assert isinstance(item, Event)
            if item.type == type_:
                return item.payload

    def tool_results(self, request: int) -> list[str]:
        body = self.server.requests[request].body
        return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def _make_env(
    tmp_path: Path, server: ScriptedProviderServer, timeout: float | None
) -> tuple[Bus, ExecApprovals, CodingExecutor, OpenAICompletionsProvider]:
    provider = OpenAICompletionsProvider(api_key="sk-test")
    model = default_catalogue().resolve("openai:gpt-4o-mini", base_url=server.openai_base_url)
    bus = Bus()
    approvals = ExecApprovals(bus)
    executor = CodingExecutor(
        home=tmp_path / "home",
        model=model,
        provider=provider,
        approvals=approvals,
        settings=ExecutorSettings(approval_timeout_s=timeout),
    )
    return bus, approvals, executor, provider


@pytest.fixture
async def env(tmp_path: Path, scripted_provider: ScriptedProviderServer) -> AsyncIterator[Env]:
    bus, approvals, executor, provider = _make_env(tmp_path, scripted_provider, 60.0)
    cwd = tmp_path / "work"
    cwd.mkdir()
    asks = bus.subscribe(EXEC_APPROVALS, delivery=Delivery(max_entries=1000,
                                                          bind_current_task=False))  # fmt: skip
    async with Gateway(bus=bus, executor=executor) as gateway:
        yield Env(bus, gateway, approvals, scripted_provider, cwd, asks)
    await provider.aclose()


def _bash(command: str, id: str = "c1") -> ScriptedTurn:
    return ScriptedTurn(tool_calls=(ScriptedToolCall(id=id, name="bash",
                                                     arguments={"command": command}),))  # fmt: skip


async def test_an_approved_command_runs(env: Env) -> None:
    env.server.script(_bash("echo approved > flag.txt"), ScriptedTurn(text="ran it"))
    done = env.submit("r1")
    asked = await env.next_approval("approval_requested")
    assert isinstance(asked, ApprovalRequested)
    pending = asked.pending
    assert (pending.tool, pending.run_id, pending.session_key, pending.agent_id) == (
        "bash", "r1", SESSION, "coder")  # fmt: skip
    assert pending.tool_call_id == "c1"
    assert pending.action == {"shell": "exact", "command": "echo approved > flag.txt"}
    env.approvals.resolve(asked.approval_id, "approve_once")
    resolved = await env.next_approval("approval_resolved")
    assert isinstance(resolved, ApprovalResolved)
    assert resolved.decision is ApprovalDecision.APPROVE_ONCE
    completion = await done
    assert completion.ok
    assert completion.answer == "ran it"
    assert (env.cwd / "flag.txt").read_text() == "approved\n"
    assert env.tool_results(1) == ["[exit code 0]"]


async def test_a_denied_tool_returns_an_error_to_the_model(env: Env) -> None:
    env.server.script(
        ScriptedTurn(tool_calls=(ScriptedToolCall(id="c1", name="write", arguments={
            "path": "x.txt", "content": "nope"}),)),
        ScriptedTurn(text="ok, not writing"),
    )  # fmt: skip
    done = env.submit("r1")
    asked = await env.next_approval("approval_requested")
    assert asked.pending.action == {"path": str((env.cwd / "x.txt").resolve())}
    env.approvals.resolve(asked.approval_id, ApprovalDecision.DENY)
    completion = await done
    assert completion.ok
    assert not (env.cwd / "x.txt").exists()
    (result,) = env.tool_results(1)
    assert "not approved (deny" in result
    assert "did not run" in result
    assert env.approvals.statistics().grants == 0


async def test_an_approval_times_out(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    bus, _approvals, executor, provider = _make_env(tmp_path, scripted_provider, 0.01)
    cwd = tmp_path / "work"
    cwd.mkdir()
    scripted_provider.script(_bash("touch late.txt"), ScriptedTurn(text="timed out"))
    sub = bus.subscribe(EXEC_APPROVALS, delivery=Delivery(bind_current_task=False))
    try:
        async with Gateway(bus=bus, executor=executor) as gateway:
            completion = await gateway.submit_execution(
                ExecutionCommand(run_id="r1", session_key=SESSION, prompt="go",
                                 conversation_key=("session", SESSION), cwd=str(cwd))
            )  # fmt: skip
    finally:
        await provider.aclose()
    assert completion.ok
    assert not (cwd / "late.txt").exists()
    events = [sub.delivery.get_nowait(), sub.delivery.get_nowait()]
    assert [e.type for e in events] == ["approval_requested", "approval_resolved"]
    assert events[1].payload.decision is ApprovalDecision.TIMEOUT
    body = json.dumps(scripted_provider.requests[1].body)
    assert "not approved (timeout" in body


async def test_a_session_grant_covers_the_same_command_but_never_a_chain(env: Env) -> None:
    env.server.script(
        _bash("ls", "c1"), _bash("ls", "c2"), _bash("ls; echo chained > chain.txt", "c3"),
        ScriptedTurn(text="done"),
    )  # fmt: skip
    done = env.submit("r1")
    first = await env.next_approval("approval_requested")
    assert first.pending.action == {"shell": "argv", "argv": ["ls"]}
    env.approvals.resolve(first.approval_id, "approve_session")
    await env.next_approval("approval_resolved")
    # The second plain `ls` runs on the grant; the chain asks again.
    chain = await env.next_approval("approval_requested")
    assert chain.pending.tool_call_id == "c3"
    assert chain.pending.action == {"shell": "exact", "command": "ls; echo chained > chain.txt"}
    env.approvals.resolve(chain.approval_id, "deny")
    completion = await done
    assert completion.ok
    assert not (env.cwd / "chain.txt").exists()
    stats = env.approvals.statistics()
    assert (stats.requested, stats.granted_from_memory, stats.grants) == (2, 1, 1)
    assert env.approvals.granted("bash", shell_action("ls"), session_key=SESSION) == "session"


async def test_pending_approvals_expire_when_the_run_ends(env: Env) -> None:
    env.server.script(_bash("touch never.txt"))
    done = env.submit("r1")
    asked = await env.next_approval("approval_requested")
    assert env.gateway.cancel("r1")
    resolved = await env.next_approval("approval_resolved")
    assert resolved.approval_id == asked.approval_id
    assert resolved.decision is ApprovalDecision.EXPIRED
    completion = await done
    assert completion.error_code is ErrorCode.CANCELLED
    assert env.approvals.pending() == ()
    assert not (env.cwd / "never.txt").exists()


async def test_the_approval_shows_as_a_run_action(env: Env) -> None:
    from lemon_core.bus import run_topic

    actions = env.bus.subscribe(run_topic("r1"), delivery=Delivery(bind_current_task=False))
    env.server.script(_bash("true"), ScriptedTurn(text="ok"))
    done = env.submit("r1")
    asked = await env.next_approval("approval_requested")
    env.approvals.resolve(asked.approval_id, "approve_once")
    await done
    kinds = []
    while True:
        try:
            event = actions.delivery.get_nowait()
        except asyncio.QueueEmpty:
            break
        if isinstance(event.payload, EngineAction):
            kinds.append((event.payload.action.kind.value, event.payload.phase.value))
    assert ("approval", "started") in kinds
    assert ("approval", "completed") in kinds
    assert kinds.index(("approval", "completed")) < kinds.index(("command", "completed"))


async def test_policy_deny_refuses_without_asking(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    bus, approvals, executor, provider = _make_env(tmp_path, scripted_provider, 60.0)
    cwd = tmp_path / "work"
    cwd.mkdir()
    scripted_provider.script(_bash("touch denied.txt"), ScriptedTurn(text="ok"))
    try:
        async with Gateway(bus=bus, executor=executor) as gateway:
            completion = await gateway.submit_execution(
                ExecutionCommand(run_id="r1", session_key=SESSION, prompt="go",
                                 conversation_key=("session", SESSION), cwd=str(cwd),
                                 tool_policy=ToolPolicy(deny=frozenset({"bash"})))
            )  # fmt: skip
    finally:
        await provider.aclose()
    assert completion.ok
    assert not (cwd / "denied.txt").exists()
    assert approvals.statistics().requested == 0
    assert "denied by this run's tool policy" in json.dumps(scripted_provider.requests[1].body)


def test_the_default_policy_runs_reads_and_asks_for_changes() -> None:
    for tool in ("read", "ls", "find", "grep", "todo"):
        assert DEFAULT_TOOL_POLICY.permits(tool)
        assert not DEFAULT_TOOL_POLICY.needs_approval(tool)
    for tool in ("write", "edit", "bash"):
        assert DEFAULT_TOOL_POLICY.needs_approval(tool)


def test_shell_actions_normalise_plain_commands_only() -> None:
    assert shell_action("ls  -la") == shell_action("'ls' -la") == {
        "shell": "argv", "argv": ["ls", "-la"]}  # fmt: skip
    assert shell_action('echo "a; b"') == {"shell": "argv", "argv": ["echo", "a; b"]}
    for compound in (
        "ls; rm -rf ~",
        "ls && rm x",
        "ls | sh",
        "ls > f",
        "cat < f",
        "ls &",
        "echo $(rm x)",
        "echo `rm x`",
        "ls\nrm x",
        "(ls)",
        "echo 'unbalanced",
    ):
        assert shell_action(compound) == {"shell": "exact", "command": compound}  # fmt: skip


_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_./~", min_size=1, max_size=8)
_joiners = st.sampled_from(["; ", " && ", " || ", " | ", " & ", "\n", " > ", " < ", ";"])


@given(st.lists(_word, min_size=1, max_size=4), _joiners, st.lists(_word, min_size=1, max_size=4))
def test_approving_a_command_never_approves_a_chain_starting_with_it(
    first: list[str], joiner: str, second: list[str]
) -> None:
    plain = " ".join(first)
    chained = plain + joiner + " ".join(second)
    workspace = Workspace(cwd=Path.cwd())
    key = approval_action("bash", {"command": plain}, workspace)
    chain_key = approval_action("bash", {"command": chained}, workspace)
    assert key != chain_key
    assert chain_key == {"shell": "exact", "command": chained}


async def _run_with_home_config(
    tmp_path: Path, server: ScriptedProviderServer, config_text: str
) -> tuple[Completion, ExecApprovals, Path]:
    bus, approvals, executor, provider = _make_env(tmp_path, server, 60.0)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text(config_text)
    cwd = tmp_path / "work"
    cwd.mkdir()
    try:
        async with Gateway(bus=bus, executor=executor) as gateway:
            completion = await gateway.submit_execution(
                ExecutionCommand(run_id="r1", session_key=SESSION, prompt="go",
                                 conversation_key=("session", SESSION), cwd=str(cwd))
            )  # fmt: skip
    finally:
        await provider.aclose()
    return completion, approvals, cwd


async def test_the_agent_profile_policy_applies_when_the_command_sets_none(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    scripted_provider.script(_bash("touch p.txt"), ScriptedTurn(text="ok"))
    completion, approvals, cwd = await _run_with_home_config(
        tmp_path, scripted_provider, '[profiles.coder.tool_policy]\ndeny = ["bash"]\n'
    )
    assert completion.ok
    assert not (cwd / "p.txt").exists()
    assert approvals.statistics().requested == 0
    assert "denied by this run's tool policy" in json.dumps(scripted_provider.requests[1].body)


async def test_an_invalid_config_fails_the_run_clearly(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    completion, _, _ = await _run_with_home_config(tmp_path, scripted_provider, "[agent]\nx = 1\n")
    assert not completion.ok
    assert completion.error is not None
    assert completion.error.startswith("config_invalid:")
    assert "profiles" in completion.error
