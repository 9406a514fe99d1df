"""``lemon acp`` driven by the official ACP Python SDK (``agent-client-protocol``) as the
editor: the streamed text, a bash call through a permission question, cancel (while the tool
runs and while the question is pending), load after a restart with the full history, and an
MCP server given in ``session/new`` used by that session only."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.client.connection import ClientSideConnection
from acp.exceptions import RequestError
from acp.schema import AllowedOutcome, RequestPermissionResponse

from lemon_runtime import Runtime

LEMON = str(Path(sys.executable).parent / "lemon")


class Editor:
    """The editor's side: records every update; answers permission questions with
    ``answer`` (``None``: wait until told, for cancel-while-pending)."""

    def __init__(
        self, answer: str | None = "allow_once", *, hold: asyncio.Event | None = None
    ) -> None:
        self.answer = answer
        self.hold = hold
        """Set: each answer waits until it is set."""
        self.updates: list[Any] = []
        self.questions: list[Any] = []
        self.asked = asyncio.Event()
        self.tool_started = asyncio.Event()
        self.commands = asyncio.Event()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kw: Any
    ) -> RequestPermissionResponse:
        self.questions.append((tool_call, options))
        self.asked.set()
        if self.answer is None:
            await asyncio.Event().wait()  # never answers: the agent must withdraw the question
        if self.hold is not None:
            await self.hold.wait()
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=self.answer)
        )

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.updates.append(update)
        if getattr(update, "session_update", None) == "available_commands_update":
            self.commands.set()
        if (
            getattr(update, "session_update", None) == "tool_call_update"
            and update.status == "in_progress"
        ):
            self.tool_started.set()

    def kinds(self) -> list[str]:
        return [u.session_update for u in self.updates]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u.content.text for u in self.updates if u.session_update == kind)


@asynccontextmanager
async def lemon_acp(
    editor: Editor, env: dict[str, str], cwd: Path
) -> AsyncIterator[ClientSideConnection]:
    async with spawn_agent_process(editor, LEMON, "acp", env=env, cwd=cwd) as (conn, _process):
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        assert init.protocol_version == 1
        yield conn


async def test_initialize_advertises_what_lemon_offers(
    agent_env: dict[str, str], workspace: Path
) -> None:
    editor = Editor()
    async with spawn_agent_process(editor, LEMON, "acp", env=agent_env, cwd=workspace) as (conn, _):
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        caps = init.agent_capabilities
        assert caps is not None
        assert caps.load_session is True
        assert caps.prompt_capabilities.image is True
        assert caps.prompt_capabilities.embedded_context is True
        assert caps.mcp_capabilities.http is True
        assert caps.mcp_capabilities.sse is False
        assert init.agent_info is not None
        assert init.agent_info.name == "lemon"
        await conn.authenticate(method_id="none")
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        assert session.session_id.startswith("acp:")
        assert session.modes is not None
        assert [m.id for m in session.modes.available_modes] == ["default", "accept-edits", "plan"]
        async with asyncio.timeout(30):
            await editor.commands.wait()
        commands = next(
            u for u in editor.updates if u.session_update == "available_commands_update"
        )
        # /compact, then the home's enabled skills (a fresh home has the built-in one).
        assert [c.name for c in commands.available_commands] == ["compact", "skill-creator"]
        compacted = await conn.prompt(
            session_id=session.session_id, prompt=[text_block("/compact")]
        )
        assert compacted.stop_reason == "end_turn"


async def test_a_prompt_streams_the_answer_and_ends_the_turn(
    agent_env: dict[str, str], workspace: Path, home: Path
) -> None:
    editor = Editor()
    async with lemon_acp(editor, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        result = await conn.prompt(
            session_id=session.session_id, prompt=[text_block("/echo hello from the editor")]
        )
    assert result.stop_reason == "end_turn"
    assert editor.text() == "hello from the editor"
    assert editor.kinds().count("agent_message_chunk") > 1  # streamed
    listed = await asyncio.to_thread(
        subprocess.run,
        [LEMON, "sessions", "list"],
        env=agent_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert session.session_id in listed.stdout, listed.stdout + listed.stderr


async def test_bash_runs_through_the_editors_permission(
    agent_env: dict[str, str], workspace: Path
) -> None:
    editor = Editor(answer="allow_once")
    async with lemon_acp(editor, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        result = await conn.prompt(
            session_id=session.session_id,
            prompt=[text_block('/tool bash {"command": "echo approved-$((40+2))"}')],
        )
    assert result.stop_reason == "end_turn"
    assert len(editor.questions) == 1
    tool_call, options = editor.questions[0]
    assert [o.kind for o in options] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    announced = [u.tool_call_id for u in editor.updates if u.session_update == "tool_call"]
    assert announced == [tool_call.tool_call_id]  # the question names the announced call
    starts = [u for u in editor.updates if u.session_update == "tool_call"]
    assert starts[0].kind == "execute"
    finished = [
        u
        for u in editor.updates
        if u.session_update == "tool_call_update" and u.status == "completed"
    ]
    assert finished
    outputs = " ".join(
        c.content.text for u in finished for c in (u.content or []) if hasattr(c, "content")
    )
    assert "approved-42" in outputs


async def test_a_rejected_permission_does_not_run_the_command(
    agent_env: dict[str, str], workspace: Path
) -> None:
    editor = Editor(answer="reject_once")
    marker = workspace / "ran"
    async with lemon_acp(editor, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        result = await conn.prompt(
            session_id=session.session_id,
            prompt=[text_block(f'/tool bash {{"command": "touch {marker}"}}')],
        )
    assert result.stop_reason == "end_turn"
    assert editor.questions
    assert not marker.exists()


async def test_cancel_stops_a_running_tool(agent_env: dict[str, str], workspace: Path) -> None:
    editor = Editor(answer="allow_once")
    async with lemon_acp(editor, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        prompt = asyncio.ensure_future(
            conn.prompt(
                session_id=session.session_id,
                prompt=[text_block('/tool bash {"command": "sleep 60"}')],
            )
        )
        async with asyncio.timeout(60):
            await editor.asked.wait()
        await conn.cancel(session_id=session.session_id)
        async with asyncio.timeout(60):
            result = await prompt
    assert result.stop_reason == "cancelled"


async def test_cancel_while_the_permission_is_pending_denies_it(
    agent_env: dict[str, str], workspace: Path
) -> None:
    editor = Editor(answer=None)
    marker = workspace / "ran"
    async with lemon_acp(editor, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        prompt = asyncio.ensure_future(
            conn.prompt(
                session_id=session.session_id,
                prompt=[text_block(f'/tool bash {{"command": "touch {marker}"}}')],
            )
        )
        async with asyncio.timeout(60):
            await editor.asked.wait()
        await conn.cancel(session_id=session.session_id)
        async with asyncio.timeout(60):
            result = await prompt
    assert result.stop_reason == "cancelled"
    assert not marker.exists()


async def test_load_after_a_restart_replays_the_whole_history(
    agent_env: dict[str, str], workspace: Path
) -> None:
    first = Editor()
    async with lemon_acp(first, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await conn.prompt(session_id=session.session_id, prompt=[text_block("/echo remember me")])
        await conn.prompt(session_id=session.session_id, prompt=[text_block("/echo and me")])
    # A new agent process (and a new runtime on the same home): the editor loads the session.
    second = Editor()
    async with lemon_acp(second, agent_env, workspace) as conn:
        await conn.load_session(cwd=str(workspace), session_id=session.session_id, mcp_servers=[])
        replayed = [
            (u.session_update, u.content.text)
            for u in second.updates
            if u.session_update in ("user_message_chunk", "agent_message_chunk")
        ]
        assert replayed == [
            ("user_message_chunk", "/echo remember me"),
            ("agent_message_chunk", "remember me"),
            ("user_message_chunk", "/echo and me"),
            ("agent_message_chunk", "and me"),
        ]
        second.updates.clear()
        result = await conn.prompt(
            session_id=session.session_id, prompt=[text_block("/echo still here")]
        )
    assert result.stop_reason == "end_turn"
    assert second.text() == "still here"


async def test_modes_change_what_asks(agent_env: dict[str, str], workspace: Path) -> None:
    editor = Editor(answer="reject_once")
    target = workspace / "notes.txt"
    async with lemon_acp(editor, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await conn.set_session_mode(session_id=session.session_id, mode_id="accept-edits")
        assert "current_mode_update" in editor.kinds()
        write = {"path": str(target), "content": "hello\n"}
        await conn.prompt(
            session_id=session.session_id,
            prompt=[text_block(f"/tool write {json.dumps(write)}")],
        )
        assert editor.questions == []  # accept-edits: the write did not ask
        assert target.read_text() == "hello\n"
        await conn.set_session_mode(session_id=session.session_id, mode_id="plan")
        marker = workspace / "ran"
        await conn.prompt(
            session_id=session.session_id,
            prompt=[text_block(f'/tool bash {{"command": "touch {marker}"}}')],
        )
    assert editor.questions == []  # plan: bash is not offered, so nothing asks
    assert not marker.exists()


async def test_on_a_running_daemon_the_session_is_the_daemons(
    agent_env: dict[str, str], workspace: Path, home: Path
) -> None:
    from lemon_control_plane import TOKEN_ENV, ControlPlane, ControlPlaneOptions
    from lemon_core.config import load_config
    from lemon_core.sessions import SESSION_PORT
    from lemon_runtime import Runtime

    loaded = load_config(home=home, cwd=workspace, environ={})
    options = ControlPlaneOptions(settings={"port": 0, "cwd": str(workspace)})
    async with Runtime(profile="daemon", config=loaded, options=[options]) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        assert plane.local_token is not None
        env = {**agent_env, "LEMON_DAEMON": "1", TOKEN_ENV: plane.local_token}
        editor = Editor()
        async with spawn_agent_process(
            editor,
            LEMON,
            "acp",
            "--url",
            plane.ws_url,
            "--session",
            "acp:attached",
            env=env,
            cwd=workspace,
        ) as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[_stdio_server()])
            assert session.session_id == "acp:attached"
            # The daemon's catalogue (models.list) fills the model select.
            assert "model" in {o.id for o in session.config_options or []}
            result = await conn.prompt(
                session_id=session.session_id, prompt=[text_block("/echo over the websocket")]
            )
            assert result.stop_reason == "end_turn"
            assert editor.text() == "over the websocket"
            # The editor's MCP server crosses the WebSocket on the run request (port.submit).
            await conn.prompt(
                session_id=session.session_id,
                prompt=[text_block('/tool mcp_editor_echo {"text": "via the daemon"}')],
            )
        assert "editor-mcp:via the daemon" in _outputs(editor, "completed"), editor.text()
        port = runtime.context.capabilities.require(SESSION_PORT)
        keys = [s.session_key for s in await port.sessions()]
        assert "acp:attached" in keys
        settings = await port.settings("acp:attached")
        assert settings.workspace is not None
        assert settings.workspace.endswith("/project")


async def test_an_edit_shows_its_diff_and_a_todo_write_the_plan(
    agent_env: dict[str, str], workspace: Path
) -> None:
    editor = Editor(answer="allow_once")
    target = workspace / "f.txt"
    await asyncio.to_thread(target.write_text, "alpha\n")
    edit = {"path": str(target), "old_text": "alpha", "new_text": "beta"}
    todo = {
        "action": "write",
        "todos": [{"content": "one", "status": "in_progress"}, {"content": "two"}],
    }
    async with lemon_acp(editor, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await conn.prompt(
            session_id=session.session_id, prompt=[text_block(f"/tool edit {json.dumps(edit)}")]
        )
        await conn.prompt(
            session_id=session.session_id, prompt=[text_block(f"/tool todo {json.dumps(todo)}")]
        )
    starts = [u for u in editor.updates if u.session_update == "tool_call"]
    assert starts[0].kind == "edit"
    assert [loc.path for loc in starts[0].locations] == [str(target)]
    done = next(
        u
        for u in editor.updates
        if u.session_update == "tool_call_update" and u.status == "completed"
    )
    diffs = [c for c in done.content if c.type == "diff"]
    assert [(d.path, d.old_text, d.new_text) for d in diffs] == [(str(target), "alpha", "beta")]
    plans = [u for u in editor.updates if u.session_update == "plan"]
    assert [(e.content, e.status) for e in plans[0].entries] == [
        ("one", "in_progress"),
        ("two", "pending"),
    ]


async def test_a_second_prompt_while_one_runs_is_queued_behind_it(
    agent_env: dict[str, str], workspace: Path, home: Path
) -> None:
    """Deterministic: the first prompt holds at its permission question; the second is sent
    then, and the daemon's own events say it is queued before the question is answered."""
    from lemon_control_plane import TOKEN_ENV, ControlPlane, ControlPlaneOptions
    from lemon_core.config import load_config
    from lemon_core.events import RunPhase
    from lemon_core.sessions import SESSION_PORT, RunPhaseNotice

    loaded = load_config(home=home, cwd=workspace, environ={})
    options = ControlPlaneOptions(settings={"port": 0, "cwd": str(workspace)})
    async with Runtime(profile="daemon", config=loaded, options=[options]) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        assert plane.local_token is not None
        port = runtime.context.capabilities.require(SESSION_PORT)
        watch = port.watch("acp:queued")
        env = {**agent_env, "LEMON_DAEMON": "1", TOKEN_ENV: plane.local_token}
        hold = asyncio.Event()
        editor = Editor(hold=hold)
        async with spawn_agent_process(
            editor,
            LEMON,
            "acp",
            "--url",
            plane.ws_url,
            "--session",
            "acp:queued",
            env=env,
            cwd=workspace,
        ) as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            first = asyncio.ensure_future(
                conn.prompt(
                    session_id=session.session_id,
                    prompt=[text_block('/tool bash {"command": "echo first-$((1+1))"}')],
                )
            )
            async with asyncio.timeout(60):
                await editor.asked.wait()
            second = asyncio.ensure_future(
                conn.prompt(session_id=session.session_id, prompt=[text_block("/echo second")])
            )
            async with asyncio.timeout(60):
                async for event in watch:
                    if (
                        isinstance(event, RunPhaseNotice)
                        and event.phase == RunPhase.QUEUED_IN_SESSION
                    ):
                        break
            assert not first.done()
            assert not second.done()
            hold.set()
            async with asyncio.timeout(60):
                one, two = await asyncio.gather(first, second)
        watch.close()
    assert one.stop_reason == "end_turn"
    assert two.stop_reason == "end_turn"
    text = editor.text()
    assert "first-2" in text
    assert text.endswith("]second")  # the second prompt's answer follows the first's
    finished = [
        i
        for i, u in enumerate(editor.updates)
        if u.session_update == "tool_call_update" and u.status == "completed"
    ]
    answer = [
        i
        for i, u in enumerate(editor.updates)
        if u.session_update == "agent_message_chunk" and u.content.text == "second"
    ]
    assert finished
    assert answer
    assert finished[0] < answer[0]  # the second ran after the first's tool call
    assert two.usage is not None
    assert two.usage.output_tokens >= 0


