"""A message queued (or a steer sent) while an answer streams: the transcript keeps each answer
whole, in its place, and the message's "(queued)" note goes once it ran. The event sequence is
the one the web page's test plays too (``lemon_control_plane.scenarios``): both clients show
the same transcript."""

from __future__ import annotations

import time
from collections import deque

import pytest
from textual.pilot import Pilot

from lemon_control_plane.scenarios import (
    QUEUE_WHILE_STREAMING,
    STEER_WHILE_STREAMING,
    Scenario,
    ScriptedStream,
    Sent,
)
from lemon_core.execution import Receipt, RunRequest
from lemon_core.sessions import SessionSnapshot
from lemon_tui import LemonTUI
from lemon_tui._editor import Editor
from lemon_tui._widgets import AnswerBlock, UserBlock

from .conftest import until


class ScriptedPort:
    """A session port whose events the test pushes and whose receipts the scenario names."""

    def __init__(self, sent: list[Sent]) -> None:
        self.sent = deque(sent)
        self.stream: ScriptedStream | None = None
        self.requests: list[RunRequest] = []

    def watch(self, session_key: str) -> ScriptedStream:
        self.stream = ScriptedStream(session_key)
        return self.stream

    def watch_all(self) -> ScriptedStream:
        return ScriptedStream("*")

    async def snapshot(self, session_key: str) -> SessionSnapshot:
        return SessionSnapshot(session_key=session_key)

    async def submit(self, request: RunRequest) -> Receipt:
        self.requests.append(request)
        step = self.sent.popleft()
        assert (request.prompt, request.queue_mode) == (step.text, step.mode)
        return Receipt(
            run_id=step.run_id,
            session_key=request.session_key,
            requested_mode=request.queue_mode,
            actual_mode=request.queue_mode,
            status=step.status,
            at_ms=int(time.time() * 1000),
        )

    async def aclose(self) -> None:
        return None


def shown(app: LemonTUI) -> list[tuple[str, str]]:
    """(who, text) of the transcript's messages, top to bottom."""
    rows: list[tuple[str, str]] = []
    for child in app.transcript.children:
        if isinstance(child, UserBlock):
            rows.append(("user", child.text))
        elif isinstance(child, AnswerBlock):
            rows.append(("assistant", child.text))
    return rows


async def play(pilot: Pilot[object], app: LemonTUI, port: ScriptedPort, scenario: Scenario) -> None:
    for step in scenario.steps:
        if isinstance(step, Sent):
            prefix = {"steer": ">", "interrupt": "!"}.get(step.mode, "")
            app.query_one("#input", Editor).value = prefix + step.text
            await pilot.press("enter")
            await until(
                pilot, lambda s=step: any(u.text == s.text for u in app.query(UserBlock)), "sent"
            )
            continue
        stream = port.stream
        assert stream is not None
        stream.push(step)
        await until(pilot, stream.drained.is_set, "handled")
        await pilot.pause()


@pytest.mark.parametrize(
    "scenario", [QUEUE_WHILE_STREAMING, STEER_WHILE_STREAMING], ids=lambda s: s.name
)
async def test_a_message_sent_while_an_answer_streams_keeps_the_transcript_in_order(
    scenario: Scenario,
) -> None:
    port = ScriptedPort([s for s in scenario.steps if isinstance(s, Sent)])

    async def connect() -> ScriptedPort:
        return port

    app = LemonTUI(connect, where="a scripted daemon")  # type: ignore[arg-type]
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: port.stream is not None, "watching")
        await play(pilot, app, port, scenario)
        await until(pilot, lambda: not app.waiting_for, "every run ended")
        assert shown(app) == list(scenario.transcript)
        assert [u.note for u in app.query(UserBlock)] == [""] * len(app.query(UserBlock))
        assert "queued" not in " ".join(str(u.render()) for u in app.query(UserBlock))
        assert "queued" not in str(app.query_one("#status").render())
