"""``lemon mcp serve``: Lemon's coding tools to an MCP client, tested with the official ``mcp``
SDK's client over stdio against the real command (a subprocess): what is offered, that the
gate still applies (secret files refused, writes asked through elicitation), and that a
client without elicitation cannot approve."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

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


@asynccontextmanager
async def _session(
    home: Path, work: Path, *args: str, elicit: Any = None
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=LEMON, args=["mcp", "serve", *args], cwd=str(work),
        env={"LEMON_HOME": str(home)},
    )  # fmt: skip
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, elicitation_callback=elicit) as session,
    ):
        await session.initialize()
        yield session


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_the_read_tools_are_served_and_secret_files_refused(
    dirs: tuple[Path, Path],
) -> None:
    home, work = dirs
    async with _session(home, work) as session:
        listed = await session.list_tools()
        assert [t.name for t in listed.tools] == ["read", "ls", "find", "grep"]
        read = await session.call_tool("read", {"path": "notes.txt"})
        assert not read.is_error
        assert "beta" in _text(read)
        grep = await session.call_tool("grep", {"pattern": "alph"})
        assert "notes.txt" in _text(grep)
        secret = await session.call_tool("read", {"path": ".env"})
        assert secret.is_error
        assert "hunter2" not in _text(secret)
        bad = await session.call_tool("read", {"nope": 1})
        assert bad.is_error
        assert "invalid arguments" in _text(bad)


async def test_a_write_asks_the_person_through_elicitation(dirs: tuple[Path, Path]) -> None:
    home, work = dirs
    asked: list[str] = []

    async def approve(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async with _session(home, work, "--allow-write", elicit=approve) as session:
        names = [t.name for t in (await session.list_tools()).tools]
        assert names == ["read", "write", "edit", "ls", "find", "grep", "bash"]
        wrote = await session.call_tool("write", {"path": "new.txt", "content": "made\n"})
        assert not wrote.is_error, _text(wrote)
    assert (work / "new.txt").read_text() == "made\n"
    assert len(asked) == 1
    assert "write" in asked[0]
    assert "new.txt" in asked[0]


async def test_a_declined_write_does_not_run(dirs: tuple[Path, Path]) -> None:
    home, work = dirs

    async def decline(_ctx: Any, _params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with _session(home, work, "--allow-write", elicit=decline) as session:
        refused = await session.call_tool("bash", {"command": "touch ran.txt"})
        assert refused.is_error
        assert "did not run" in _text(refused)
    assert not (work / "ran.txt").exists()


async def test_a_client_without_elicitation_cannot_approve_a_write(
    dirs: tuple[Path, Path],
) -> None:
    home, work = dirs
    async with _session(home, work, "--allow-write") as session:
        refused = await session.call_tool("write", {"path": "x.txt", "content": "x"})
        assert refused.is_error
        assert "did not run" in _text(refused)
        assert "offers no elicitation, so nobody could be asked" in _text(refused)
    assert not (work / "x.txt").exists()
