"""The web chat page's speed, measured in Debian's Chromium against a real in-process daemon.

    .venv/bin/python bench/web_bench.py [--messages 400] [--repeat 5] [--keys 40]

1. Page weight: what a first visit downloads (gzip), by asset, from the page's own accounting
   and from the browser's resource timing.
2. First contentful paint of the chat page on loopback (an empty session, and a session with a
   400-message transcript), next to a one-line HTML page served by the same server in the same
   run (the baseline). Median of ``--repeat`` fresh tabs.
   ``--markdown`` gives every answer Markdown (bold, inline code, a link), so each goes
   through the parser and the sanitizer; without it answers are plain text (the fast path).
3. Input latency with the 400-message transcript: keys typed into the message box, each from
   its ``keydown`` to the frame after it (``requestAnimationFrame`` then a task), next to the
   same on the empty session. Also the Event Timing API's worst ``keydown`` duration (Chromium
   reports only entries of 16 ms or more).

Goals (issue 14): FCP <= 300 ms on loopback; page weight <= 200 KB compressed; input latency
<= 50 ms with a 400-message transcript.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

from playwright.async_api import Browser, async_playwright

from lemon_control_plane import ControlPlane, ControlPlaneOptions
from lemon_control_plane.testing import wire_client
from lemon_core.config import load_config
from lemon_runtime import Runtime
from lemon_web import WebApp

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
BASELINE = b"<!doctype html><title>baseline</title><p>Hello</p>"


async def _baseline(scope: Any, receive: Any, send: Any) -> None:
    headers = [(b"content-type", b"text/html; charset=utf-8")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": BASELINE})


async def fill_session(plane: ControlPlane, key: str, messages: int, markdown: bool) -> None:
    async with wire_client(plane.ws_url)() as c:
        for i in range(messages // 2):
            text = f"**Answer {i}**: call `f({i})`, see [docs](https://example.org/{i})."
            prompt = "/echo " + (text if markdown else f"answer {i}")
            sent = await c.call("chat.send", {"sessionKey": key, "prompt": prompt})
            await c.completed(sent["runId"])


async def fcp(browser: Browser, url: str, ready: str | None) -> tuple[float, float]:
    """(first contentful paint, time until ``ready`` matched), in ms from navigation start."""
    ctx = await browser.new_context()
    try:
        page = await ctx.new_page()
        await page.goto(url)
        done = 0.0
        if ready:
            await page.wait_for_selector(ready, timeout=30_000)
            done = float(await page.evaluate("performance.now()"))
        value = await page.evaluate(
            """() => new Promise((resolve) => {
                const found = performance.getEntriesByName('first-contentful-paint')[0];
                if (found) { resolve(found.startTime); return; }
                new PerformanceObserver((list) => {
                    resolve(list.getEntriesByName('first-contentful-paint')[0].startTime);
                }).observe({ type: 'paint', buffered: true });
            })"""
        )
        return float(value), done
    finally:
        await ctx.close()


async def transfer(browser: Browser, url: str) -> dict[str, int]:
    ctx = await browser.new_context()
    try:
        page = await ctx.new_page()
        await page.goto(url)
        await page.wait_for_selector("body[data-ready]", timeout=30_000)
        sizes = await page.evaluate(
            """() => {
                const out = {};
                const nav = performance.getEntriesByType('navigation')[0];
                out['(document)'] = nav.encodedBodySize;
                for (const r of performance.getEntriesByType('resource'))
                    out[new URL(r.name).pathname] = r.encodedBodySize;
                return out;
            }"""
        )
        return {str(k): int(v) for k, v in sizes.items()}
    finally:
        await ctx.close()


async def input_latency(browser: Browser, url: str, keys: int) -> tuple[list[float], float]:
    ctx = await browser.new_context()
    try:
        page = await ctx.new_page()
        await page.goto(url)
        await page.wait_for_selector("body[data-ready]", timeout=30_000)
        items = await page.evaluate("document.querySelector('#transcript').children.length")
        await page.evaluate(
            """() => {
                window.__lat = []; window.__worst = 0;
                const box = document.querySelector('#composer-input');
                box.addEventListener('keydown', (e) => {
                    const t0 = e.timeStamp;
                    requestAnimationFrame(() => setTimeout(() => {
                        window.__lat.push(performance.now() - t0);
                    }, 0));
                });
                new PerformanceObserver((list) => {
                    for (const e of list.getEntries())
                        if (e.name === 'keydown')
                            window.__worst = Math.max(window.__worst, e.duration);
                }).observe({ type: 'event', durationThreshold: 16, buffered: true });
                box.focus();
            }"""
        )
        for _ in range(keys):
            await page.keyboard.press("a")
            await page.wait_for_timeout(20)
        await page.wait_for_timeout(100)
        lat = [float(x) for x in await page.evaluate("window.__lat")]
        worst = float(await page.evaluate("window.__worst"))
        print(f"  ({items} transcript items on {url.rsplit('/', 1)[-1] or '/'})")
        return lat, worst
    finally:
        await ctx.close()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main(args: argparse.Namespace, home: Path, work: Path) -> None:
    config = load_config(home=home, cwd=work, environ={})
    options = [ControlPlaneOptions(port=0, cwd=str(work))]
    async with Runtime(profile="daemon", config=config, options=options) as runtime:
        plane = runtime.handle("lemon_control_plane")
        web = runtime.handle("lemon_web")
        assert isinstance(plane, ControlPlane)
        assert isinstance(web, WebApp)
        runtime.mounts.mount("/bench-baseline", _baseline, owner="bench")
        key = "agent:default:web:browser:unknown:bench-400"
        kind = "Markdown" if args.markdown else "plain-text"
        print(f"filling a session with {args.messages} messages ({kind} answers) ...")
        await fill_session(plane, key, args.messages, args.markdown)
        full = f"{plane.url}/chat/{quote(key, safe='')}"
        empty = f"{plane.url}/chat/{quote('agent:default:web:browser:unknown:empty', safe='')}"

        weights = web.page_weight()
        print("\n1. page weight (gzip, first visit):")
        for name, size in sorted(weights.items(), key=lambda kv: -kv[1]):
            print(f"  {name:12s} {size / 1024:7.1f} KB")
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            seen = await transfer(browser, empty)
            total = sum(v for k, v in seen.items() if not k.startswith("/ws"))
            print(f"  browser resource timing: {total / 1024:.1f} KB over {len(seen)} requests")

            print(f"\n2. first contentful paint (median of {args.repeat}):")
            base = [
                await fcp(browser, plane.url + "/bench-baseline", None) for _ in range(args.repeat)
            ]
            page0 = [await fcp(browser, empty, "body[data-ready]") for _ in range(args.repeat)]
            page400 = [await fcp(browser, full, "body[data-ready]") for _ in range(args.repeat)]
            b = statistics.median(v[0] for v in base)
            for label, values in (
                ("baseline page", base),
                ("chat, empty", page0),
                (f"chat, {args.messages} msgs", page400),
            ):
                m = statistics.median(v[0] for v in values)
                ready_ms = statistics.median(v[1] for v in values)
                shown = f", transcript shown at {ready_ms:6.1f} ms" if ready_ms else ""
                print(f"  {label:18s} FCP {m:6.1f} ms ({m / b:.2f}x baseline){shown}")

            print(f"\n3. input latency, keydown -> next frame ({args.keys} keys):")
            lat0, worst0 = await input_latency(browser, empty, args.keys)
            lat400, worst400 = await input_latency(browser, full, args.keys)
            for label, values, worst in (
                ("empty session", lat0, worst0),
                (f"{args.messages} msgs", lat400, worst400),
            ):
                print(
                    f"  {label:14s} p50 {pct(values, 0.5):6.1f} ms"
                    f"  p95 {pct(values, 0.95):6.1f} ms"
                    f"  max {max(values):6.1f} ms  event-timing worst "
                    f"{'<16' if worst == 0 else f'{worst:.0f}'} ms"
                )
            ratio = pct(lat400, 0.5) / max(pct(lat0, 0.5), 0.001)
            print(f"  ratio p50 ({args.messages} msgs / empty): {ratio:.2f}x")
            await browser.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keys", type=int, default=40)
    parser.add_argument(
        "--markdown", action="store_true", help="answers with Markdown (bold, code, a link)"
    )
    if not Path(CHROMIUM).exists():
        sys.exit(f"{CHROMIUM} is missing: apt-get install -y chromium")
    with tempfile.TemporaryDirectory() as tmp:
        home, work = Path(tmp, "home"), Path(tmp, "work")
        home.mkdir()
        work.mkdir()
        asyncio.run(main(parser.parse_args(), home, work))
