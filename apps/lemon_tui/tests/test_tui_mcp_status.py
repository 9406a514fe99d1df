"""``/mcp`` against a real daemon with MCP servers configured: it lists each server's state
(``mcp.status``) and subscribes the connection to the ``mcp`` topic first, so a server that
fails later (the first run starts it) updates its row and is said in the transcript."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lemon_control_plane import ControlPlane, ControlPlaneOptions
from lemon_core.config import load_config
from lemon_runtime import Runtime
from lemon_tui import LemonTUI
from lemon_tui._editor import Editor
from lemon_tui._mcp import from_event, from_status
from lemon_tui._widgets import NoteLine

from .conftest import NO_APPROVALS, app_for, until


@pytest.fixture
async def mcp_daemon(tmp_path: Path) -> AsyncIterator[ControlPlane]:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(
        '[mcp.servers.gone]\ncommand = "/nonexistent/mcp-server"\n', encoding="utf-8"
    )
    loaded = load_config(home=home, cwd=work, environ={})
    options = [ControlPlaneOptions(port=0, cwd=str(work))]
    async with Runtime(profile="daemon", config=loaded, options=options) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        yield plane


def notes(app: LemonTUI) -> str:
    return "\n".join(str(n.render()) for n in app.query(NoteLine))


async def test_mcp_lists_the_servers_and_hears_a_failure(mcp_daemon: ControlPlane) -> None:
    app = app_for(mcp_daemon, NO_APPROVALS)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        app.query_one("#input", Editor).value = "/mcp"
        await pilot.press("enter")
        await until(pilot, lambda: "gone: not started" in notes(app), "listed, not started")
        assert app.mcp_watching
        app.query_one("#input", Editor).value = "/echo hi"  # a run: it starts the servers
        await pilot.press("enter")
        await until(pilot, lambda: app.mcp_servers["gone"].state == "failed", "the event")
        await until(pilot, lambda: "MCP gone: failed" in notes(app), "said as it happened")
        assert "cannot start" in notes(app)
        app.query_one("#input", Editor).value = "/mcp"
        await pilot.press("enter")
        await until(pilot, lambda: notes(app).count("gone: failed") == 2, "listed, failed")


def test_the_rows_of_both_payloads() -> None:
    rows = from_status({"version": 1, "servers": [
        {"name": "a", "state": "ready", "tools": 3, "detail": "stdio", "last_error": None,
         "needs_login": False},
        {"name": "b", "state": "failed", "tools": 0, "detail": "", "last_error": "401",
         "needs_login": True},
        {"state": "ready"}, "junk",
    ]})  # fmt: skip
    assert [r.line() for r in rows] == ["a: connected · 3 tools · stdio", "b: needs login · 401"]
    assert from_status(None) == []
    event = from_event({"name": "a", "state": "disconnected", "tools": 1, "error": "lost"})
    assert event is not None
    assert event.line() == "a: disconnected · lost"
    assert from_event({"state": "failed"}) is None
