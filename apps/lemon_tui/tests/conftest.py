"""Fixtures: a real daemon (the daemon profile: the run pipeline with the offline provider, a
real SQLite store, its control plane on 127.0.0.1:<ephemeral>) and helpers to drive the app
with Textual's Pilot, waiting on conditions (bounded), never on sleeps."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from textual.pilot import Pilot

from lemon_control_plane import ControlPlane, ControlPlaneOptions, WebSocketSessionPort
from lemon_core.config import load_config
from lemon_core.execution import ALL_TOOLS, ToolPolicy
from lemon_runtime import Runtime
from lemon_tui import LemonTUI, websocket_connector
from lemon_tui._widgets import StatusLine

WAIT_S = 15.0


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    """The app freezes the garbage collector's objects after each run (settle_memory): undo
    it after each test, so no other test in this process inherits a frozen heap."""
    yield
    gc.unfreeze()


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[ControlPlane]:
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    loaded = load_config(home=home, cwd=work, environ={})
    options = [ControlPlaneOptions(port=0, cwd=str(work))]
    async with Runtime(profile="daemon", config=loaded, options=options) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        yield plane


async def until(
    pilot: Pilot[object], condition: Callable[[], bool], what: str, *, wait_s: float = WAIT_S
) -> None:
    """Let the app run until ``condition()`` holds; fail after ``wait_s`` seconds."""
    async with asyncio.timeout(wait_s):
        while not condition():
            await pilot.pause(0.01)
    assert condition(), what


def app_for(daemon: ControlPlane, policy: ToolPolicy | None = None) -> LemonTUI:
    """A TUI whose runs use ``policy`` as their whole policy: it narrows the daemon's, and
    every question it does not ask itself is preapproved (the tests' owner may do that)."""
    return LemonTUI(
        websocket_connector(daemon.ws_url, token=daemon.local_token),
        where=daemon.ws_url,
        tool_policy=policy,
        preapproved=frozenset() if policy is None else frozenset({ALL_TOOLS}),
    )


def status_text(app: LemonTUI) -> str:
    return str(app.query_one("#status", StatusLine).render())


@pytest.fixture
async def other(daemon: ControlPlane) -> AsyncIterator[WebSocketSessionPort]:
    """A second client of the same daemon (another terminal, a web page)."""
    async with WebSocketSessionPort(daemon.ws_url, token=daemon.local_token) as port:
        yield port


NO_APPROVALS = ToolPolicy()
ASK_BASH = ToolPolicy(require_approval=frozenset({"bash"}))


async def open_panel(pilot: Pilot[object], app: LemonTUI) -> None:
    """Wait for an approval to wait, then open its panel with the explicit key (Tab)."""
    await until(pilot, lambda: app.panel is not None, "an approval waits")
    await pilot.press("tab")
    await until(pilot, lambda: type(app.screen).__name__ == "ApprovalPanel", "the panel")
