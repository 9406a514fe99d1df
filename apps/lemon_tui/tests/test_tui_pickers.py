"""The session switcher (Ctrl+X) and the model picker (Ctrl+O) against a real daemon; a
session left keeps collecting unread events in the background."""

from __future__ import annotations

from typing import TypeVar

from textual.pilot import Pilot

from lemon_control_plane import ControlPlane, WebSocketSessionPort
from lemon_core.execution import RunRequest
from lemon_tui import LemonTUI
from lemon_tui._editor import Editor
from lemon_tui._pickers import ModelPicker, SessionSwitcher, age
from lemon_tui._widgets import AnswerBlock, UserBlock

from .conftest import app_for, status_text, until

EARLIER = "agent:default:main:sub:earlier"
Picker = TypeVar("Picker", SessionSwitcher, ModelPicker)


async def opened(pilot: Pilot[object], app: LemonTUI, key: str, screen: type[Picker]) -> Picker:
    """Press ``key`` and wait for the ``screen`` it opens; that screen."""
    await pilot.press(key)
    await until(pilot, lambda: isinstance(app.screen, screen), f"the {screen.__name__}")
    shown = app.screen
    assert isinstance(shown, screen)
    return shown


async def ran(other: WebSocketSessionPort, key: str, prompt: str) -> None:
    """Run ``prompt`` in ``key`` from another client and wait for its end."""
    stream = other.watch(key)
    receipt = await other.submit(RunRequest(origin="test", session_key=key, prompt=prompt))
    while True:
        event = await stream.get()
        if type(event).__name__ == "RunEnded" and event.run_id == receipt.run_id:  # type: ignore[union-attr]
            break
    stream.close()


async def test_ctrl_x_lists_sessions_and_switches(
    daemon: ControlPlane, other: WebSocketSessionPort
) -> None:
    await ran(other, EARLIER, "/echo from the earlier session")
    app = app_for(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        switcher = await opened(pilot, app, "ctrl+x", SessionSwitcher)
        assert EARLIER in switcher.shown
        assert "agent:default:main" in switcher.shown  # the current one, not run yet
        await pilot.press(*"earlier")
        assert switcher.shown == [EARLIER]
        await pilot.press("enter")
        await until(pilot, lambda: app.session == EARLIER, "switched")
        await until(pilot, lambda: bool(app.query(AnswerBlock)), "its history")
        assert app.query(AnswerBlock)[0].text == "from the earlier session"
        assert app.query_one("#input", Editor).has_focus
        # The session left is watched in the background: its news is counted as unread.
        await ran(other, "agent:default:main", "/echo news in main")
        await until(pilot, lambda: app.background.get("agent:default:main") == 1, "unread")
        assert "1 unread (Ctrl+X)" in status_text(app)
        await opened(pilot, app, "ctrl+x", SessionSwitcher)
        await pilot.press(*"main")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, SessionSwitcher), "left")
        assert app.session == EARLIER
        await opened(pilot, app, "ctrl+x", SessionSwitcher)
        await pilot.press(*"default:main ")
        await pilot.press("enter")
        await until(pilot, lambda: app.session == "agent:default:main", "back")
        await until(pilot, lambda: bool(app.query(UserBlock)), "its history")
        assert "agent:default:main" not in app.background
        assert "unread" not in status_text(app)
        # A session this client never opened counts too (one watch_all stream).
        await ran(other, "agent:default:main:sub:stranger", "/echo from another client")
        await until(pilot, lambda: app.background.get("agent:default:main:sub:stranger") == 1, "")
        assert "1 unread (Ctrl+X)" in status_text(app)


async def test_the_switcher_offers_a_new_session(daemon: ControlPlane) -> None:
    app = app_for(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        switcher = await opened(pilot, app, "ctrl+x", SessionSwitcher)
        assert switcher.shown[0] == "+new"
        await pilot.press(*"new", "enter")
        await until(pilot, lambda: ":sub:" in app.session, "a new session")


async def test_ctrl_o_picks_a_model(daemon: ControlPlane) -> None:
    app = app_for(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        picker = await opened(pilot, app, "ctrl+o", ModelPicker)
        assert picker.shown[0].ref == "offline:offline"  # the default first
        await pilot.press(*"gpt-4o gpt")
        assert [m.ref for m in picker.shown] == ["openai:gpt-4o"]
        await pilot.press("enter")
        await until(pilot, lambda: app.model == "openai:gpt-4o", "taken")
        assert "gpt-4o · ctx" in status_text(app)
        assert "0% 0/128k" in status_text(app)  # no run yet: the window, nothing used
        assert app.context_window() == 128_000
        await opened(pilot, app, "ctrl+o", ModelPicker)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ModelPicker), "left")
        assert app.model == "openai:gpt-4o"


def test_age_is_one_short_word() -> None:
    now = 10_000_000_000
    assert age(0, now) == ""
    assert age(now - 1000, now) == "now"
    assert age(now - 59_000, now) == "now"  # (so a snapshot taken within a minute is stable)
    assert age(now - 5 * 60_000, now) == "5m"
    assert age(now - 3 * 3_600_000, now) == "3h"
    assert age(now - 2 * 86_400_000, now) == "2d"
