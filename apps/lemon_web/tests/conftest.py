"""Fixtures: one real daemon (the booted ``daemon`` profile: the run pipeline, the offline
model, a real SQLite store, the control plane on 127.0.0.1:<ephemeral> with this page mounted)
and one Debian Chromium per test module, driven by Playwright (never a downloaded browser).

The offline model is the scripted model: ``/echo TEXT`` answers exactly TEXT, streamed word by
word; ``/tool NAME {json}`` calls a tool (``bash``, ``edit`` and ``write`` ask for approval).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from lemon_control_plane import ControlPlane, ControlPlaneOptions
from lemon_control_plane.testing import ClientFactory, plane_client
from lemon_core.config import load_config
from lemon_runtime import Runtime

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: Screenshots of the main states (gitignored), written by the tests to be looked at.
SCREENSHOTS = Path(__file__).parent / "screenshots"

os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")


def browser_missing() -> str | None:
    """Why browser tests cannot run here, or ``None``."""
    if not Path(CHROMIUM).exists():
        return (
            f"Debian's Chromium is not installed ({CHROMIUM}); ./scripts/test installs it with "
            "apt-get when run as root, or run: apt-get install -y chromium"
        )
    try:
        import playwright.async_api  # noqa: F401  # re-exported names are used by the tests
    except ImportError:
        return "the playwright package is not installed (it is in the root dev group: uv sync)"
    return None


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("work")
    return path


def make_runtime(home: Path, work: Path, **control_plane: Any) -> Runtime:
    home.mkdir(exist_ok=True)
    loaded = load_config(home=home, cwd=work, environ={})
    settings = {"port": 0, "cwd": str(work), **control_plane}
    return Runtime(
        profile="daemon", config=loaded, options=[ControlPlaneOptions(settings=settings)]
    )


@pytest.fixture(scope="module")
def runtime_at(work: Path) -> Callable[..., Runtime]:
    """``runtime_at(home, **control_plane_settings)``: a daemon-profile runtime (not started)."""

    def make(home: Path, **control_plane: Any) -> Runtime:
        return make_runtime(home, work, **control_plane)

    return make


@pytest.fixture(scope="module")
def boot(tmp_path_factory: pytest.TempPathFactory, work: Path) -> Callable[..., Runtime]:
    def make(**control_plane: Any) -> Runtime:
        return make_runtime(tmp_path_factory.mktemp("home"), work, **control_plane)

    return make


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def daemon(boot: Callable[..., Runtime]) -> AsyncIterator[ControlPlane]:
    async with boot() as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        yield plane


@pytest.fixture(scope="module")
def client(daemon: ControlPlane) -> ClientFactory:
    return plane_client(daemon)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Any]:
    reason = browser_missing()
    if reason is not None:
        pytest.skip(reason)
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        await chromium.close()


async def sign_in(ctx: Any, daemon: ControlPlane) -> None:
    """Sign the browser context in as the daemon's owner (with its local token, as the page's
    own login form does: even a loopback daemon needs a token)."""
    response = await ctx.request.post(
        daemon.url + "/login", data={"token": daemon.local_token}, headers={"origin": daemon.url}
    )
    assert response.ok, await response.text()


@pytest.fixture(scope="module")
def signed_in(daemon: ControlPlane) -> Callable[[Any], Any]:
    """``await signed_in(ctx)``: sign a browser context of one's own in as the owner."""

    async def sign(ctx: Any) -> None:
        await sign_in(ctx, daemon)

    return sign


@pytest_asyncio.fixture(loop_scope="module")
async def context(browser: Any, daemon: ControlPlane) -> AsyncIterator[Any]:
    ctx = await browser.new_context(viewport={"width": 1100, "height": 800})
    await sign_in(ctx, daemon)
    yield ctx
    await ctx.close()


@pytest_asyncio.fixture(loop_scope="module")
async def page(context: Any) -> AsyncIterator[Any]:
    tab = await context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.page_errors = errors
    yield tab


@pytest.fixture
def shot() -> Callable[[str], Path]:
    """``shot(name)``: where to write the screenshot of a main state."""

    def path(name: str) -> Path:
        SCREENSHOTS.mkdir(exist_ok=True)
        return SCREENSHOTS / f"{name}.png"

    return path
