"""The chat page in a real browser (Debian's Chromium) against a real daemon with the offline
(scripted) model: streaming Markdown, tool cards, approvals (approved, denied, decided in another
client), Stop, queueing while busy, reload mid-run, the suspended pane's bound, untrusted output,
and the phone layout. One browser and one daemon for the module; each test has its own tab (its
own session key)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from lemon_control_plane import ControlPlane
from lemon_control_plane.testing import ClientFactory
from lemon_web import (
    LIVE_SEGMENT_BYTES,
    MAX_EVENT_BYTES,
    PAGE_CACHE_ITEMS,
    PANE_QUEUE_ENTRIES,
    TERMINAL_TOMBSTONES,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

TAB_KEY = re.compile(r"^agent:default:web:browser:unknown:tab-[0-9a-f]{16}$")
WAIT_MS = 10_000


async def open_chat(page: Any, daemon: ControlPlane, path: str = "/") -> str:
    await page.goto(daemon.url + path)
    await page.wait_for_selector("body[data-ready]", timeout=WAIT_MS)
    key = await page.evaluate("window.lemon.sessionKey")
    assert isinstance(key, str)
    return key


async def send(page: Any, text: str) -> None:
    await page.fill("#composer-input", text)
    await page.keyboard.press("Enter")


async def wait_idle(page: Any) -> None:
    await page.wait_for_function(
        "() => window.lemon.statistics().busyRun === null && !window.lemon.statistics().loading",
        timeout=WAIT_MS,
    )


async def transcript_text(page: Any) -> str:
    text = await page.inner_text("#transcript")
    assert isinstance(text, str)
    return text


async def test_a_new_tab_gets_its_own_key_and_streams_a_markdown_answer(
    page: Any, daemon: ControlPlane, shot: Any
) -> None:
    key = await open_chat(page, daemon)
    assert TAB_KEY.match(key), key
    assert page.url.endswith("/chat/" + quote(key, safe=""))
    await send(page, "/echo Hello **world**\n\n```python\ndef f(x):\n    return x + 1\n```\n")
    status = page.locator(".msg.assistant .run-status", has_text="tokens")
    await status.wait_for(timeout=WAIT_MS)
    answer = page.locator(".msg.assistant .segment").last
    assert await answer.locator("strong").inner_text() == "world"
    code = answer.locator("pre code.hljs.language-python")
    assert await code.count() == 1
    assert await code.locator(".hljs-keyword").first.inner_text() == "def"
    usage = await status.inner_text()
    assert "$0.0000" in usage
    assert "offline:offline" in usage
    assert "tokens" in await page.inner_text("#usage")
    await page.screenshot(path=shot("answer"))
    # The sidebar lists the session; the page's bounds are the seed's.
    await page.locator(f'.session[data-key="{key}"]').wait_for(timeout=WAIT_MS)
    assert await page.evaluate("window.lemon.bounds") == {
        "PANE_QUEUE_ENTRIES": PANE_QUEUE_ENTRIES,
        "MAX_EVENT_BYTES": MAX_EVENT_BYTES,
        "LIVE_SEGMENT_BYTES": LIVE_SEGMENT_BYTES,
        "PAGE_CACHE_ITEMS": PAGE_CACHE_ITEMS,
        "TERMINAL_TOMBSTONES": TERMINAL_TOMBSTONES,
    }
    assert page.page_errors == []


async def test_an_approved_bash_card_streams_then_shows_command_exit_and_output(
    page: Any, daemon: ControlPlane, shot: Any
) -> None:
    await open_chat(page, daemon)
    await send(page, '/tool bash {"command": "echo hello-from-bash"}')
    card = page.locator(".approval")
    await card.wait_for(timeout=WAIT_MS)
    # Mid-run: the text before the tool streamed in, the tool card spins, focus stays in the
    # message box.
    assert "Offline: calling bash." in await transcript_text(page)
    tool = page.locator(".tool").last
    assert await tool.get_attribute("data-state") == "running"
    assert await tool.locator(".tool-title").inner_text() == "echo hello-from-bash"
    assert await page.evaluate("document.activeElement.id") == "composer-input"
    buttons = await card.locator("button").all_inner_texts()
    assert buttons == ["Allow once", "Allow for this session", "Always allow", "Deny"]
    await page.screenshot(path=shot("approval"))
    await page.keyboard.press("Alt+a")  # keyboard only: to the card, to "Allow once", Enter
    await page.keyboard.press("ArrowRight")
    assert await page.evaluate("document.activeElement.dataset.decision") == "approve_once"
    await page.keyboard.press("Enter")
    await page.locator(".tool[data-state=done]").wait_for(timeout=WAIT_MS)
    await wait_idle(page)
    assert await card.count() == 0
    assert "✓ bash allowed once" in await transcript_text(page)
    assert await page.evaluate("document.activeElement.id") == "composer-input"
    await tool.locator("summary").click()
    assert "hello-from-bash" in await tool.locator("pre.output").inner_text()
    assert await tool.locator(".tool-exit").inner_text() in ("ok", "exit 0")
    await page.screenshot(path=shot("tool-card"))


async def test_an_edit_card_shows_its_diff(page: Any, daemon: ControlPlane, work: Path) -> None:
    (work / "notes.txt").write_text("old line\n")
    await open_chat(page, daemon)
    args = {"path": "notes.txt", "old_text": "old line", "new_text": "new line"}
    await send(page, "/tool edit " + json.dumps(args))
    await page.locator(".approval button[data-decision=approve_once]").click(timeout=WAIT_MS)
    tool = page.locator(".tool[data-state=done]")
    await tool.wait_for(timeout=WAIT_MS)
    await tool.locator("summary").click()
    diff = tool.locator("pre.diff")
    assert await diff.locator(".hljs-deletion").inner_text() == "-old line"
    assert await diff.locator(".hljs-addition").inner_text() == "+new line"
    assert (work / "notes.txt").read_text() == "new line\n"


async def test_a_denied_approval_fails_the_tool_and_returns_focus(
    page: Any, daemon: ControlPlane, work: Path
) -> None:
    await open_chat(page, daemon)
    await send(page, '/tool bash {"command": "touch denied.txt"}')
    await page.locator(".approval").wait_for(timeout=WAIT_MS)
    await page.keyboard.press("Alt+a")
    await page.keyboard.press("Escape")  # deny, from the keyboard
    await page.locator(".tool[data-state=failed]").wait_for(timeout=WAIT_MS)
    await wait_idle(page)
    assert "✗ bash denied" in await transcript_text(page)
    assert not (work / "denied.txt").exists()
    assert await page.evaluate("document.activeElement.id") == "composer-input"
    assert await page.locator(".tool[data-state=running]").count() == 0


async def test_an_approval_decided_in_another_client_disappears(
    page: Any, daemon: ControlPlane, client: ClientFactory
) -> None:
    await open_chat(page, daemon)
    await send(page, '/tool bash {"command": "echo elsewhere"}')
    card = page.locator(".approval")
    await card.wait_for(timeout=WAIT_MS)
    approval_id = await card.get_attribute("data-approval-id")
    async with client() as other:  # the TUI, say
        await other.call(
            "exec.approval.resolve", {"approvalId": approval_id, "decision": "approve_once"}
        )
    await page.locator(".tool[data-state=done]").wait_for(timeout=WAIT_MS)
    assert await card.count() == 0


async def test_reload_mid_run_shows_one_answer_and_no_spinning_card(
    page: Any, daemon: ControlPlane, shot: Any
) -> None:
    key = await open_chat(page, daemon)
    await send(page, "/echo first answer")
    await page.locator(".run-status", has_text="tokens").wait_for(timeout=WAIT_MS)
    await send(page, '/tool bash {"command": "echo reloaded"}')
    await page.locator(".approval").wait_for(timeout=WAIT_MS)
    await page.reload()  # mid-run: the run waits for its approval
    await page.wait_for_selector("body[data-ready]", timeout=WAIT_MS)
    assert await page.evaluate("window.lemon.sessionKey") == key
    card = page.locator(".approval")
    await card.wait_for(timeout=WAIT_MS)  # recovered from sessions.snapshot
    text = await transcript_text(page)
    assert text.count("Offline: calling bash.") == 1
    assert text.count("first answer") == 2  # the prompt and its answer, from the transcript
    assert text.count('/tool bash {"command": "echo reloaded"}') == 1  # this tab sent it
    assert await page.locator(".tool[data-state=running]").count() == 1
    await page.screenshot(path=shot("reload-mid-run"))
    await card.locator("button[data-decision=approve_once]").click()
    await page.locator(".msg.assistant", has_text="returned").wait_for(timeout=WAIT_MS)
    await wait_idle(page)
    text = await transcript_text(page)
    assert text.count("Offline: calling bash.") == 1
    assert text.count("Offline: tool bash returned: reloaded") == 1
    assert text.count('/tool bash {"command": "echo reloaded"}') == 1
    assert await page.locator(".tool[data-state=running]").count() == 0
    assert await page.locator(".approval").count() == 0


async def test_stop_ends_a_busy_run_and_a_queued_message_runs_after(
    page: Any, daemon: ControlPlane
) -> None:
    await open_chat(page, daemon)
    await send(page, '/tool bash {"command": "echo never"}')
    await page.locator(".approval").wait_for(timeout=WAIT_MS)
    assert await page.locator("#stop").is_visible()
    assert await page.locator("#mode").is_visible()
    await page.select_option("#mode", "followup")
    await send(page, "/echo queued behind the first")
    assert "queue" in await page.locator(".msg.user").last.inner_text()
    await page.locator("#stop").click()
    await page.locator(".msg.assistant", has_text="queued behind the first").last.wait_for(
        timeout=WAIT_MS
    )
    await wait_idle(page)
    assert await page.locator(".tool[data-state=running]").count() == 0
    assert await page.locator(".approval").count() == 0
    assert not await page.locator("#stop").is_visible()


async def set_visibility(page: Any, state: str) -> None:
    """What the browser does when the tab is hidden or shown again."""
    await page.evaluate(
        """(state) => {
            const shown = { configurable: true, get: () => state };
            Object.defineProperty(document, "visibilityState", shown);
            document.dispatchEvent(new Event("visibilitychange"));
        }""",
        state,
    )


async def test_a_suspended_pane_keeps_at_most_270_of_1000_events_then_recovers(
    page: Any, daemon: ControlPlane, client: ClientFactory
) -> None:
    key = await open_chat(page, daemon)
    await set_visibility(page, "hidden")  # the tab goes to the background: the pane suspends
    assert (await page.evaluate("window.lemon.statistics()"))["suspended"] is True
    words = " ".join(f"w{i}" for i in range(1000))
    async with client() as c:
        sent = await c.call("chat.send", {"sessionKey": key, "prompt": "/echo " + words})
        await c.completed(sent["runId"])
    # started + 1,000 deltas + completed reached the suspended pane.
    await page.wait_for_function(
        "() => { const s = window.lemon.statistics();"
        " return s.dropped + s.queued - (s.queueMarker ? 1 : 0) >= 1002; }",
        timeout=WAIT_MS,
    )
    stats = await page.evaluate("window.lemon.statistics()")
    assert stats["queued"] <= 270
    assert stats["queueMarker"] is True
    assert stats["state"] == "online"
    await set_visibility(page, "visible")
    await page.locator(".msg.assistant", has_text="w999").wait_for(timeout=WAIT_MS)
    await wait_idle(page)
    answer = await page.locator(".msg.assistant .segment").last.inner_text()
    assert answer.split() == words.split()
    assert (await transcript_text(page)).count("w999") == 2  # prompt and answer, once each


XSS_ANSWER = "\n\n".join(
    [
        '<img src=x onerror="window.__xss = 1">',
        "<script>window.__xss = 2</script>",
        "[plain](javascript:window.__xss=3)",
        "[mixed case](JaVaScRiPt:window.__xss=4)",
        '<a href="javascript:window.__xss=5">raw anchor</a>',
        "[entity](&#106;avascript:window.__xss=6)",
        '![image](x" onerror="window.__xss=7)',
        '<svg onload="window.__xss=8"><circle r="4"/></svg>',
        '<iframe src="javascript:window.__xss=9"></iframe>',
        '<a href="data:text/html,<script>window.__xss=10</script>">data link</a>',
        '<details open ontoggle="window.__xss=11"><summary>s</summary>d</details>',
        "[spaced]( javascript:window.__xss=12 )",
        "<form action=javascript:window.__xss=13><button>go</button></form>",
        "[ok link](https://example.org/path)",
    ]
)


async def test_untrusted_model_output_never_executes(page: Any, daemon: ControlPlane) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda d: dialogs.append(d.message))
    await open_chat(page, daemon)
    await send(page, "/echo " + XSS_ANSWER)
    await page.locator(".run-status", has_text="tokens").wait_for(timeout=WAIT_MS)
    answer = page.locator(".msg.assistant .segment").last
    # Everything clickable in the answer is clicked: nothing runs.
    for link in await answer.locator("a").all():
        await link.click(modifiers=["Alt"], no_wait_after=True)
    found = await page.evaluate(
        """() => {
        const t = document.querySelector('#transcript');
        const handlers = [...t.querySelectorAll('*')].filter(
            (n) => [...n.attributes].some((a) => a.name.startsWith('on')));
        return {
            xss: window.__xss ?? null,
            handlers: handlers.length,
            scripts: t.querySelectorAll('script, iframe, form, object, embed').length,
            hrefs: [...t.querySelectorAll('a[href]')].map((a) => a.getAttribute('href')),
            srcs: [...t.querySelectorAll('[src]')].map((n) => n.getAttribute('src')),
        };
    }"""
    )
    assert found["xss"] is None
    assert found["handlers"] == 0
    assert found["scripts"] == 0
    assert found["hrefs"] == ["https://example.org/path"]
    assert found["srcs"] == []
    assert dialogs == []
    # The user's own message is shown as text, not as markup.
    assert "<script>window.__xss = 2</script>" in await page.inner_text(".msg.user .bubble")


async def test_the_page_works_at_375_px_in_dark_mode(
    browser: Any, daemon: ControlPlane, shot: Any, signed_in: Any
) -> None:
    ctx = await browser.new_context(
        viewport={"width": 375, "height": 740},
        screen={"width": 375, "height": 740},
        color_scheme="dark",
        has_touch=True,
    )
    await signed_in(ctx)
    try:
        page = await ctx.new_page()
        await open_chat(page, daemon)
        await send(
            page, "/echo A **phone**-sized answer with `code` and a long-unbroken-" + "x" * 80
        )
        await page.locator(".run-status", has_text="tokens").wait_for(timeout=WAIT_MS)
        await send(page, '/tool bash {"command": "echo phone"}')
        await page.locator(".approval").wait_for(timeout=WAIT_MS)
        layout = await page.evaluate(
            """() => ({
            scrollWidth: document.documentElement.scrollWidth,
            sidebarRight: document.querySelector('#sidebar').getBoundingClientRect().right,
            composerBottom: document.querySelector('#composer').getBoundingClientRect().bottom,
            buttonsRight: Math.max(...[...document.querySelectorAll('.decisions button')]
                .map((b) => b.getBoundingClientRect().right)),
            background: getComputedStyle(document.body).backgroundColor,
        })"""
        )
        assert layout["scrollWidth"] <= 375
        assert layout["sidebarRight"] <= 0  # slid away
        assert layout["composerBottom"] <= 740
        assert layout["buttonsRight"] <= 375
        assert layout["background"] == "rgb(21, 23, 27)"
        await page.screenshot(path=shot("phone-dark"))
        await page.locator("#toggle-sidebar").click()
        await page.wait_for_function(
            "() => document.querySelector('#sidebar').getBoundingClientRect().left >= 0"
        )
        await page.screenshot(path=shot("phone-sidebar"))
        await page.keyboard.press("Escape")  # closes the sessions
        await page.wait_for_function(
            "() => document.querySelector('#sidebar').getBoundingClientRect().right <= 0"
        )
        # Closed (once its transition ends): no shadow on the chat's edge, no Tab stop.
        await page.wait_for_function(
            """() => { const s = getComputedStyle(document.querySelector('#sidebar'));
            return s.boxShadow === 'none' && s.visibility === 'hidden'; }""",
            timeout=WAIT_MS,
        )
        # The model picker has its own row: the title keeps its room, the open list fits.
        bar = await page.evaluate(
            """() => { const r = (q) => document.querySelector(q).getBoundingClientRect();
            return { model: [r('#model').left, r('#model').right, r('#model').top],
                     title: [r('#title').width, r('#title').bottom] }; }"""
        )
        left, right, top = bar["model"]
        assert left >= 0
        assert right <= 375
        assert right - left >= 300
        assert top >= bar["title"][1]  # below the title, not squeezed beside it
        assert bar["title"][0] >= 200
        await page.locator("#model").click()  # the list opens (headless draws it in the shot)
        await page.screenshot(path=shot("phone-model-open"))
        await page.keyboard.press("Escape")
        await page.locator(".approval button[data-decision=deny]").click()
    finally:
        await ctx.close()


async def test_a_session_opens_by_url_and_the_sidebar_switches(
    page: Any, daemon: ControlPlane, client: ClientFactory
) -> None:
    key = "agent:default:web:browser:unknown:opened-by-url"
    async with client() as c:
        sent = await c.call("chat.send", {"sessionKey": key, "prompt": "/echo from the url"})
        await c.completed(sent["runId"])
    await open_chat(page, daemon, "/chat/" + quote(key, safe=""))
    assert await page.evaluate("window.lemon.sessionKey") == key
    await page.locator(".msg.assistant", has_text="from the url").wait_for(timeout=WAIT_MS)
    await page.locator("#new-chat").click()
    new_key = await page.evaluate("window.lemon.sessionKey")
    assert TAB_KEY.match(new_key)
    await page.wait_for_function(
        "() => document.querySelector('#transcript').children.length === 0"
    )
    await page.locator(f'.session[data-key="{key}"]').click()
    await page.locator(".msg.assistant", has_text="from the url").wait_for(timeout=WAIT_MS)
    assert page.url.endswith("/chat/" + quote(key, safe=""))


async def inject(page: Any, frames: list[dict[str, Any]]) -> None:
    """Hand event frames to the page as if its socket had delivered them."""
    await page.evaluate("(frames) => { for (const f of frames) window.lemon.inject(f); }", frames)


def event(name: str, **payload: Any) -> dict[str, Any]:
    return {"type": "event", "event": name, "seq": 0, "payload": payload}


async def test_late_events_of_a_finished_run_are_ignored_and_128_tombstones_are_kept(
    page: Any, daemon: ControlPlane, client: ClientFactory
) -> None:
    key = await open_chat(page, daemon)
    async with client() as c:
        sent = await c.call("chat.send", {"sessionKey": key, "prompt": "/echo on time"})
        await c.completed(sent["runId"])
    await page.locator(".msg.assistant", has_text="on time").wait_for(timeout=WAIT_MS)
    await wait_idle(page)
    run_id = sent["runId"]
    late = [
        event("chat", type="delta", runId=run_id, sessionKey=key, seq=99, text=" LATE"),
        event(
            "agent",
            type="tool_use",
            runId=run_id,
            sessionKey=key,
            phase="started",
            action={"id": "late-card", "kind": "command", "title": "late"},
        ),
    ]
    await inject(page, late)
    assert "LATE" not in await transcript_text(page)
    assert await page.locator(".tool").count() == 0
    fake = []
    for i in range(TERMINAL_TOMBSTONES + 20):
        fake.append(event("agent", type="started", runId=f"fake-{i}", sessionKey=key))
        fake.append(event("agent", type="completed", runId=f"fake-{i}", sessionKey=key, ok=True))
    await inject(page, fake)
    stats = await page.evaluate("window.lemon.statistics()")
    assert stats["tombstones"] == TERMINAL_TOMBSTONES


async def test_the_transcript_and_tool_caches_keep_at_most_400_items(
    page: Any, daemon: ControlPlane
) -> None:
    key = await open_chat(page, daemon)
    frames = []
    for i in range(PAGE_CACHE_ITEMS + 50):
        run = f"many-{i}"
        frames.append(event("agent", type="started", runId=run, sessionKey=key))
        frames.append(
            event(
                "agent",
                type="tool_use",
                runId=run,
                sessionKey=key,
                phase="started",
                action={"id": f"card-{i}", "kind": "command", "detail": {"name": "bash"}},
            )
        )
        frames.append(event("agent", type="completed", runId=run, sessionKey=key, ok=True))
    # Read in the same task as the injection: these runs were sent by "another client", so
    # their completions schedule a transcript re-read, which would replace what is counted.
    seen = await page.evaluate(
        """(frames) => {
            for (const f of frames) window.lemon.inject(f);
            const q = (sel) => document.querySelectorAll(sel).length;
            return {
                stats: window.lemon.statistics(),
                newest: q('[data-run-id="many-449"]'),
                oldest: q('[data-run-id="many-0"]'),
                running: q('.tool[data-state=running]'),
            };
        }""",
        frames,
    )
    stats = seen["stats"]
    assert stats["items"] == PAGE_CACHE_ITEMS
    assert stats["runs"] <= PAGE_CACHE_ITEMS
    assert stats["tools"] <= PAGE_CACHE_ITEMS
    # The newest survive; the oldest went first; nothing is left spinning.
    assert (seen["newest"], seen["oldest"], seen["running"]) == (1, 0, 0)


async def test_a_live_answer_segment_is_capped_at_65536_bytes(
    page: Any, daemon: ControlPlane
) -> None:
    key = await open_chat(page, daemon)
    frames = [event("agent", type="started", runId="big", sessionKey=key)]
    chunk = "é" * 10_000  # 20,000 UTF-8 bytes
    frames += [
        event("chat", type="delta", runId="big", sessionKey=key, seq=i + 1, text=chunk)
        for i in range(8)
    ]
    await inject(page, frames)
    segment = page.locator('[data-run-id="big"] .segment')
    await segment.locator(".truncated").wait_for(timeout=WAIT_MS)
    kept = await segment.locator("p").first.inner_text()
    assert kept == "é" * (LIVE_SEGMENT_BYTES // 2)
    assert "the rest shows when the run completes" in await segment.inner_text()
    # Its completion carries the whole answer: still cut, now said to be final. (Read in the
    # injecting task: the run is "another client's", so a transcript re-read follows.)
    done = event("agent", type="completed", runId="big", sessionKey=key, ok=True, answer=chunk * 4)
    after = await page.evaluate(
        """(frame) => {
            window.lemon.inject(frame);
            return document.querySelector('[data-run-id="big"] .segment').innerText;
        }""",
        done,
    )
    assert "shown up to 65536 bytes" in after
    assert "é" * (LIVE_SEGMENT_BYTES // 2) in after


async def test_an_answer_above_the_panes_bound_is_recovered_from_the_transcript(
    page: Any, daemon: ControlPlane
) -> None:
    await open_chat(page, daemon)
    words = [f"word{i:05d}" for i in range(7000)]  # a 70,000-byte answer
    await send(page, "/echo " + " ".join(words))
    # Its completion (carrying the whole answer) is above the pane's 65,536 bytes: the plane
    # sends one resync marker in its place and the page re-reads the transcript, whose read is
    # bounded (it says so); the answer shows once, from its start, marked as shortened.
    answer = page.locator(".msg.assistant .segment").last
    # 7,000 streamed deltas and a transcript re-read: seconds on a loaded machine (it failed
    # at 10 s with two test workers and a load of 10); the wait bounds a hang, not a speed.
    await answer.locator(".truncated", has_text="shortened").wait_for(timeout=6 * WAIT_MS)
    await wait_idle(page)
    shown = (await answer.locator("p").first.inner_text()).rstrip("…").split()
    assert len(shown) > 100
    assert shown[:-1] == words[: len(shown) - 1]
    assert (await transcript_text(page)).count("word00000") == 2  # the prompt and the answer
    stats = await page.evaluate("window.lemon.statistics()")
    assert stats["state"] == "online"
    assert page.page_errors == []


CONTRAST = """(selectors) => {
    const channel = (c) => {
        c /= 255;
        return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    };
    const rgb = (s) => s.match(/[\\d.]+/g).map(Number);
    const lum = ([r, g, b]) => 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
    const background = (node) => {
        for (let n = node; n; n = n.parentElement) {
            const c = rgb(getComputedStyle(n).backgroundColor);
            if (c.length < 4 || c[3] > 0) return c.slice(0, 3);
        }
        return rgb(getComputedStyle(document.body).backgroundColor);
    };
    const out = {};
    for (const sel of selectors) {
        const node = document.querySelector(sel);
        if (!node) { out[sel] = null; continue; }
        const a = lum(rgb(getComputedStyle(node).color)), b = lum(background(node));
        out[sel] = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    }
    return out;
}"""
READABLE = [
    ".msg.user .bubble",
    ".msg.assistant .segment",
    ".who",
    ".run-status",
    ".tool-name",
    ".tool-title",
    ".approval-title",
    ".scope",
    ".approval-hint",
    ".decisions button.primary",
    ".decisions button.danger",
    "#conn",
    ".session-preview",
    "#composer-input",
    ".usage",
]


@pytest.mark.parametrize("scheme", ["light", "dark"])
async def test_text_is_readable_in_light_and_dark_mode(
    browser: Any, daemon: ControlPlane, scheme: str, shot: Any, signed_in: Any
) -> None:
    ctx = await browser.new_context(viewport={"width": 1000, "height": 700}, color_scheme=scheme)
    await signed_in(ctx)
    try:
        page = await ctx.new_page()
        await open_chat(page, daemon)
        await send(page, "/echo readable **text**")
        await page.locator(".run-status", has_text="tokens").wait_for(timeout=WAIT_MS)
        await page.fill("#composer-input", "typed")
        await send(page, '/tool bash {"command": "echo contrast"}')
        await page.locator(".approval").wait_for(timeout=WAIT_MS)
        await page.locator(".session-preview").first.wait_for(timeout=WAIT_MS)
        ratios = await page.evaluate(CONTRAST, READABLE)
        low = {sel: ratio for sel, ratio in ratios.items() if ratio is None or ratio < 4.5}
        assert low == {}, low
        assert min(ratios.values()) < 21  # computed, not a constant
        await page.screenshot(path=shot(f"contrast-{scheme}"))
        await page.locator(".approval button[data-decision=deny]").click()
        await page.locator(".tool[data-state=failed]").wait_for(timeout=WAIT_MS)
    finally:
        await ctx.close()


async def test_interrupt_while_busy_replaces_the_run(page: Any, daemon: ControlPlane) -> None:
    await open_chat(page, daemon)
    await send(page, '/tool bash {"command": "echo interrupted"}')
    await page.locator(".approval").wait_for(timeout=WAIT_MS)
    await page.select_option("#mode", "interrupt")
    await send(page, "/echo took over")
    await page.locator(".msg.assistant", has_text="took over").wait_for(timeout=WAIT_MS)
    await wait_idle(page)
    assert await page.locator(".approval").count() == 0
    assert await page.locator(".tool[data-state=running]").count() == 0


async def test_a_failing_command_shows_its_exit_code_and_output(
    page: Any, daemon: ControlPlane
) -> None:
    await open_chat(page, daemon)
    await send(page, '/tool bash {"command": "echo partial-out; exit 3"}')
    await page.locator(".approval").wait_for(timeout=WAIT_MS)
    await page.keyboard.press("Alt+a")
    await page.keyboard.press("2")  # "Allow for this session", by its number
    tool = page.locator(".tool[data-state=failed]")
    await tool.wait_for(timeout=WAIT_MS)
    await wait_idle(page)
    assert "✓ bash allowed for this session" in await transcript_text(page)
    assert await tool.locator(".tool-exit").inner_text() == "exit 3"
    await tool.locator("summary").press("Enter")  # keyboard opens the card
    assert "partial-out" in await tool.locator("pre.output").inner_text()
    assert await tool.locator(".tool-title").inner_text() == "echo partial-out; exit 3"


async def test_steer_while_busy_reaches_the_running_answer(page: Any, daemon: ControlPlane) -> None:
    await open_chat(page, daemon)
    await send(page, '/tool bash {"command": "echo steering"}')
    await page.locator(".approval").wait_for(timeout=WAIT_MS)
    await page.select_option("#mode", "steer")
    await send(page, "/echo steered in")
    assert "steer" in await page.locator(".msg.user").last.inner_text()
    await page.locator(".approval button[data-decision=approve_once]").click()
    await page.locator(".msg.assistant", has_text="steered in").wait_for(timeout=WAIT_MS)
    await wait_idle(page)
    assert await page.locator(".tool[data-state=running]").count() == 0
    # Taken by the running answer (the one with the bash card), not a run of its own.
    answers = page.locator(".msg.assistant")
    assert await answers.count() == 1
    assert await answers.locator(".tool").count() == 1


async def test_an_approval_decided_while_offline_does_not_return_on_reconnect(
    page: Any, context: Any, daemon: ControlPlane, client: ClientFactory
) -> None:
    await open_chat(page, daemon)
    await send(page, '/tool bash {"command": "echo while-offline"}')
    card = page.locator(".approval")
    await card.wait_for(timeout=WAIT_MS)
    approval_id = await card.get_attribute("data-approval-id")
    await context.set_offline(True)  # no reconnect gets through ...
    await page.evaluate("window.lemon.drop()")  # ... after the connection is lost
    await page.wait_for_selector("#conn:not([data-state=online])", timeout=WAIT_MS)
    async with client() as other:
        await other.call("exec.approval.resolve", {"approvalId": approval_id, "decision": "deny"})
    assert await page.locator("#conn").get_attribute("data-state") != "online"
    assert await card.count() == 1  # the page could not hear it
    await context.set_offline(False)
    await page.wait_for_selector("#conn[data-state=online]", timeout=WAIT_MS)
    await page.locator(".msg.assistant", has_text="failed").last.wait_for(timeout=WAIT_MS)
    await wait_idle(page)
    assert await card.count() == 0
    assert await page.locator(".tool[data-state=running]").count() == 0


async def test_a_run_sent_by_another_client_shows_with_its_prompt(
    page: Any, daemon: ControlPlane, client: ClientFactory
) -> None:
    key = await open_chat(page, daemon)
    async with client() as tui:
        sent = await tui.call("chat.send", {"sessionKey": key, "prompt": "/echo sent from the tui"})
        await tui.completed(sent["runId"])
    await page.locator(".msg.user", has_text="/echo sent from the tui").wait_for(timeout=WAIT_MS)
    await wait_idle(page)
    text = await transcript_text(page)
    assert text.count("sent from the tui") == 2  # the prompt and the answer, once each


async def test_a_history_page_above_65536_bytes_is_read_whole(
    page: Any, daemon: ControlPlane, client: ClientFactory
) -> None:
    key = "agent:default:web:browser:unknown:long-history"
    async with client() as c:
        for i in range(10):
            word = f"{i}" + "x" * 6999  # one 7,000-byte word: one delta, one entry
            sent = await c.call("chat.send", {"sessionKey": key, "prompt": "/echo " + word})
            await c.completed(sent["runId"])
        history = await c.request("chat.history", {"sessionKey": key, "limit": 200})
    assert len(json.dumps(history)) > 2 * MAX_EVENT_BYTES  # a response, not an event
    await open_chat(page, daemon, "/chat/" + quote(key, safe=""))
    assert await page.locator(".msg.assistant").count() == 10
    stats = await page.evaluate("window.lemon.statistics()")
    assert (stats["state"], stats["oversized"], stats["overflows"]) == ("online", 0, 0)
