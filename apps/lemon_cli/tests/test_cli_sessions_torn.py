"""``lemon sessions show`` of a session whose transcript was torn by a crash mid-append: the
history is still shown (the torn tail is quarantined, not the conversation)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from coding_agent import SessionStore
from lemon_ai import AssistantMessage, TextContent, UserMessage
from lemon_cli.main import app
from lemon_core.execution import ResumeToken
from lemon_core.store import ChatStateStore
from lemon_infra import SQLiteStore
from lemon_runtime import store_path

KEY = "agent:default:main"


async def _torn_session(home: Path) -> Path:
    sessions = SessionStore(home / "agent" / "sessions")
    transcript = await sessions.create(cwd=str(home), session_id="s1")
    await transcript.append([
        UserMessage(content="my name is Ada"),
        AssistantMessage(content=(TextContent(text="Nice to meet you, Ada."),)),
    ])  # fmt: skip
    with transcript.path.open("ab") as file:
        file.write(b'{"type":"message","id":"0badf00d","parent_id":null,"timest')
    async with await SQLiteStore.open(store_path(home)) as store:
        await ChatStateStore(store).put(KEY, ResumeToken.native("s1"))
    return transcript.path


def test_sessions_show_keeps_the_history_of_a_torn_transcript(tmp_path: Path) -> None:
    path = asyncio.run(_torn_session(tmp_path))
    result = CliRunner().invoke(app, ["sessions", "show", KEY], env={"LEMON_HOME": str(tmp_path)})
    assert result.exit_code == 0, result.output
    assert "my name is Ada" in result.output
    assert "Nice to meet you, Ada." in result.output
    assert path.with_name("s1.jsonl.torn").read_bytes().startswith(b'{"type":"message"')


def test_sessions_show_says_the_sessions_workspace(tmp_path: Path) -> None:
    """The workspace set with sessions.patch (kept with the session) is shown; a session
    without one says its runs start in the daemon's."""
    from lemon_core.store import SessionSettingsStore

    asyncio.run(_torn_session(tmp_path))
    env = {"LEMON_HOME": str(tmp_path)}
    plain = CliRunner().invoke(app, ["sessions", "show", KEY], env=env)
    assert plain.exit_code == 0, plain.output
    assert "workspace: the daemon's (lemon serve --cwd)" in plain.output

    async def set_workspace() -> None:
        async with await SQLiteStore.open(store_path(tmp_path)) as store:
            await SessionSettingsStore(store).update(KEY, workspace=str(tmp_path))

    asyncio.run(set_workspace())
    shown = CliRunner().invoke(app, ["sessions", "show", KEY], env=env)
    assert shown.exit_code == 0, shown.output
    assert f"workspace: {tmp_path}\n" in shown.output
