"""While a run is busy: Enter queues, '>' steers, '!' interrupts, Ctrl+C aborts (twice when
idle quits); and the slash commands."""

from __future__ import annotations

from lemon_control_plane import ControlPlane, WebSocketSessionPort
from lemon_core.execution import RunRequest
from lemon_tui._editor import Editor
from lemon_tui._widgets import AnswerBlock, NoteLine, ToolCardView, UserBlock

from .conftest import NO_APPROVALS, app_for, status_text, until

SLEEP = '/tool bash {"command": "sleep 30"}'


def answers(app: object) -> list[str]:
    from lemon_tui import LemonTUI

    assert isinstance(app, LemonTUI)
    return [a.text for a in app.query(AnswerBlock)]


def notes(app: object) -> str:
    from lemon_tui import LemonTUI

    assert isinstance(app, LemonTUI)
    return "\n".join(str(n.render()) for n in app.query(NoteLine))


async def type_line(pilot: object, app: object, text: str) -> None:
    from textual.pilot import Pilot

    from lemon_tui import LemonTUI

    assert isinstance(app, LemonTUI)
    assert isinstance(pilot, Pilot)
    app.query_one("#input", Editor).value = text
    await pilot.press("enter")


async def test_enter_queues_and_ctrl_c_aborts_only_the_running_answer(
    daemon: ControlPlane,
) -> None:
    app = app_for(daemon, NO_APPROVALS)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await type_line(pilot, app, SLEEP)
        await until(pilot, lambda: bool(app.query(ToolCardView)), "the sleep runs")
        await type_line(pilot, app, "/echo after the abort")
        await until(pilot, lambda: len(app.query(UserBlock)) == 2, "queued message shown")
        assert "queued" in str(app.query(UserBlock)[-1].render())
        assert "queued 1" in status_text(app)
        await pilot.press("ctrl+c")
        await until(pilot, lambda: "after the abort" in answers(app), "the queued one ran")
        await until(pilot, lambda: not app.waiting_for, "all ended")
        assert app.query_one(ToolCardView).state in ("cancelled", "failed")
        assert "aborting" in notes(app)


async def test_bang_interrupts_the_running_answer(daemon: ControlPlane) -> None:
    app = app_for(daemon, NO_APPROVALS)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await type_line(pilot, app, SLEEP)
        await until(pilot, lambda: bool(app.query(ToolCardView)), "the sleep runs")
        await type_line(pilot, app, "!/echo instead")
        await until(pilot, lambda: "instead" in answers(app), "the interrupt ran")
        await until(pilot, lambda: not app.waiting_for, "all ended")
        assert app.query_one(ToolCardView).state in ("cancelled", "failed")


async def test_gt_steers_the_running_answer(daemon: ControlPlane) -> None:
    app = app_for(daemon, NO_APPROVALS)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await type_line(pilot, app, SLEEP)
        await until(pilot, lambda: bool(app.query(ToolCardView)), "the sleep runs")
        await type_line(pilot, app, ">/echo steered")
        await until(pilot, lambda: len(app.query(UserBlock)) == 2, "the steer shown")
        # Its note says "steering" (or "queued") until the running answer took it; then the
        # note goes and a line says it was taken.
        steer = str(app.query(UserBlock)[-1].render())
        assert "steering" in steer or "queued" in steer or "steer taken" in notes(app)
        await pilot.press("ctrl+c")
        await until(pilot, lambda: not app.waiting_for, "all ended")


async def test_ctrl_c_twice_on_an_idle_screen_quits(daemon: ControlPlane) -> None:
    app = app_for(daemon)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await pilot.press("ctrl+c")
        await until(pilot, lambda: "Ctrl+C again" in notes(app), "the hint")
        assert app.is_running
        await pilot.press("ctrl+c")
        await until(pilot, lambda: not app.is_running, "quit")
    assert app.return_value == 0


async def test_new_sessions_resume_and_compact(
    daemon: ControlPlane, other: WebSocketSessionPort
) -> None:
    earlier = "agent:default:main:sub:earlier"
    receipt = await other.submit(
        RunRequest(origin="test", session_key=earlier, prompt="/echo from before")
    )
    stream = other.watch(earlier)
    snap = await other.snapshot(earlier)
    while snap.active is not None or snap.last_run_id != receipt.run_id:
        await stream.get()
        snap = await other.snapshot(earlier)
    stream.close()
    app = app_for(daemon)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await type_line(pilot, app, "/new")
        await until(pilot, lambda: app.session.startswith("agent:default:main:sub:"), "new")
        fresh = app.session
        assert fresh in status_text(app)
        await type_line(pilot, app, "/sessions")
        await until(pilot, lambda: earlier in notes(app), "the list")
        await type_line(pilot, app, f"/resume {earlier}")
        await until(pilot, lambda: "from before" in answers(app), "its history shown")
        assert app.session == earlier
        assert [u.text for u in app.query(UserBlock)] == ["/echo from before"]
        await type_line(pilot, app, "/resume not a key")
        await until(pilot, lambda: "session key" in notes(app).lower(), "a clear error")
        await type_line(pilot, app, "/compact")
        await until(pilot, lambda: "compact" in notes(app).split("\n")[-1], "compact answered")
        await type_line(pilot, app, "/quit")
        await until(pilot, lambda: not app.is_running, "quit")
