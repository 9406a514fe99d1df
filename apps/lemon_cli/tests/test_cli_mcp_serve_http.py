"""``lemon mcp serve --http HOST:PORT``: the real command (a subprocess) on 127.0.0.1, used by
the official SDK's Streamable HTTP client: the same tools as on stdio, the gate still applies,
a bearer token from a variable is required, a public bind without one is refused, and SIGTERM
ends it cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import mcp.types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

LEMON = str(Path(sys.executable).parent / "lemon")


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text("", encoding="utf-8")
    (work / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    (work / ".env").write_text("API_KEY=hunter2\n", encoding="utf-8")
    return home, work


async def _spawn(
    home: Path, work: Path, *args: str, env: dict[str, str] | None = None
) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        LEMON, "mcp", "serve", *args, cwd=work,
        env={**os.environ, "LEMON_HOME": str(home), **(env or {})},
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


@asynccontextmanager
async def _served(
    home: Path, work: Path, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[str, asyncio.subprocess.Process]]:
    proc = await _spawn(home, work, "--http", "127.0.0.1:0", *args, env=env)
    assert proc.stderr is not None
    try:
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        assert "serving Lemon's tools at " in line, line
        yield line.rsplit(" ", 1)[1].strip(), proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 10)


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_the_sdk_client_uses_the_tools_over_http(dirs: tuple[Path, Path]) -> None:
    home, work = dirs
    async with (
        _served(home, work) as (url, proc),
        streamable_http_client(url) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listed = await session.list_tools()
        assert [t.name for t in listed.tools] == ["read", "ls", "find", "grep"]
        read = await session.call_tool("read", {"path": "notes.txt"})
        assert "alpha" in _text(read)
        assert not read.is_error
        secret = await session.call_tool("read", {"path": ".env"})
        assert secret.is_error
        assert "hunter2" not in _text(secret)
    assert proc.returncode == 0  # SIGTERM ended it cleanly


async def test_writes_ask_and_a_client_without_elicitation_cannot_approve(
    dirs: tuple[Path, Path],
) -> None:
    home, work = dirs
    async with (
        _served(home, work, "--allow-write") as (url, _proc),
        streamable_http_client(url) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        names = [t.name for t in (await session.list_tools()).tools]
        assert sorted(names) == ["bash", "edit", "find", "grep", "ls", "read", "write"]
        wrote = await session.call_tool("write", {"path": "new.txt", "content": "x"})
        assert wrote.is_error
    assert not (work / "new.txt").exists()


async def test_a_token_from_a_variable_is_required(dirs: tuple[Path, Path]) -> None:
    home, work = dirs
    env = {"MCP_SERVE_TOKEN": "t0ken"}
    async with (
        _served(home, work, "--token-env", "MCP_SERVE_TOKEN", env=env) as (url, _proc),
        httpx.AsyncClient() as http,
    ):
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip
        accept = {"Accept": "application/json, text/event-stream"}
        assert (await http.post(url, json=init, headers=accept)).status_code == 401
        r = await http.post(url, json=init, headers={**accept, "Authorization": "Bearer t0ken"})
        assert r.status_code == 200
        assert r.headers["mcp-session-id"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--http", "0.0.0.0:0"], "bearer token is required"),
        (["--http", "nowhere"], "HOST:PORT"),
        (["--http", "127.0.0.1:0", "--token-env", "LEMON_TEST_UNSET_TOKEN"], "unset or empty"),
        (["--token-env", "X"], "go with --http"),
    ],
)
async def test_bad_options_are_refused_clearly(
    dirs: tuple[Path, Path], args: list[str], said: str
) -> None:
    home, work = dirs
    proc = await _spawn(home, work, *args)
    _out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1
    assert said in err.decode()
    assert "Traceback" not in err.decode()
