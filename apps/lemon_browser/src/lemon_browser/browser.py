"""A headless browser per session: Debian's Chromium driven by Playwright, every request
through the address guard.

:class:`Browsers` starts Chromium lazily (never a downloaded browser: ``executable_path`` is
the system's, default ``/usr/bin/chromium``) and keeps one browser *context* per session
(cookies and storage per session, never shared), each with one page. Every request a page
makes (navigation, sub-resources, XHR, redirects) goes through a route handler that asks
:meth:`AddressGuard.check`; a refused one is aborted and recorded (``blocked``).
``file://``, ``ftp://`` and other schemes are refused; downloads are refused
(``accept_downloads=False``). A context unused for ``idle_s`` is closed at the next call
(:meth:`Browsers.sweep`); at most ``max_sessions`` contexts are open (the least recently used
is closed first).

:class:`BrowserSession` actions: :meth:`~BrowserSession.open`, :meth:`~BrowserSession.snapshot`
(the page's headings, text and interactive elements, each element with a numbered ``ref``,
bounded), :meth:`~BrowserSession.click`, :meth:`~BrowserSession.type`,
:meth:`~BrowserSession.press`, :meth:`~BrowserSession.scroll`,
:meth:`~BrowserSession.screenshot` (PNG bytes), :meth:`~BrowserSession.back`.

Pinned like :class:`~lemon_browser.Fetcher`: Chromium is launched with the
:class:`~lemon_browser.proxy.PinningProxy` as its proxy, so it never resolves a name or
connects to a server itself; the proxy checks each request with the same guard and connects
to the checked address (a name that answers a public address to the route handler's check
and a private one afterwards never reaches the private one).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from lemon_browser.errors import FetchFailed, FetchRefused, WebError, WebUsageError
from lemon_browser.guard import AddressGuard
from lemon_browser.proxy import PinningProxy

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page, Playwright, Route

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "BrowserSession", "Browsers"]

CHROMIUM: Final = "/usr/bin/chromium"
CHROMIUM_ARGS: Final = (
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
)  # fmt: skip
_LOCAL_SCHEMES: Final = frozenset({"about", "data", "blob"})
_SNAPSHOT_JS: Final = """(maxItems) => {
  const out = [];
  let ref = 0;
  const interactive = 'a[href],button,input,textarea,select,[role=button],[role=link],[onclick]';
  const seen = new Set();
  const visible = (el) => {
    const s = getComputedStyle(el);
    const r = el.getBoundingClientRect();
    return s.display !== 'none' && s.visibility !== 'hidden' && r.width > 0 && r.height > 0;
  };
  const walker = document.createTreeWalker(document.body || document.documentElement,
                                           NodeFilter.SHOW_ELEMENT);
  let el = walker.currentNode;
  while (el && out.length < maxItems) {
    if (el.matches && el.matches(interactive) && visible(el)) {
      ref += 1;
      el.setAttribute('data-lemon-ref', String(ref));
      const tag = el.tagName.toLowerCase();
      const kind = el.getAttribute('role') || (tag === 'a' ? 'link' : tag === 'input'
        ? 'input[' + (el.type || 'text') + ']' : tag);
      const label = (el.getAttribute('aria-label') || el.innerText || el.value ||
                     el.getAttribute('placeholder') || el.name || '').trim().slice(0, 120);
      out.push('[' + ref + '] ' + kind + ' "' + label.replace(/\\s+/g, ' ') + '"');
      seen.add(el);
    } else if (/^H[1-6]$/.test(el.tagName) && visible(el)) {
      out.push('#'.repeat(Number(el.tagName[1])) + ' ' + el.innerText.trim().slice(0, 200));
    } else if (el.tagName === 'P' && visible(el)) {
      out.push(el.innerText.trim().slice(0, 500));
    }
    el = walker.nextNode();
  }
  return out;
}"""


@dataclass
class BrowserSession:
    """One session's browser context and page (loop-only; made by :class:`Browsers`)."""

    context: BrowserContext
    page: Page
    guard: AddressGuard
    timeout_s: float
    max_snapshot_chars: int
    proxy: PinningProxy | None = None
    blocked: list[str] = field(default_factory=list)
    used_at: float = field(default_factory=time.monotonic)
    popups_closed: int = 0
    """Pages the page tried to open (``target=_blank``, ``window.open``): each is closed at
    once, so a session never holds more than its one page."""
    _popup_seen: asyncio.Event = field(default_factory=asyncio.Event)

    async def _close_popup(self, popup: Page) -> None:
        if popup is self.page:
            return
        with contextlib.suppress(Exception):  # it may have closed itself already
            await popup.close()
        self.popups_closed += 1
        self._popup_seen.set()

    async def popups_settled(self, count: int, timeout_s: float = 10.0) -> None:
        """Wait until ``count`` pages opened by the page have been closed (for tests and
        callers that just clicked something that opens windows)."""
        async with asyncio.timeout(timeout_s):
            while self.popups_closed < count:
                self._popup_seen.clear()
                await self._popup_seen.wait()

    async def open(self, url: str) -> str:
        """Navigate to ``url`` (checked first); the snapshot of the page."""
        self.used_at = time.monotonic()
        await self.guard.check(url)  # a clear refusal before Chromium is involved
        try:
            response = await self.page.goto(url, wait_until="load", timeout=self.timeout_s * 1000)
        except Exception as exc:  # playwright's errors: translated at the edge
            if self.blocked and self.blocked[-1] == url:
                raise FetchRefused(f"navigation to {url} was refused", reason="address") from None
            refused = self._refused_by_proxy(url)
            if refused is not None:
                raise FetchRefused(refused, reason="address") from None
            raise FetchFailed(f"could not open {url}: {_first_line(exc)}") from None
        refused = response.headers.get("x-lemon-refused") if response is not None else None
        if refused is not None:  # the pinning proxy's check refused what Chromium asked for
            self.blocked.append(url)
            raise FetchRefused(f"navigation to {url} was refused: {refused}", reason="address")
        return await self.snapshot()

    def _refused_by_proxy(self, url: str) -> str | None:
        """The pinning proxy's refusal of ``url``'s host (a failed HTTPS tunnel), if any."""
        if self.proxy is None or not self.proxy.refusals:
            return None
        host = url.partition("://")[2].partition("/")[0].lower()
        last = self.proxy.refusals[-1]
        if host and host in last.target.lower():
            self.blocked.append(url)
            return f"navigation to {url} was refused: {last.reason}"
        return None

    async def snapshot(self) -> str:
        """The page's URL, title, headings, paragraphs and interactive elements (``[ref]``)."""
        self.used_at = time.monotonic()
        lines: list[str] = await self.page.evaluate(_SNAPSHOT_JS, 400)
        text = f"{self.page.url}\n# {await self.page.title()}\n" + "\n".join(lines)
        if len(text) > self.max_snapshot_chars:
            cut = len(text) - self.max_snapshot_chars
            text = text[: self.max_snapshot_chars] + f"\n[... {cut} more characters]"
        return text

    def _ref(self, ref: int) -> str:
        return f'[data-lemon-ref="{int(ref)}"]'

    async def _act(self, action: Any) -> str:
        self.used_at = time.monotonic()
        try:
            await action
        except Exception as exc:  # playwright's errors: translated at the edge
            raise WebUsageError(f"{_first_line(exc)}; take a new snapshot for fresh refs") from None
        await self.page.wait_for_load_state("load", timeout=self.timeout_s * 1000)
        return await self.snapshot()

    async def click(self, ref: int) -> str:
        return await self._act(self.page.click(self._ref(ref), timeout=self.timeout_s * 1000))

    async def type(self, ref: int, text: str) -> str:
        return await self._act(self.page.fill(self._ref(ref), text, timeout=self.timeout_s * 1000))

    async def press(self, key: str) -> str:
        return await self._act(self.page.keyboard.press(key))

    async def scroll(self, pixels: int = 800) -> str:
        return await self._act(self.page.mouse.wheel(0, pixels))

    async def back(self) -> str:
        return await self._act(self.page.go_back(timeout=self.timeout_s * 1000))

    async def screenshot(self) -> bytes:
        """The visible part of the page as PNG bytes."""
        self.used_at = time.monotonic()
        return await self.page.screenshot(type="png")

    async def thumbnail(self, width: int = 320) -> bytes:
        """The visible part of the page as a small PNG (``width`` pixels wide), drawn by
        Chromium at that scale (DevTools ``Page.captureScreenshot`` with a scaled clip), for
        a tool card."""
        self.used_at = time.monotonic()
        size = self.page.viewport_size or {"width": 1280, "height": 720}
        scale = min(1.0, width / size["width"])
        cdp = await self.context.new_cdp_session(self.page)
        try:
            shot = await cdp.send("Page.captureScreenshot", {
                "format": "png",
                "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"],
                         "scale": scale},
            })  # fmt: skip
        finally:
            await cdp.detach()
        return base64.b64decode(shot["data"])


