"""The editor's file system and terminal: an ACP client (the official Python SDK) advertising
``fs.readTextFile`` / ``fs.writeTextFile`` / ``terminal`` and answering those requests drives a
real ``lemon acp`` subprocess; the agent's read, write, edit and bash calls go through it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.client.connection import ClientSideConnection
from acp.exceptions import RequestError
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
)

from lemon_runtime import Runtime

LEMON = str(Path(sys.executable).parent / "lemon")


class FsEditor:
    """An editor with unsaved buffers (``buffers``: path -> text) and real terminals (each a
    ``bash -c`` subprocess it runs); records every fs/terminal call in ``calls``."""

    def __init__(self, *, fail_reads: bool = False, hold_reads: bool = False) -> None:
        self.buffers: dict[str, str] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.updates: list[Any] = []
        self.questions = 0
        self.fail_reads = fail_reads
        self.hold_reads = hold_reads
        self.read_asked = asyncio.Event()
        self.terminals: dict[str, asyncio.subprocess.Process] = {}
        self.output: dict[str, bytes] = {}
        self.waiting = asyncio.Event()
        self.released = asyncio.Event()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: Any, **kw: Any
    ) -> RequestPermissionResponse:
        self.questions += 1
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="allow_once")
        )

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.updates.append(update)

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kw: Any,
    ) -> ReadTextFileResponse:
        self.calls.append(("read", {"path": path, "line": line, "limit": limit}))
        self.read_asked.set()
        if self.hold_reads:
            await asyncio.Event().wait()  # never answers (the editor goes away meanwhile)
        if self.fail_reads:
            raise RequestError(-32002, "the buffer is locked by the editor")
        text = self.buffers.get(path)
        if text is None:
            raise RequestError(-32002, f"no such file: {path}")
        lines = text.splitlines(keepends=True)
        start = (line or 1) - 1
        chosen = lines[start : start + limit] if limit else lines[start:]
        return ReadTextFileResponse(content="".join(chosen))

    async def write_text_file(self, session_id: str, path: str, content: str, **kw: Any) -> None:
        self.calls.append(("write", {"path": path, "content": content}))
        self.buffers[path] = content

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: Any = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kw: Any,
    ) -> CreateTerminalResponse:
        self.calls.append(
            ("create", {"command": command, "args": args, "cwd": cwd, "limit": output_byte_limit})
        )
        process = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        terminal = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal] = process
        self.output[terminal] = b""
        return CreateTerminalResponse(terminal_id=terminal)

    async def _drain(self, terminal: str) -> None:
        process = self.terminals[terminal]
        assert process.stdout is not None
        self.output[terminal] += await process.stdout.read()
        await process.wait()

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kw: Any
    ) -> WaitForTerminalExitResponse:
        self.calls.append(("wait", {"terminalId": terminal_id}))
        self.waiting.set()
        await self._drain(terminal_id)
        code = self.terminals[terminal_id].returncode
        return WaitForTerminalExitResponse(exit_code=code if code and code >= 0 else 0)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kw: Any
    ) -> TerminalOutputResponse:
        self.calls.append(("output", {"terminalId": terminal_id}))
        process = self.terminals[terminal_id]
        status = None
        if process.returncode is not None:
            status = TerminalExitStatus(exit_code=max(process.returncode, 0))
        text = self.output[terminal_id].decode()
        return TerminalOutputResponse(
            output=f"[editor terminal] {text}", truncated=False, exit_status=status
        )

    async def kill_terminal(self, session_id: str, terminal_id: str, **kw: Any) -> None:
        self.calls.append(("kill", {"terminalId": terminal_id}))
        process = self.terminals[terminal_id]
        if process.returncode is None:  # killed and not reaped yet: its group may be gone
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)

    async def release_terminal(self, session_id: str, terminal_id: str, **kw: Any) -> None:
        self.calls.append(("release", {"terminalId": terminal_id}))
        process = self.terminals[terminal_id]
        if process.returncode is None:  # killed and not reaped yet: its group may be gone
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        self.released.set()

    def methods(self) -> list[str]:
        return [name for name, _ in self.calls]

    def finished(self) -> list[Any]:
        return [
            u
            for u in self.updates
            if u.session_update == "tool_call_update" and u.status in ("completed", "failed")
        ]

    def outputs(self) -> str:
        return " ".join(
            c.content.text
            for u in self.finished()
            for c in (u.content or [])
            if hasattr(c, "content") and hasattr(c.content, "text")
        )


@asynccontextmanager
async def lemon_acp(
    editor: FsEditor, env: dict[str, str], cwd: Path, *, offer: bool = True
) -> AsyncIterator[ClientSideConnection]:
    capabilities = ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=offer, write_text_file=offer), terminal=offer
    )
    async with spawn_agent_process(editor, LEMON, "acp", env=env, cwd=cwd) as (conn, _process):
        await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities)
        yield conn


async def _tool(conn: ClientSideConnection, session_id: str, call: str) -> str:
    result = await conn.prompt(session_id=session_id, prompt=[text_block(f"/tool {call}")])
    return result.stop_reason


async def test_read_write_edit_and_bash_go_through_the_editor(
    agent_env: dict[str, str], workspace: Path
) -> None:
    editor = FsEditor()
    notes = workspace / "notes.txt"
    notes.write_text("on disk\n")
    editor.buffers[str(notes)] = "line one (unsaved)\nline two\nline three\n"
    written = workspace / "new.txt"
    async with lemon_acp(editor, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        read = 'read {"path": "notes.txt", "offset": 2, "limit": 1}'
        assert await _tool(conn, sid, read) == "end_turn"
        assert editor.calls[0] == ("read", {"path": str(notes), "line": 2, "limit": 2})
        assert "line two" in editor.outputs()
        assert "continue with offset=3" in editor.outputs()
        assert "on disk" not in editor.outputs()

        await _tool(conn, sid, f'write {{"path": "{written}", "content": "from the agent\\n"}}')
        assert ("write", {"path": str(written), "content": "from the agent\n"}) in editor.calls
        assert not written.exists()  # the editor handled it: the disk is untouched

        edit = 'edit {"path": "notes.txt", "old_text": "line two", "new_text": "line 2"}'
        await _tool(conn, sid, edit)
        assert editor.buffers[str(notes)] == "line one (unsaved)\nline 2\nline three\n"
        assert notes.read_text() == "on disk\n"

        await _tool(conn, sid, 'bash {"command": "echo via-$((40+2))"}')
        # ls / find / grep read the disk (ACP has no such call) and say so; no editor call.
        calls = len(editor.calls)
        await _tool(conn, sid, 'grep {"pattern": "unsaved|disk"}')
        assert len(editor.calls) == calls
        assert "notes.txt:1: on disk" in editor.outputs()
        assert "the editor's unsaved changes are not seen" in editor.outputs()
    create = next(args for name, args in editor.calls if name == "create")
    limit = create.pop("limit")
    assert create == {
        "command": "bash",
        "args": ["-c", "echo via-$((40+2))"],
        "cwd": str(workspace),
    }
    assert isinstance(limit, int)
    assert limit > 0  # outputByteLimit: the run's bash output bound
    assert editor.methods()[-4:] == ["create", "wait", "output", "release"]
    assert "[editor terminal] via-42" in editor.outputs()
    assert editor.questions >= 2  # write/edit and bash still asked first


async def test_without_the_capabilities_the_local_tools_run(
    agent_env: dict[str, str], workspace: Path
) -> None:
    editor = FsEditor()
    target = workspace / "local.txt"
    async with lemon_acp(editor, agent_env, workspace, offer=False) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        await _tool(conn, sid, f'write {{"path": "{target}", "content": "local\\n"}}')
        await _tool(conn, sid, 'bash {"command": "echo local-$((1+1))"}')
    assert target.read_text() == "local\n"
    assert editor.calls == []
    assert "local-2" in editor.outputs()
    assert "[editor terminal]" not in editor.outputs()


async def test_an_editor_error_is_a_tool_error_and_outside_paths_are_refused(
    agent_env: dict[str, str], workspace: Path, tmp_path: Path
) -> None:
    editor = FsEditor(fail_reads=True)
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("secret-ish\n")
    async with lemon_acp(editor, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        assert await _tool(conn, sid, 'read {"path": "any.txt"}') == "end_turn"
        failed = editor.finished()
        assert failed
        assert failed[-1].status == "failed"
        assert "the buffer is locked by the editor" in editor.outputs()
        editor.updates.clear()
        calls = len(editor.calls)
        await _tool(conn, sid, f'read {{"path": "{outside}"}}')
    assert editor.finished()[-1].status == "failed"
    assert "outside the session's workspace" in editor.outputs()
    assert len(editor.calls) == calls  # never asked the editor


async def test_cancel_during_wait_for_exit_kills_and_releases_the_terminal(
    agent_env: dict[str, str], workspace: Path
) -> None:
    editor = FsEditor()
    async with lemon_acp(editor, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        prompt = asyncio.ensure_future(
            conn.prompt(
                session_id=session.session_id,
                prompt=[text_block('/tool bash {"command": "sleep 60"}')],
            )
        )
        async with asyncio.timeout(60):
            await editor.waiting.wait()
        await conn.cancel(session_id=session.session_id)
        async with asyncio.timeout(60):
            result = await prompt
            await editor.released.wait()
    assert result.stop_reason == "cancelled"
    methods = editor.methods()
    assert methods[:2] == ["create", "wait"]
    assert "kill" in methods
    assert methods.index("release") > methods.index("kill")
    assert editor.terminals["term-1"].returncode is not None  # the command is gone


async def test_over_the_daemons_websocket_and_a_client_that_disconnects(
    agent_env: dict[str, str], workspace: Path, home: Path
) -> None:
    """The handle crosses ``port.submit`` to a daemon; when the editor goes away while the
    daemon's run waits on its ``fs/read_text_file``, the read is a tool error saying so."""
    from lemon_control_plane import TOKEN_ENV, ControlPlane, ControlPlaneOptions
    from lemon_core.config import load_config
    from lemon_core.sessions import SESSION_PORT, ToolCard

    loaded = load_config(home=home, cwd=workspace, environ={})
    options = ControlPlaneOptions(settings={"port": 0, "cwd": str(workspace)})
    notes = workspace / "notes.txt"
    async with Runtime(profile="daemon", config=loaded, options=[options]) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        assert plane.local_token is not None
        port = runtime.context.capabilities.require(SESSION_PORT)
        env = {**agent_env, "LEMON_DAEMON": "1", TOKEN_ENV: plane.local_token}
        capabilities = ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
        )
        editor = FsEditor()
        editor.buffers[str(notes)] = "unsaved in the editor\n"
        args = ("acp", "--url", plane.ws_url, "--session", "acp:fs-daemon")
        async with spawn_agent_process(editor, LEMON, *args, env=env, cwd=workspace) as (
            conn,
            _,
        ):
            await conn.initialize(
                protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities
            )
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            await _tool(conn, session.session_id, 'read {"path": "notes.txt"}')
        assert editor.calls[0][0] == "read"
        assert "unsaved in the editor" in editor.outputs()

        gone = FsEditor(hold_reads=True)
        watch = port.watch("acp:fs-gone")
        args = ("acp", "--url", plane.ws_url, "--session", "acp:fs-gone")
        async with spawn_agent_process(gone, LEMON, *args, env=env, cwd=workspace) as (
            conn,
            process,
        ):
            await conn.initialize(
                protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities
            )
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            prompt = asyncio.ensure_future(
                conn.prompt(
                    session_id=session.session_id,
                    prompt=[text_block('/tool read {"path": "notes.txt"}')],
                )
            )
            async with asyncio.timeout(60):
                await gone.read_asked.wait()
            assert process.stdin is not None
            process.stdin.close()  # the editor goes away
            async with asyncio.timeout(60):
                async for event in watch:
                    if isinstance(event, ToolCard) and event.phase == "completed":
                        break
            prompt.cancel()
        watch.close()
    assert event.ok is False
    assert "the client disconnected" in f"{event.message} {event.detail}"


