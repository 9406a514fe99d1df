"""The bash tool: real subprocesses, timeouts, output cap, process-group kill."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
from pathlib import Path
from typing import Any

import pytest

from coding_agent import CodingLimits, Workspace, bash_tool, tool_environment
from lemon_agent import AbortSignal, ToolContext, ToolResult


def alive(pid: int) -> bool:
    """Whether ``pid`` is still running 5 s after it was SIGKILLed.

    SIGKILL is delivered asynchronously, so wait for the kernel's exit notification (a pidfd
    becomes readable when the process terminates) instead of sampling /proc once.
    """
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        readable, _, _ = select.select([fd], [], [], 5.0)
    finally:
        os.close(fd)
    return not readable


async def run_bash(
    workspace: Workspace,
    signal: AbortSignal | None = None,
    ready: asyncio.Event | None = None,
    **args: Any,
) -> tuple[ToolResult, list[str]]:
    updates: list[str] = []

    async def update(text: str) -> None:
        updates.append(text)
        if ready is not None and "ready" in "".join(updates):
            ready.set()  # the command said it is running: a handshake, not a guess

    ctx = ToolContext(tool_call_id="b1", name="bash", arguments=args,
                      signal=signal or AbortSignal(), update=update)  # fmt: skip
    result = await bash_tool(workspace).execute(ctx)
    assert isinstance(result, ToolResult)
    return result, updates


async def test_runs_in_the_workspace_and_reports_the_exit_code(tmp_path: Path) -> None:
    workspace = Workspace(cwd=tmp_path)
    ok, _ = await run_bash(workspace, command="pwd; echo out; echo err >&2")
    assert ok.content == f"{tmp_path}\nout\nerr\n[exit code 0]"
    assert not ok.is_error
    failed, _ = await run_bash(workspace, command="exit 3")
    assert failed.is_error
    assert failed.content == "[exit code 3]"
    assert failed.details == {"exit_code": 3, "ending": "exit", "dropped_bytes": 0}


async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    workspace = Workspace(cwd=tmp_path)
    result, _ = await run_bash(
        workspace, command="sleep 60 & echo $! > bg.pid; echo started; sleep 60", timeout=0.5
    )
    assert result.is_error
    assert "started" in result.content
    assert "[timed out after 0.5 s; the process group was killed]" in result.content
    background = int((tmp_path / "bg.pid").read_text())
    assert not alive(background)


async def test_background_jobs_do_not_outlive_a_normal_exit(tmp_path: Path) -> None:
    result, _ = await run_bash(Workspace(cwd=tmp_path), command="sleep 60 & echo $! > bg.pid")
    assert not result.is_error
    assert not alive(int((tmp_path / "bg.pid").read_text()))


async def test_output_keeps_the_tail_with_a_marker(tmp_path: Path) -> None:
    workspace = Workspace(cwd=tmp_path, limits=CodingLimits(bash_output_bytes=1000))
    result, _ = await run_bash(workspace, command="seq 1 5000")
    assert result.content.startswith("[... ")
    assert "bytes of earlier output omitted]" in result.content
    assert result.content.endswith("4999\n5000\n[exit code 0]")
    assert result.details is not None
    assert result.details["dropped_bytes"] > 0


async def test_abort_kills_the_process_group(tmp_path: Path) -> None:
    signal = AbortSignal()
    ready = asyncio.Event()
    command = "echo $$ > sh.pid; sleep 60 & echo $! > bg.pid; echo ready; wait"
    task = asyncio.create_task(run_bash(Workspace(cwd=tmp_path), signal, ready, command=command))
    await asyncio.wait_for(ready.wait(), 10)
    signal.abort("stop")
    result, _ = await asyncio.wait_for(task, 10)
    assert result.is_error
    assert "[aborted; the process group was killed]" in result.content
    assert not alive(int((tmp_path / "bg.pid").read_text()))
    assert not alive(int((tmp_path / "sh.pid").read_text()))


async def test_cancelling_the_tool_kills_the_process_group(tmp_path: Path) -> None:
    ready = asyncio.Event()
    command = "echo $$ > sh.pid; echo ready; sleep 60"
    task = asyncio.create_task(run_bash(Workspace(cwd=tmp_path), None, ready, command=command))
    await asyncio.wait_for(ready.wait(), 10)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert not alive(int((tmp_path / "sh.pid").read_text()))


async def test_progress_updates_stream_output(tmp_path: Path) -> None:
    _, updates = await run_bash(Workspace(cwd=tmp_path), command="echo first")
    assert "".join(updates).startswith("first")


_SECRETS = {
    "OPENAI_API_KEY": "sk-openai-0123",
    "LEMON_CONTROL_PLANE_TOKEN": "cp-token-4567",
    "FOO_SECRET": "foo-secret-89ab",
    "PGPASSWORD": "pg-password-cdef",
    "github_token": "gh-token-lower",
}


def _env_lines(content: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in content.splitlines() if "=" in line)


async def test_bash_gets_the_environment_without_the_daemons_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "secrets.env").write_text("ODD_NAME_FROM_SETUP=from-secrets-file\n")
    monkeypatch.setenv("LEMON_HOME", str(home))
    for name, value in {**_SECRETS, "ODD_NAME_FROM_SETUP": "from-secrets-file",
                        "PLAIN_SETTING": "visible"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    result, _ = await run_bash(Workspace(cwd=tmp_path), command="env")
    seen = _env_lines(result.content)
    for name, value in _SECRETS.items():
        assert name not in seen
        assert value not in result.content
    assert "ODD_NAME_FROM_SETUP" not in seen  # named in secrets.env, whatever its name
    assert seen["PLAIN_SETTING"] == "visible"
    assert seen["PATH"] == os.environ["PATH"]
    assert seen["HOME"] == os.environ["HOME"]


async def test_pass_env_lets_a_named_variable_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in _SECRETS.items():
        monkeypatch.setenv(name, value)
    env = tool_environment(os.environ, pass_env=("FOO_SECRET",))
    result, _ = await run_bash(Workspace(cwd=tmp_path, env=env), command="env")
    seen = _env_lines(result.content)
    assert seen["FOO_SECRET"] == "foo-secret-89ab"
    assert "OPENAI_API_KEY" not in seen
    assert "LEMON_CONTROL_PLANE_TOKEN" not in seen


def test_the_environment_is_not_in_the_workspaces_repr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    workspace = Workspace(cwd=tmp_path, env=tool_environment(os.environ, pass_env=("X",)))
    assert "visible" not in repr(workspace)
