"""The model picker in a real browser: it shows the session's model and sets it with
``sessions.patch``; the session's runs then use it, a reload shows it, and a refused change is
shown and reverted. The daemon of this module has ``[defaults] model = "offline:alpha"``, so
``models.list`` names two offline models (``offline:alpha``, the default, and the catalogue's
``offline:offline``) whose runs answer locally and report which one ran."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from lemon_control_plane import ControlPlane
from lemon_control_plane.testing import plane_client
from lemon_runtime import Runtime

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT_MS = 10_000
DEFAULT = "offline:alpha"
OTHER = "offline:offline"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def daemon(
    tmp_path_factory: pytest.TempPathFactory, runtime_at: Callable[..., Runtime]
) -> AsyncIterator[ControlPlane]:
    home = tmp_path_factory.mktemp("models-home")
    (home / "config.toml").write_text(f'[defaults]\nmodel = "{DEFAULT}"\n', encoding="utf-8")
    async with runtime_at(home) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        yield plane


async def open_chat(page: Any, url: str) -> str:
    await page.goto(url)
    await page.wait_for_selector("body[data-ready]", timeout=WAIT_MS)
    key = await page.evaluate("window.lemon.sessionKey")
    assert isinstance(key, str)
    return key


async def picker_shows(page: Any, ref: str) -> None:
    await page.wait_for_function(
        "(ref) => { const s = document.querySelector('#model');"
        " return !s.hidden && !s.disabled && s.value === ref; }",
        arg=ref,
        timeout=WAIT_MS,
    )


async def run_model(page: Any, n: int, text: str) -> str:
    """Send ``/echo text`` and return the usage line of the ``n``-th answer (it names the
    model the run used, from the run's completion)."""
    await page.fill("#composer-input", f"/echo {text}")
    await page.keyboard.press("Enter")
    status = page.locator(".msg.assistant .run-status").nth(n)
    await status.filter(has_text="tokens").wait_for(timeout=WAIT_MS)
    line = await status.inner_text()
    assert isinstance(line, str)
    return line


async def session_detail(daemon: ControlPlane, key: str) -> dict[str, Any]:
    async with plane_client(daemon)() as c:
        detail = await c.call("session.detail", {"sessionKey": key})
    session = detail["session"]
    assert isinstance(session, dict)
    return session


async def test_the_picked_model_is_the_sessions_and_its_runs_use_it(
    page: Any, daemon: ControlPlane, shot: Any
) -> None:
    key = await open_chat(page, daemon.url + "/")
    await picker_shows(page, DEFAULT)  # a new session shows the daemon's default
    assert DEFAULT in await run_model(page, 0, "before")

    await page.select_option("#model", OTHER)
    await picker_shows(page, OTHER)
    session = await session_detail(daemon, key)
    assert session["modelOverride"] == OTHER
    assert session["modelSource"] == "session"

    async with plane_client(daemon)() as watcher:
        line = await run_model(page, 1, "after")
        started = await watcher.event("agent", type="started", sessionKey=key)
    assert OTHER in line
    assert DEFAULT not in line
    assert (started["payload"]["provider"], started["payload"]["model"]) == ("offline", "offline")
    assert await page.locator("#model-error").is_hidden()
    await page.screenshot(path=shot("model-picked"))

    await page.reload()
    await page.wait_for_selector("body[data-ready]", timeout=WAIT_MS)
    await picker_shows(page, OTHER)

    # Another session keeps the default; switching back shows this session's model again.
    await page.click("#new-chat")
    await picker_shows(page, DEFAULT)
    await page.locator(f'#sessions a[data-key="{key}"]').click()
    await picker_shows(page, OTHER)
    assert page.page_errors == []


async def test_a_refused_model_change_is_shown_and_the_picker_reverts(
    page: Any, daemon: ControlPlane
) -> None:
    key = await open_chat(page, daemon.url + "/")
    await picker_shows(page, DEFAULT)
    # A model the daemon does not know (an option added by hand, as a stale list would have).
    await page.evaluate(
        """() => { const o = document.createElement('option');
        o.value = 'offline-typo:nope'; o.textContent = 'Gone';
        document.querySelector('#model').append(o); }"""
    )
    await page.select_option("#model", "offline-typo:nope")
    error = page.locator("#model-error")
    await error.wait_for(timeout=WAIT_MS)
    text = await error.inner_text()
    assert "Could not switch the model to offline-typo:nope" in text
    assert "unknown model" in text
    await picker_shows(page, DEFAULT)
    assert (await session_detail(daemon, key))["modelSource"] == "default"
    assert DEFAULT in await run_model(page, 0, "still the default")

    # A change that goes through clears the error.
    await page.select_option("#model", OTHER)
    await picker_shows(page, OTHER)
    assert await error.is_hidden()
    assert page.page_errors == []


async def test_a_model_set_by_another_client_shows_on_reconnect_and_at_a_runs_start(
    page: Any, daemon: ControlPlane
) -> None:
    key = await open_chat(page, daemon.url + "/")
    await picker_shows(page, DEFAULT)
    async with plane_client(daemon)() as other:
        await other.call("sessions.patch", {"sessionKey": key, "model": OTHER})
    await page.evaluate("window.lemon.drop()")
    await picker_shows(page, OTHER)
    assert OTHER in await run_model(page, 0, "from the other client's choice")
    # Changed again elsewhere while the page stays connected: the next run's start shows it.
    async with plane_client(daemon)() as other:
        await other.call("sessions.patch", {"sessionKey": key, "model": DEFAULT})
        sent = await other.call("chat.send", {"sessionKey": key, "prompt": "/echo elsewhere"})
        await other.completed(sent["runId"])
    await picker_shows(page, DEFAULT)