class StreamingEditor(FsEditor):
    """An editor whose terminals collect output as the command writes it (``terminal/output``
    answers what is there so far); ``seen`` is set once an in-progress update shows ``want``."""

    def __init__(self, want: str) -> None:
        super().__init__()
        self.want = want
        self.seen = asyncio.Event()
        self.readers: dict[str, asyncio.Task[None]] = {}

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        await super().session_update(session_id, update, **kw)
        if update.session_update == "tool_call_update" and update.status == "in_progress":
            text = " ".join(c.content.text for c in update.content or [] if hasattr(c, "content"))
            if self.want in text:
                self.seen.set()

    async def create_terminal(self, *args: Any, **kw: Any) -> CreateTerminalResponse:
        made = await super().create_terminal(*args, **kw)
        terminal = made.terminal_id
        self.readers[terminal] = asyncio.ensure_future(self._collect(terminal))
        return made

    async def _collect(self, terminal: str) -> None:
        process = self.terminals[terminal]
        assert process.stdout is not None
        while chunk := await process.stdout.read(4096):
            self.output[terminal] += chunk
        await process.wait()

    async def _drain(self, terminal: str) -> None:
        await self.readers[terminal]


async def test_a_running_commands_output_streams_into_tool_call_updates(
    agent_env: dict[str, str], workspace: Path
) -> None:
    editor = StreamingEditor(want="tick-1")
    go = workspace / "go"
    # The command prints, then waits for the test's go-ahead (a file), then prints again.
    command = f"echo tick-1; while [ ! -e {go} ]; do sleep 0.05; done; echo tick-2"
    async with lemon_acp(editor, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        prompt = asyncio.ensure_future(
            conn.prompt(
                session_id=session.session_id,
                prompt=[text_block(f'/tool bash {{"command": "{command}"}}')],
            )
        )
        async with asyncio.timeout(60):
            await editor.seen.wait()  # the first line shown while the command still runs
        assert not prompt.done()
        assert not editor.finished()
        go.touch()
        async with asyncio.timeout(60):
            result = await prompt
    assert result.stop_reason == "end_turn"
    progress = [
        u
        for u in editor.updates
        if u.session_update == "tool_call_update" and u.status == "in_progress" and u.content
    ]
    assert progress
    assert all("tick-2" not in u.content[0].content.text for u in progress[:1])
    assert "[editor terminal] tick-1\ntick-2" in editor.outputs()
    methods = editor.methods()
    assert methods.count("output") >= 2  # the polls, then the final read
    assert methods[-1] == "release"
    assert "kill" not in methods


async def test_a_child_run_reads_through_the_editor_too(
    agent_env: dict[str, str], workspace: Path
) -> None:
    """A ``task`` child started from an ACP session gets the session's editor handle: its
    ``read`` sees the editor's unsaved buffer (the call names the parent's session)."""
    editor = FsEditor()
    notes = workspace / "notes.txt"
    notes.write_text("on disk\n")
    editor.buffers[str(notes)] = "unsaved for the child\n"
    child = '/tool read {\\"path\\": \\"notes.txt\\"}'
    async with lemon_acp(editor, agent_env, workspace) as conn:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        stop = await _tool(conn, session.session_id, f'task {{"prompt": "{child}"}}')
    assert stop == "end_turn"
    assert editor.calls
    assert editor.calls[0] == ("read", {"path": str(notes), "line": 1, "limit": 2001})
    assert "unsaved for the child" in editor.outputs()
    assert "on disk" not in editor.outputs()


def _off_loopback_address() -> str | None:
    """An address of this machine that is not loopback (``None``: it has none)."""
    import socket

    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: picks the outgoing address
        address = str(probe.getsockname()[0])
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


async def test_a_daemon_on_another_machine_refuses_an_editor_offering_fs_and_says_what_to_do(
    agent_env: dict[str, str], workspace: Path, home: Path
) -> None:
    """Over a non-loopback ``--url`` the editor's bridge cannot be reached: ``initialize``
    with fs/terminal is refused naming the way out; with ``--daemon-tools`` the daemon's own
    tools run (the disk, not the buffer), and the editor is never asked."""
    import pytest

    from lemon_control_plane import TOKEN_ENV, ControlPlane, ControlPlaneOptions
    from lemon_core.config import load_config

    address = _off_loopback_address()
    if address is None:
        pytest.skip("this machine has no address off loopback")
    token = "remote-daemon-token-0123456789"
    loaded = load_config(home=home, cwd=workspace, environ={})
    settings = {"port": 0, "cwd": str(workspace), "host": address, "tokens": [token]}
    options = ControlPlaneOptions(settings=settings)
    notes = workspace / "notes.txt"
    notes.write_text("on the daemon's disk\n")
    capabilities = ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
    )
    async with Runtime(profile="daemon", config=loaded, options=[options]) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        assert address in plane.ws_url
        env = {**agent_env, "LEMON_DAEMON": "1", TOKEN_ENV: token}
        editor = FsEditor()
        editor.buffers[str(notes)] = "unsaved in the editor\n"
        args = ("acp", "--url", plane.ws_url)
        async with spawn_agent_process(editor, LEMON, *args, env=env, cwd=workspace) as (
            conn,
            _,
        ):
            try:
                await conn.initialize(
                    protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities
                )
            except RequestError as exc:
                refused = str(exc) + str(exc.data)
            else:
                raise AssertionError("initialize was not refused")
            assert "another machine" in refused
            assert "--daemon-tools" in refused
            assert f"ssh {address} lemon acp" in refused

        async with spawn_agent_process(
            editor, LEMON, *args, "--daemon-tools", env=env, cwd=workspace
        ) as (conn, _):
            await conn.initialize(
                protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities
            )
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            await _tool(conn, session.session_id, 'read {"path": "notes.txt"}')
    assert editor.calls == []
    assert "on the daemon's disk" in editor.outputs()
