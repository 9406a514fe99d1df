"""A message queued (or a steer sent) while an answer streams: each answer stays whole in its
place and the message's "queued" note goes once it ran. The event sequence is the one the
terminal UI's test plays (``lemon_control_plane.scenarios``), turned into wire events by the
real EventBridge: both clients show the same transcript.

The page talks to the real daemon; only ``chat.send`` is answered by the test (through
Playwright's WebSocket routing) with the scenario's receipt, and the scenario's events are
handed to the page as the socket would deliver them (``window.lemon.inject``)."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from lemon_control_plane import ControlPlane
from lemon_control_plane.scenarios import (
    QUEUE_WHILE_STREAMING,
    STEER_WHILE_STREAMING,
    Scenario,
    Sent,
    wire_events,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT_MS = 10_000
MODES = {"collect": "collect", "steer": "steer", "interrupt": "interrupt"}

SHOWN = """() => [...document.querySelectorAll('#transcript .msg')].map((m) => [
  m.classList.contains('user') ? 'user' : 'assistant',
  (m.querySelector('.bubble') || m.querySelector('.answer')).innerText.trim(),
])"""


async def route_chat_send(page: Any, sent: list[Sent]) -> list[dict[str, Any]]:
    """Answer ``chat.send`` with the scenario's receipts; every other frame goes to the
    daemon and back unchanged. Returns the requests the page sent."""
    receipts = deque(sent)
    requests: list[dict[str, Any]] = []

    def handler(ws: Any) -> None:
        server = ws.connect_to_server()

        def from_page(message: str | bytes) -> None:
            frame = json.loads(message)
            if frame.get("method") != "chat.send":
                server.send(message)
                return
            requests.append(frame["params"])
            step = receipts.popleft()
            payload = {"runId": step.run_id, "sessionKey": frame["params"]["sessionKey"]}
            ws.send(json.dumps({"type": "res", "id": frame["id"], "ok": True, "payload": payload}))

        ws.on_message(from_page)
        server.on_message(lambda message: ws.send(message))

    await page.route_web_socket("**/ws", handler)
    return requests


@pytest.mark.parametrize(
    "scenario", [QUEUE_WHILE_STREAMING, STEER_WHILE_STREAMING], ids=lambda s: s.name
)
async def test_a_message_sent_while_an_answer_streams_keeps_the_transcript_in_order(
    page: Any, daemon: ControlPlane, scenario: Scenario, shot: Callable[[str], Path]
) -> None:
    sent = [s for s in scenario.steps if isinstance(s, Sent)]
    events = [s for s in scenario.steps if not isinstance(s, Sent)]
    wire = iter(await wire_events(events))
    requests = await route_chat_send(page, sent)
    await page.goto(daemon.url + "/chat/" + quote(events[0].session_key, safe=""))
    await page.wait_for_selector("body[data-ready]", timeout=WAIT_MS)
    for step in scenario.steps:
        if isinstance(step, Sent):
            if step.mode != "collect":
                await page.select_option("#mode", MODES[step.mode])
            await page.fill("#composer-input", step.text)
            await page.keyboard.press("Enter")
            await page.locator(".msg.user", has_text=step.text).wait_for(timeout=WAIT_MS)
            await page.wait_for_function(  # the receipt was taken in
                "n => window.lemon.statistics().answered >= n", arg=len(requests), timeout=WAIT_MS
            )
            continue
        for name, payload in next(wire):
            frame = {"type": "event", "event": name, "payload": payload}
            await page.evaluate("(f) => window.lemon.inject(f)", frame)
        if scenario.name == "queue" and step is scenario.steps[5]:
            await page.screenshot(path=str(shot(f"transcript_{scenario.name}_mid")))
    await page.wait_for_function("() => window.lemon.statistics().busyRun === null")
    await page.wait_for_timeout(150)  # a frame for the last deltas to render
    await page.screenshot(path=str(shot(f"transcript_{scenario.name}")))
    assert [p["prompt"] for p in requests] == [s.text for s in sent]
    assert await page.evaluate(SHOWN) == [list(row) for row in scenario.transcript]
    assert await page.locator(".queued-note").count() == 0
    assert page.page_errors == []
