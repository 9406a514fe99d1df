"""Web tool cards in the terminal: web_fetch's URL, status, size and time, and a browser
screenshot named in a text line (a terminal cannot show images reliably), against a real
daemon whose home config allows a real HTTP server on 127.0.0.1 (and its browser for it)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from lemon_browser.testing import FixtureSite
from lemon_control_plane import ControlPlane, ControlPlaneOptions
from lemon_core.config import load_config
from lemon_runtime import Runtime
from lemon_tui import LemonTUI
from lemon_tui._editor import Editor
from lemon_tui._widgets import ToolCardView

from .conftest import NO_APPROVALS, app_for, until

HAS_CHROMIUM = Path("/usr/bin/chromium").exists()
PAGE = "<html><head><title>Card page</title></head><body><h1>Cards</h1><p>hello</p></body></html>"


@pytest.fixture
async def web_daemon(tmp_path: Path) -> AsyncIterator[tuple[ControlPlane, FixtureSite]]:
    async with FixtureSite() as site:
        site.page("/page", PAGE)
        home = tmp_path / "home"
        home.mkdir()
        browser = "true" if HAS_CHROMIUM else "false"
        (home / "config.toml").write_text(
            f'[web]\nbrowser = {browser}\nallow_hosts = ["{site.host_port}"]\n'
        )
        work = tmp_path / "work"
        work.mkdir()
        loaded = load_config(home=home, cwd=work, environ={})
        options = [ControlPlaneOptions(port=0, cwd=str(work))]
        async with Runtime(profile="daemon", config=loaded, options=options) as runtime:
            plane = runtime.handle("lemon_control_plane")
            assert isinstance(plane, ControlPlane)
            yield plane, site


async def _run(
    app: LemonTUI, pilot: Pilot[Any], line: str, *, wait_s: float = 15.0
) -> ToolCardView:
    before = len(app.query(ToolCardView))
    app.query_one("#input", Editor).value = line
    await pilot.press("enter")
    await until(pilot, lambda: len(app.query(ToolCardView)) > before, "a card")
    card = app.query(ToolCardView).last()
    done = lambda: card.state != "running" and not app.waiting_for  # noqa: E731
    await until(pilot, done, "done", wait_s=wait_s)
    return card


async def test_web_cards_show_url_status_size_time_and_name_the_screenshot(
    web_daemon: tuple[ControlPlane, FixtureSite],
) -> None:
    daemon, site = web_daemon
    app = app_for(daemon, NO_APPROVALS)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        fetch = await _run(app, pilot, "/tool web_fetch " + json.dumps({"url": site.url("/page")}))
        text = str(fetch.render())
        assert fetch.state == "ok"
        assert f"↳ {site.url('/page')} · HTTP 200 · {len(PAGE)} B · " in text
        assert text.splitlines()[1].rstrip().endswith(" s")
        if not HAS_CHROMIUM:
            return
        opened = json.dumps({"action": "open", "url": site.url("/page")})
        # Chromium's first start in a loaded suite can take longer than a tool answer.
        await _run(app, pilot, "/tool browser " + opened, wait_s=90.0)
        shot = await _run(app, pilot, '/tool browser {"action": "screenshot"}', wait_s=60.0)
        lines = str(shot.render()).splitlines()
        assert shot.state == "ok"
        assert lines[1].startswith(f"↳ {site.url('/page')}")
        assert lines[2].startswith("▣ screenshot (1280x720 PNG · ")
        assert "sent to the model as an image; not drawn here (a terminal cannot show" in lines[2]
