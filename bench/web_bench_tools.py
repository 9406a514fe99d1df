#!/usr/bin/env python3
"""Benchmark of ``web_fetch`` end to end through the tool, next to a bare fetch + conversion.

Usage: python bench/web_bench_tools.py [--kib 200] [--repeat 30]

Serves a ``--kib`` KiB article-shaped HTML page from a real HTTP server on 127.0.0.1 and times,
alternating, ``--repeat`` times each:

* the baseline: ``httpx.AsyncClient().get(url)`` then ``lemon_browser.html_to_markdown`` (what
  any fetch tool must do at least);
* the tool: ``web_fetch`` as the model calls it (the address guard, the bounded streamed read,
  conversion in a worker thread, the untrusted-content scan, fencing, paging), with the cache
  off (``cache_ttl_s = 0``, no ETag) so every call fetches.

Prints the medians and the ratio tool / baseline (target: <= 1.3x).

Then, when Debian's Chromium is there (``/usr/bin/chromium``), the browser: the ``browser``
tool's ``open`` (the guard, every request routed through it and the pinning proxy, the
snapshot, the scan, the fence) of a fixture page next to raw Playwright doing the same on a
plain context (``goto`` and the same snapshot script), ``--repeat`` times each, alternating
(target: <= 1.5x).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path

import httpx

from coding_agent.policy import RunTaint
from coding_agent.tools.web import PageCache, _Secrets, browser_tool, web_fetch_tool
from lemon_agent import AbortSignal, ToolContext
from lemon_browser import AddressGuard, Browsers, WebConfig, html_to_markdown
from lemon_browser.browser import _SNAPSHOT_JS, CHROMIUM, CHROMIUM_ARGS
from lemon_browser.testing import FixtureSite
from lemon_core.config import load_config

_PARA = (
    "<p>Write-ahead logging changes how a database commits a transaction: changes go to a log "
    "and readers keep the old pages until a checkpoint, see <a href='/docs/{i}'>part {i}</a>."
    "</p>\n"
)


def page(kib: int) -> str:
    parts = ["<html><head><title>Bench article</title></head><body><nav>menu</nav><article>"]
    i = 0
    while sum(map(len, parts)) < kib * 1024:
        parts.append(f"<h2>Section {i}</h2>" if i % 10 == 0 else "")
        parts.append(_PARA.format(i=i))
        i += 1
    parts.append("</article><footer>foot</footer></body></html>")
    return "".join(parts)


async def main(kib: int, repeat: int) -> None:
    async with FixtureSite() as site:
        site.page("/article", page(kib))
        url = site.url("/article")
        web = WebConfig(allow_hosts=(site.host_port,), cache_ttl_s=0)
        home = Path("/nonexistent-bench-home")
        config = load_config(environ={}, cwd=Path.cwd(), home=home).config
        tool = web_fetch_tool(config=web, taint=RunTaint(), session_id="bench",
                              secrets=_Secrets(config, home, {}), max_chars=200_000,
                              cache=PageCache())  # fmt: skip

        async def baseline() -> int:
            async with httpx.AsyncClient() as client:
                response = await client.get(url)
            return len(html_to_markdown(response.text, url).text)

        async def through_tool() -> int:
            ctx = ToolContext(tool_call_id="b", name="web_fetch", arguments={"url": url},
                              signal=AbortSignal(), update=_no_update)  # fmt: skip
            result = await tool.execute(ctx)
            assert not isinstance(result, str)
            assert not result.is_error
            return len(result.content)

        for _ in range(3):  # warm up both paths
            await baseline()
            await through_tool()
        base_times: list[float] = []
        tool_times: list[float] = []
        for _ in range(repeat):
            for run, times in ((baseline, base_times), (through_tool, tool_times)):
                started = time.perf_counter()
                await run()
                times.append(time.perf_counter() - started)
    base = statistics.median(base_times)
    tool_m = statistics.median(tool_times)
    print(f"page: {kib} KiB HTML from 127.0.0.1, {repeat} runs each (medians)")
    print(f"baseline httpx.get + html_to_markdown: {base * 1000:8.2f} ms")
    print(f"web_fetch through the tool:            {tool_m * 1000:8.2f} ms")
    verdict = "met" if tool_m / base <= 1.3 else "MISSED"
    print(f"ratio tool / baseline: {tool_m / base:.3f}x (target <= 1.3x: {verdict})")


async def browser_bench(repeat: int) -> None:
    from playwright.async_api import async_playwright

    form = ("<html><head><title>Form</title></head><body><h1>Sign up</h1>"
            + "<p>Fill in the form below to create an account.</p>" * 20
            + "".join(f"<a href='/p{i}'>link {i}</a> " for i in range(50))
            + "<input placeholder='name'><button>Go</button></body></html>")  # fmt: skip
    async with FixtureSite() as site:
        site.page("/form", form)
        url = site.url("/form")
        home = Path("/nonexistent-bench-home")
        config = load_config(environ={}, cwd=Path.cwd(), home=home).config
        async with (
            Browsers(guard=AddressGuard(allow_hosts=[site.host_port])) as browsers,
            async_playwright() as pw,
        ):
            tool = browser_tool(browsers=browsers, taint=RunTaint(), session_id="bench",
                                secrets=_Secrets(config, home, {}))  # fmt: skip
            raw = await pw.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
            context = await raw.new_context()
            page = await context.new_page()

            async def baseline() -> None:
                await page.goto(url, wait_until="load")
                await page.evaluate(_SNAPSHOT_JS, 400)

            async def through_tool() -> None:
                ctx = ToolContext(tool_call_id="b", name="browser",
                                  arguments={"action": "open", "url": url},
                                  signal=AbortSignal(), update=_no_update)  # fmt: skip
                result = await tool.execute(ctx)
                assert not isinstance(result, str)
                assert "[1] link" in result.content

            for _ in range(3):
                await baseline()
                await through_tool()
            base_times: list[float] = []
            tool_times: list[float] = []
            for _ in range(repeat):
                for run, times in ((baseline, base_times), (through_tool, tool_times)):
                    started = time.perf_counter()
                    await run()
                    times.append(time.perf_counter() - started)
            await raw.close()
    base = statistics.median(base_times)
    tool_m = statistics.median(tool_times)
    print(f"browser open + snapshot of a fixture page, {repeat} runs each (medians)")
    print(f"raw Playwright goto + snapshot script:  {base * 1000:8.2f} ms")
    print(f"browser tool open (guarded, fenced):    {tool_m * 1000:8.2f} ms")
    verdict = "met" if tool_m / base <= 1.5 else "MISSED"
    print(f"ratio tool / baseline: {tool_m / base:.3f}x (target <= 1.5x: {verdict})")


async def _no_update(text: str) -> None:
    return None


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kib", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    asyncio.run(main(args.kib, args.repeat))
    if Path(CHROMIUM).exists():
        os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
        asyncio.run(browser_bench(args.repeat))
    else:
        print(f"browser: skipped (no Chromium at {CHROMIUM}; apt-get install -y chromium)")
