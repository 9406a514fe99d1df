"""The main screen against a real daemon: a streamed Markdown answer, the status line, 80x24."""

from __future__ import annotations

import gc

from lemon_control_plane import ControlPlane, WebSocketSessionPort
from lemon_core.execution import RunRequest
from lemon_core.sessions import RunEnded
from lemon_tui._editor import Editor
from lemon_tui._widgets import AnswerBlock, UserBlock

from .conftest import app_for, status_text, until


async def test_an_answer_streams_as_markdown_with_the_status_line(daemon: ControlPlane) -> None:
    app = app_for(daemon)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        assert "agent:default:main" in status_text(app)
        assert "idle" in status_text(app)
        box = app.query_one("#input", Editor)
        assert box.has_focus
        box.value = "/echo **bold** and `code`"
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.query(AnswerBlock)), "an answer block")
        answer = app.query_one(AnswerBlock)
        await until(pilot, lambda: answer.sealed == "ok", "the answer sealed")
        assert answer.text == "**bold** and `code`"
        assert [u.text for u in app.query(UserBlock)] == ["/echo **bold** and `code`"]
        await until(pilot, lambda: "tokens" in status_text(app), "usage in the status line")
        assert "idle" in status_text(app)
        assert "online" in status_text(app)
        assert box.value == ""
        status = app.query_one("#status")
        transcript = app.query_one("#transcript")
        assert transcript.region.bottom <= box.region.y
        assert box.region.bottom <= status.region.y
        assert status.region.bottom == 24
        assert transcript.region.height >= 15  # 80x24 leaves room for the conversation
        # The run's end settled memory: the transcript so far is frozen for the collector.
        await until(pilot, lambda: gc.get_freeze_count() > 0, "settle_memory ran")
        app.switch("agent:default:main:sub:other")
        assert gc.get_freeze_count() == 0  # a switch lets the removed widgets be collected


async def test_no_daemon_says_how_to_start_one(daemon: ControlPlane) -> None:
    from lemon_tui import LemonTUI, websocket_connector
    from lemon_tui._widgets import NoteLine

    url = daemon.ws_url.replace("/ws", "/nowhere")
    app = LemonTUI(websocket_connector(url), where=url)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: bool(app.query(NoteLine)), "a note")
        assert "lemon daemon start" in str(app.query_one(NoteLine).render())
        assert app.status.connection in ("offline", "reconnecting")


async def test_opening_a_session_shows_its_recent_history(
    daemon: ControlPlane, other: WebSocketSessionPort
) -> None:
    stream = other.watch("agent:default:main")
    receipt = await other.submit(
        RunRequest(origin="test", session_key="agent:default:main", prompt="/echo said before")
    )
    while not (
        isinstance(event := await stream.get(), RunEnded) and event.run_id == receipt.run_id
    ):
        pass
    stream.close()
    app = app_for(daemon)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: bool(app.query(AnswerBlock)), "the history")
        assert [u.text for u in app.query(UserBlock)] == ["/echo said before"]
        assert [a.text for a in app.query(AnswerBlock)] == ["said before"]
