"""SVG snapshots of the screens against a real daemon, compared with the committed files in
``snapshots/`` (Textual's own ``export_screenshot``; the app runs in the test's loop next to
the daemon). Look at them when they change: open the SVG in a browser.

    LEMON_UPDATE_SNAPSHOTS=1 .venv/bin/pytest apps/lemon_tui/tests/test_tui_snapshots.py

rewrites them. A mismatch leaves the new rendering next to the test's temporary files and
names it. What would differ between runs is pinned first: the cursor does not blink, and the
token figures (the system prompt holds the temporary working directory) are set to fixed
numbers.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from textual.pilot import Pilot

from lemon_control_plane import ControlPlane
from lemon_core.execution import ALL_TOOLS
from lemon_tui import LemonTUI, websocket_connector
from lemon_tui._editor import Editor
from lemon_tui._pickers import SessionSwitcher
from lemon_tui._slash import SessionUsage
from lemon_tui._widgets import AnswerBlock, ToolCardView

from .conftest import ASK_BASH, NO_APPROVALS, open_panel, until

SNAPSHOTS = Path(__file__).parent / "snapshots"
ANSWER = (
    "/echo Here is **the plan**:\n\n1. read `notes.txt`\n2. fix it\n\n```python\nprint('hi')\n```"
)


def pin(app: LemonTUI) -> None:
    """Fix what would differ between runs (see the module docstring)."""
    app.editor.cursor_blink = False
    app.usage[app.session] = SessionUsage(runs=1, input_tokens=1200, output_tokens=40)
    app.usage[app.session].context_tokens = 1200
    app.status.usage = "1,240 tokens"
    app.paint_status()


async def matches(pilot: Pilot[object], app: LemonTUI, name: str, tmp_path: Path) -> None:
    pin(app)
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    svg = app.export_screenshot(title=name)
    path = SNAPSHOTS / f"{name}.svg"
    if os.environ.get("LEMON_UPDATE_SNAPSHOTS") == "1":
        path.write_text(svg, encoding="utf-8")
        return
    assert path.exists(), f"no snapshot {path.name}: run with LEMON_UPDATE_SNAPSHOTS=1 first"
    if path.read_text(encoding="utf-8") != svg:
        new = tmp_path / f"{name}.new.svg"
        new.write_text(svg, encoding="utf-8")
        pytest.fail(f"{name} differs from {path}: the new rendering is {new}")


def app_on(daemon: ControlPlane, policy: object = None, **kwargs: object) -> LemonTUI:
    return LemonTUI(
        websocket_connector(daemon.ws_url, token=daemon.local_token),
        where="ws://127.0.0.1/ws",
        tool_policy=policy,  # type: ignore[arg-type]  # a ToolPolicy or None
        preapproved=frozenset() if policy is None else frozenset({ALL_TOOLS}),
        **kwargs,  # type: ignore[arg-type]  # shade=
    )


async def send(pilot: Pilot[object], app: LemonTUI, text: str) -> None:
    app.query_one("#input", Editor).value = text
    await pilot.press("enter")


@pytest.mark.parametrize("shade", ["dark", "light"])
async def test_the_main_screen(daemon: ControlPlane, tmp_path: Path, shade: str) -> None:
    app = app_on(daemon, shade=shade)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await until(pilot, lambda: app.models is not None, "the catalogue")
        await send(pilot, app, ANSWER)
        await until(pilot, lambda: bool(app.query(AnswerBlock)), "an answer")
        await until(pilot, lambda: not app.waiting_for, "ended")
        await matches(pilot, app, f"main_screen_{shade}", tmp_path)


async def test_a_tool_card_with_its_output_unfolded(daemon: ControlPlane, tmp_path: Path) -> None:
    app = app_on(daemon, NO_APPROVALS)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await until(pilot, lambda: app.models is not None, "the catalogue")
        await send(pilot, app, '/tool bash {"command": "printf \'one\\\\ntwo\\\\n\'"}')
        await until(pilot, lambda: not app.waiting_for and bool(app.query(ToolCardView)), "ran")
        await pilot.press("ctrl+t")
        await matches(pilot, app, "tool_card", tmp_path)


async def test_the_approval_panel(daemon: ControlPlane, tmp_path: Path) -> None:
    app = app_on(daemon, ASK_BASH)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await until(pilot, lambda: app.models is not None, "the catalogue")
        await send(pilot, app, '/tool bash {"command": "rm -rf build"}')
        await open_panel(pilot, app)
        await matches(pilot, app, "approval_panel", tmp_path)
        await pilot.press("4")


async def test_the_session_switcher(daemon: ControlPlane, tmp_path: Path) -> None:
    app = app_on(daemon)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await until(pilot, lambda: app.models is not None, "the catalogue")
        await send(pilot, app, "/echo a first session")
        await until(pilot, lambda: bool(app.query(AnswerBlock)) and not app.waiting_for, "ran")
        await pilot.press("ctrl+x")
        await until(pilot, lambda: isinstance(app.screen, SessionSwitcher), "the switcher")
        await matches(pilot, app, "session_switcher", tmp_path)


# The screen's colours: text styles and cell backgrounds (not the window chrome's buttons).
_COLOUR = re.compile(r"(?:-r\d+ \{ fill: |<rect fill=\")#([0-9a-f]{6})")


def hue(colour: str) -> int:
    """How far from a grey (0 for a grey; Rich's own title grey #c5c8c6 is 3)."""
    rgb = [int(colour[i : i + 2], 16) for i in (0, 2, 4)]
    return max(rgb) - min(rgb)


async def test_no_color_draws_without_hue(
    daemon: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = app_on(daemon, NO_APPROVALS)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await send(pilot, app, '/tool write {"path": "n.txt", "content": "x\\n"}')
        await until(pilot, lambda: not app.waiting_for and bool(app.query(ToolCardView)), "ran")
        await pilot.press("ctrl+t")
        pin(app)
        await pilot.pause()
        svg = app.export_screenshot()
    colours = {m.group(1) for m in _COLOUR.finditer(svg.lower())}
    assert len(colours) > 3
    assert [c for c in colours if hue(c) > 8] == []  # every colour is a grey
    assert "✓" in svg  # the state is still said without colour
    assert "+x" in svg