class Browsers:
    """Chromium, started at the first use, and a context per session (see the module doc).
    Use as an async context manager (leaving it closes every context and the browser)."""

    def __init__(
        self,
        *,
        guard: AddressGuard,
        executable: str = CHROMIUM,
        max_sessions: int = 8,
        idle_s: float = 300.0,
        timeout_s: float = 20.0,
        max_snapshot_chars: int = 20_000,
    ) -> None:
        self.guard = guard
        self._executable = executable
        self._max_sessions = max_sessions
        self._idle_s = idle_s
        self._timeout_s = timeout_s
        self._max_snapshot_chars = max_snapshot_chars
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._sessions: OrderedDict[str, BrowserSession] = OrderedDict()
        self._starting = asyncio.Lock()
        self.proxy: PinningProxy | None = None
        """The pinning proxy Chromium connects through (started with the browser)."""

    async def __aenter__(self) -> Browsers:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def open_sessions(self) -> tuple[str, ...]:
        return tuple(self._sessions)

    async def _ensure_browser(self) -> Browser:
        async with self._starting:
            if self._browser is None:
                try:
                    from playwright.async_api import async_playwright
                except ImportError:
                    raise WebError("the playwright package is not installed") from None
                proxy = PinningProxy(guard=self.guard, timeout_s=self._timeout_s)
                await proxy.__aenter__()
                self._playwright = await async_playwright().start()
                try:
                    self._browser = await self._playwright.chromium.launch(
                        executable_path=self._executable,
                        args=list(CHROMIUM_ARGS),
                        # Every connection through the pinning proxy (loopback too: Playwright
                        # adds "<-loopback>" to the bypass list), never Chromium's own lookup.
                        proxy={
                            "server": proxy.server,
                            "username": proxy.username,
                            "password": proxy.password,
                        },
                    )
                    self.proxy = proxy
                except Exception as exc:  # playwright's errors: translated at the edge
                    await self._playwright.stop()
                    self._playwright = None
                    await proxy.aclose()
                    raise WebError(
                        f"Chromium could not start from {self._executable} "
                        f"({_first_line(exc)}); install it with: apt-get install -y chromium"
                    ) from None
            return self._browser

    async def session(self, session_id: str) -> BrowserSession:
        """``session_id``'s browser session, made on first use."""
        await self.sweep()
        existing = self._sessions.get(session_id)
        if existing is not None:
            self._sessions.move_to_end(session_id)
            return existing
        browser = await self._ensure_browser()
        context = await browser.new_context(accept_downloads=False)
        page = await context.new_page()
        made = BrowserSession(context=context, page=page, guard=self.guard,
                              timeout_s=self._timeout_s, proxy=self.proxy,
                              max_snapshot_chars=self._max_snapshot_chars)  # fmt: skip

        async def route(route: Route) -> None:
            url = route.request.url
            scheme = url.partition(":")[0].lower()
            if scheme in _LOCAL_SCHEMES:
                await route.continue_()
                return
            try:
                await self.guard.check(url)
            except WebError:
                made.blocked.append(url)
                await route.abort("blockedbyclient")
                return
            await route.continue_()

        await context.route("**/*", route)
        context.on("page", made._close_popup)
        self._sessions[session_id] = made
        while len(self._sessions) > self._max_sessions:
            _, oldest = self._sessions.popitem(last=False)
            await oldest.context.close()
        return made

    async def close_session(self, session_id: str) -> bool:
        found = self._sessions.pop(session_id, None)
        if found is None:
            return False
        await found.context.close()
        return True

    async def sweep(self) -> int:
        """Close the contexts unused for ``idle_s``; how many were closed."""
        now = time.monotonic()
        idle = [k for k, s in self._sessions.items() if now - s.used_at >= self._idle_s]
        for key in idle:
            await self.close_session(key)
        return len(idle)

    async def aclose(self) -> None:
        for key in list(self._sessions):
            await self.close_session(key)
        if self._browser is not None:
            await self._browser.close()
            self._browser = None
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None
        if self.proxy is not None:
            await self.proxy.aclose()
            self.proxy = None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