async def test_the_mode_is_a_config_option_too(agent_env: dict[str, str], workspace: Path) -> None:
    editor = Editor(answer="reject_once")
    target = workspace / "via-config.txt"
    async with lemon_acp(editor, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        assert session.config_options is not None
        mode = session.config_options[0]
        assert (mode.id, mode.category, mode.current_value) == ("mode", "mode", "default")
        changed = await conn.set_config_option(
            config_id="mode", session_id=session.session_id, value="accept-edits"
        )
        assert changed.config_options[0].current_value == "accept-edits"
        # session/set_model (unstable in ACP v1; this SDK version dropped its helper): the raw call
        raw = conn._conn  # the SDK's JSON-RPC connection
        answer = await raw.send_request(
            "session/set_model", {"sessionId": session.session_id, "modelId": "offline:offline"}
        )
        assert answer == {}
        with pytest.raises(RequestError) as bad:
            await raw.send_request(
                "session/set_model", {"sessionId": session.session_id, "modelId": "gpt"}
            )
        assert bad.value.code == -32602
        write = {"path": str(target), "content": "hi\n"}
        await conn.prompt(
            session_id=session.session_id,
            prompt=[text_block(f"/tool write {json.dumps(write)}")],
        )
    assert editor.questions == []  # accept-edits: the write did not ask
    assert target.read_text() == "hi\n"


# -- an MCP server the editor gives for one session ----------------------------------------

SERVER = str(Path(__file__).parent / "servers" / "editor_mcp_server.py")


def _outputs(editor: Editor, status: str) -> str:
    return " ".join(
        c.content.text
        for u in editor.updates
        if u.session_update == "tool_call_update" and u.status == status
        for c in (u.content or [])
        if hasattr(c, "content")
    )


def _server(name: str = "editor", mark: str = "from-the-editor") -> dict[str, Any]:
    return {
        "name": name,
        "command": sys.executable,
        "args": [SERVER],
        "env": [{"name": "ACP_TEST_MARK", "value": mark}],
    }


def _stdio_server() -> Any:
    from acp.schema import EnvVariable, McpServerStdio

    spec = _server()
    return McpServerStdio(
        name=spec["name"],
        command=spec["command"],
        args=spec["args"],
        env=[EnvVariable(name="ACP_TEST_MARK", value="from-the-editor")],
    )


async def test_a_stdio_mcp_server_from_session_new_serves_that_session_only(
    agent_env: dict[str, str], workspace: Path
) -> None:
    editor = Editor(answer="allow_once")
    async with lemon_acp(editor, agent_env, workspace) as conn:
        mine = await conn.new_session(cwd=str(workspace), mcp_servers=[_stdio_server()])
        result = await conn.prompt(
            session_id=mine.session_id,
            prompt=[text_block('/tool mcp_editor_echo {"text": "hello"}')],
        )
        assert result.stop_reason == "end_turn"
        assert "editor-mcp:hello" in _outputs(editor, "completed")
        # The call asked the editor first, naming the announced tool call.
        assert len(editor.questions) == 1
        asked, _options = editor.questions[0]
        announced = [u for u in editor.updates if u.session_update == "tool_call"]
        assert [u.tool_call_id for u in announced] == [asked.tool_call_id]
        # The server got the env the editor gave (and runs on for the session's next prompt).
        await conn.prompt(
            session_id=mine.session_id, prompt=[text_block("/tool mcp_editor_mark {}")]
        )
        assert "from-the-editor" in _outputs(editor, "completed")

        editor.updates.clear()
        other = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await conn.prompt(
            session_id=other.session_id,
            prompt=[text_block('/tool mcp_editor_echo {"text": "leak"}')],
        )
        assert "editor-mcp:leak" not in _outputs(editor, "completed")
        assert "there is no tool 'mcp_editor_echo'" in editor.text()  # the model's tools lack it
        editor.updates.clear()
        await conn.prompt(session_id=other.session_id, prompt=[text_block("/tools")])
        assert "mcp_editor" not in editor.text()
        editor.updates.clear()
        await conn.prompt(session_id=mine.session_id, prompt=[text_block("/tools")])
        assert "mcp_editor_echo" in editor.text()


# -- the model as a config option, skills as commands, usage after each turn -----------------


async def test_the_model_is_a_config_option_the_editor_can_set(
    agent_env: dict[str, str], workspace: Path
) -> None:
    editor = Editor()
    async with lemon_acp(editor, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        options = {o.id: o for o in session.config_options or []}
        assert set(options) == {"mode", "model"}
        model = options["model"]
        values = [c.value for c in model.options]
        assert model.current_value in values
        target = next((v for v in values if v != model.current_value), model.current_value)
        changed = await conn.set_config_option(
            config_id="model", session_id=session.session_id, value=target
        )
        after = {o.id: o for o in changed.config_options}
        assert after["model"].current_value == target
        with pytest.raises(RequestError) as refused:
            await conn.set_config_option(
                config_id="model", session_id=session.session_id, value="nope:never"
            )
        assert refused.value.code == -32602
        # The port keeps it: a load in a new agent shows the session's model.
    async with lemon_acp(Editor(), agent_env, workspace) as conn:
        loaded = await conn.load_session(
            cwd=str(workspace), session_id=session.session_id, mcp_servers=[]
        )
        again = {o.id: o for o in loaded.config_options or []}
        assert again["model"].current_value == target


async def test_a_skill_command_asks_the_agent_to_use_the_skill(
    agent_env: dict[str, str], workspace: Path
) -> None:
    editor = Editor()
    async with lemon_acp(editor, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        async with asyncio.timeout(30):
            await editor.commands.wait()
        commands = next(
            u for u in editor.updates if u.session_update == "available_commands_update"
        )
        skill = next(c for c in commands.available_commands if c.name == "skill-creator")
        assert skill.description.startswith("Skill: ")
        assert skill.input is not None
        await conn.prompt(
            session_id=session.session_id, prompt=[text_block("/skill-creator make one")]
        )
    replay = Editor()
    async with lemon_acp(replay, agent_env, workspace) as conn:
        await conn.load_session(cwd=str(workspace), session_id=session.session_id, mcp_servers=[])
    history = replay.text("user_message_chunk")
    assert "Use the skill 'skill-creator'" in history
    assert "make one" in history


async def test_usage_is_told_after_each_turn(agent_env: dict[str, str], workspace: Path) -> None:
    editor = Editor()
    async with lemon_acp(editor, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        for word in ("one", "two"):
            result = await conn.prompt(
                session_id=session.session_id, prompt=[text_block(f"/echo {word}")]
            )
            assert result.usage is not None
    usages = [u for u in editor.updates if u.session_update == "usage_update"]
    assert len(usages) == 2
    assert all(u.size > 0 and u.used > 0 for u in usages)
    last_chunk = max(
        i for i, u in enumerate(editor.updates) if u.session_update == "agent_message_chunk"
    )
    assert editor.updates.index(usages[-1]) > last_chunk  # after the turn's text


async def test_usage_update_tells_the_last_model_calls_context_not_the_turns_sum(
    agent_env: dict[str, str], workspace: Path
) -> None:
    """A turn with a tool call makes two model calls: ``used`` is the second one's prompt (the
    context now), less than the turn's summed input tokens."""
    (workspace / "a.txt").write_text("some text\n")
    editor = Editor()
    async with lemon_acp(editor, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        result = await conn.prompt(
            session_id=session.session_id,
            prompt=[text_block('/tool read {"path": "a.txt"}')],
        )
    assert result.usage is not None
    usage = next(u for u in editor.updates if u.session_update == "usage_update")
    assert 0 < usage.used < result.usage.input_tokens
