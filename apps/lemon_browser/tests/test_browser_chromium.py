"""The browser (Debian's Chromium through Playwright) against fixture pages on 127.0.0.1:
snapshot with refs, a click that changes the page, typing into a form, a screenshot, blocked
navigation and sub-requests, cookies per session, idle close."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lemon_browser import AddressGuard, FetchRefused
from lemon_browser.browser import CHROMIUM, Browsers
from lemon_browser.testing import FixtureSite

os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason="Debian's Chromium is not installed: apt-get install -y chromium",
)

PAGE = """<!doctype html><html><head><title>Form page</title></head><body>
<h1>Sign up</h1><p>Fill in the form.</p>
<input id="name" placeholder="your name">
<button id="go" onclick="document.getElementById('out').innerText =
  'Hello ' + document.getElementById('name').value; document.title = 'Done'">Greet</button>
<p id="out">nobody greeted</p>
<img src="http://169.254.169.254/latest/meta-data/pixel.png">
</body></html>"""


@pytest.fixture
async def site() -> AsyncIterator[FixtureSite]:
    async with FixtureSite() as s:
        s.page("/form", PAGE)
        s.page("/set", "<p>cookie set</p>", headers={"Set-Cookie": "sid=abc; Path=/"})
        s.page("/echo", "<p>echo</p>")
        yield s


async def test_open_snapshot_type_click_and_screenshot(site: FixtureSite) -> None:
    async with Browsers(guard=AddressGuard(allow_hosts=[site.host_port])) as browsers:
        session = await browsers.session("s1")
        snap = await session.open(site.url("/form"))
        assert "# Form page" in snap
        assert "# Sign up" in snap
        assert '[1] input[text] "your name"' in snap
        assert '[2] button "Greet"' in snap
        await session.type(1, "Ada")
        after = await session.click(2)
        assert "Hello Ada" in after
        assert "# Done" in after
        png = await session.screenshot()
        assert png.startswith(b"\x89PNG")
        # The metadata pixel was requested by the page and blocked by the guard.
        assert any("169.254.169.254" in url for url in session.blocked)


async def test_navigation_to_a_refused_address_is_blocked(site: FixtureSite) -> None:
    async with Browsers(guard=AddressGuard()) as browsers:  # no allow_hosts: loopback refused
        session = await browsers.session("s1")
        with pytest.raises(FetchRefused, match="loopback"):
            await session.open(site.url("/form"))
        with pytest.raises(FetchRefused, match="only http and https"):
            await session.open("file:///etc/passwd")
    assert site.requests == []


async def test_two_sessions_do_not_share_cookies_and_idle_ones_close(site: FixtureSite) -> None:
    guard = AddressGuard(allow_hosts=[site.host_port])
    async with Browsers(guard=guard, idle_s=3600) as browsers:
        one = await browsers.session("one")
        two = await browsers.session("two")
        await one.open(site.url("/set"))
        await one.open(site.url("/echo"))
        await two.open(site.url("/echo"))
        cookies = [r.headers.get("cookie") for r in site.requests if r.path == "/echo"]
        assert cookies == ["sid=abc", None]
        assert browsers.open_sessions == ("one", "two")
        browsers._idle_s = 0  # every context is now idle: the next call closes them
        assert await browsers.sweep() == 2
        assert browsers.open_sessions == ()


class Answers:
    """A resolver stub: ``public`` lookups answer a public address, the rest loopback."""

    def __init__(self, *, public: int) -> None:
        self.public = public
        self.calls = 0

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls += 1
        return ["93.184.215.14"] if self.calls <= self.public else ["127.0.0.1"]


class Fixed:
    async def resolve(self, host: str, port: int) -> list[str]:
        return ["127.0.0.1"]


async def test_chromium_connects_to_the_address_the_guard_checked(site: FixtureSite) -> None:
    # No resolver but the guard's knows "pinned.test": the page loads only because the
    # connection goes to the checked address, through the pinning proxy.
    guard = AddressGuard(allow_hosts=[f"pinned.test:{site.port}"], resolver=Fixed())
    async with Browsers(guard=guard) as browsers:
        session = await browsers.session("s1")
        snap = await session.open(f"http://pinned.test:{site.port}/form")
        assert "# Sign up" in snap
        assert browsers.proxy is not None
        assert browsers.proxy.statistics()["requests"] >= 1
    assert site.requests[0].headers["host"] == f"pinned.test:{site.port}"


async def test_dns_rebinding_after_the_check_never_reaches_the_private_answer(
    site: FixtureSite,
) -> None:
    # Chromium would resolve *.localhost to loopback itself; the two checks before Chromium
    # connects (the tool's and the route handler's) are answered a public address, the proxy's
    # (the one the connection uses) loopback: refused, and the loopback site sees nothing.
    resolver = Answers(public=2)
    async with Browsers(guard=AddressGuard(resolver=resolver)) as browsers:
        session = await browsers.session("s1")
        with pytest.raises(FetchRefused, match="loopback"):
            await session.open(f"http://rebind.localhost:{site.port}/form")
        assert browsers.proxy is not None
        assert [r.target for r in browsers.proxy.refusals] == [
            f"http://rebind.localhost:{site.port}/form"
        ]
    assert resolver.calls == 3
    assert site.requests == []


POPUPS = """<!doctype html><html><head><title>Popups</title></head><body>
<a id="new" href="/echo" target="_blank">open in a new tab</a>
<button id="spam" onclick="for (let i = 0; i < 5; i++) window.open('/echo?' + i)">spam</button>
</body></html>"""


async def test_a_page_cannot_open_more_pages(site: FixtureSite) -> None:
    # One page per session: a link to a new tab and window.open are closed at once (a page's
    # script could otherwise open pages without bound).
    site.page("/popups", POPUPS)
    async with Browsers(guard=AddressGuard(allow_hosts=[site.host_port])) as browsers:
        session = await browsers.session("s1")
        snap = await session.open(site.url("/popups"))
        assert '"open in a new tab"' in snap
        await session.click(1)
        await session.click(2)
        await session.popups_settled(6)
        assert session.context.pages == [session.page]
        assert session.popups_closed == 6
        # The session's own page still works.
        assert "# Popups" in await session.snapshot()
