"""The slash commands against a real daemon: /history /model /approvals /abort /usage /status,
and the status line's model and context gauge."""

from __future__ import annotations

from lemon_control_plane import ControlPlane
from lemon_tui import LemonTUI
from lemon_tui._editor import Editor
from lemon_tui._widgets import AnswerBlock, ApprovalPanel, NoteLine, ToolCardView

from .conftest import ASK_BASH, NO_APPROVALS, app_for, open_panel, status_text, until


def notes(app: LemonTUI) -> str:
    return "\n".join(str(n.render()) for n in app.query(NoteLine))


async def run(pilot: object, app: LemonTUI, line: str) -> None:
    from textual.pilot import Pilot

    assert isinstance(pilot, Pilot)
    app.query_one("#input", Editor).value = line
    await pilot.press("enter")


async def answered(pilot: object, app: LemonTUI, line: str) -> None:
    """Send ``line`` and wait for its run to end."""
    from textual.pilot import Pilot

    assert isinstance(pilot, Pilot)
    before = len(app.query(AnswerBlock))
    await run(pilot, app, line)
    await until(pilot, lambda: len(app.query(AnswerBlock)) > before, "an answer")
    await until(pilot, lambda: not app.waiting_for, "the run ended")


async def test_history_usage_status_and_the_gauge(daemon: ControlPlane) -> None:
    app = app_for(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await until(pilot, lambda: app.models is not None, "the catalogue")
        assert "main · offline · ctx" in status_text(app)  # the default model (offline:offline)
        await answered(pilot, app, "/echo first answer")
        await until(pilot, lambda: "/1.0M" in status_text(app), "the gauge")
        assert app.context_window() == 1_000_000  # models.list: the offline model's window
        await run(pilot, app, "/history")
        await until(pilot, lambda: "first answer" in notes(app), "the history")
        assert "user" in notes(app)
        assert "assistant" in notes(app)
        await run(pilot, app, "/history nope")
        await until(pilot, lambda: "usage: /history [N]" in notes(app), "a clear error")
        await run(pilot, app, "/usage")
        await until(pilot, lambda: "this client saw it): 1 run ·" in notes(app), "usage")
        await until(pilot, lambda: "the daemon (today): 1 run ·" in notes(app), "usage.status")
        await run(pilot, app, "/status")
        await until(pilot, lambda: "connections" in notes(app), "the daemon's status")
        assert "lemon-py" in notes(app)


async def test_model_lists_sets_and_resets_the_model(daemon: ControlPlane) -> None:
    app = app_for(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await run(pilot, app, "/model")
        await until(pilot, lambda: "openai:gpt-4o" in notes(app), "the catalogue")
        assert "* offline:offline" in notes(app)
        await run(pilot, app, "/model openai:nonesuch")
        await until(pilot, lambda: "unknown model" in notes(app), "refused")
        assert app.model is None
        await run(pilot, app, "/model anthropic:claude-sonnet-4-20250514")
        await until(pilot, lambda: app.model is not None, "set")
        assert "claude-sonnet-4" in status_text(app)
        assert (
            "this session now uses anthropic:claude-sonnet-4-20250514 (set on the session"
            in notes(app)
        )  # sessions.patch
        sonnet = app.model
        app.switch("agent:default:main:sub:elsewhere")
        await until(pilot, lambda: app.model is None and "elsewhere" in status_text(app), "away")
        app.switch("agent:default:main")
        await until(pilot, lambda: app.model == sonnet, "the session's own model, learned back")
        await run(pilot, app, "/echo which model")
        await until(pilot, lambda: not app.waiting_for and "failed" in notes(app), "ran")
        # The request carried the model: the offline echo did not answer, the real provider
        # (no key configured here) refused.
        assert "which model" not in [a.text for a in app.query(AnswerBlock)]
        await run(pilot, app, "/model default")
        await until(pilot, lambda: app.model is None, "reset")
        await answered(pilot, app, "/echo which model")
        assert app.query(AnswerBlock)[-1].text == "which model"


async def test_abort_and_approvals(daemon: ControlPlane) -> None:
    app = app_for(daemon, NO_APPROVALS)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await run(pilot, app, "/abort")
        await until(pilot, lambda: "nothing is running" in notes(app), "idle")
        assert app.is_running
        await run(pilot, app, '/tool bash {"command": "sleep 30"}')
        await until(pilot, lambda: bool(app.query(ToolCardView)), "the sleep runs")
        await run(pilot, app, "/abort")
        await until(pilot, lambda: not app.waiting_for, "aborted")
        assert app.query_one(ToolCardView).state in ("cancelled", "failed")
        await run(pilot, app, "/approvals")
        await until(pilot, lambda: "no approval is waiting" in notes(app), "none")


async def test_approvals_asks_again_for_one_still_waiting(daemon: ControlPlane) -> None:
    app = app_for(daemon, ASK_BASH)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await run(pilot, app, '/tool bash {"command": "echo asked"}')
        await open_panel(pilot, app)
        panel = app.screen
        assert isinstance(panel, ApprovalPanel)
        app.panel = None  # as if the panel had been lost (it stays pending on the daemon)
        panel.dismiss(None)
        await until(pilot, lambda: not isinstance(app.screen, ApprovalPanel), "gone")
        await run(pilot, app, "/approvals")
        await until(pilot, lambda: "waiting: " in notes(app), "listed")
        assert "bash" in notes(app)
        await open_panel(pilot, app)
        await pilot.press("1")
        await until(pilot, lambda: not app.waiting_for, "the run ended")
        assert [c.state for c in app.query(ToolCardView)] == ["ok"]


async def test_brackets_in_text_are_shown_as_typed_never_as_markup(daemon: ControlPlane) -> None:
    from lemon_tui._widgets import UserBlock

    app = app_for(daemon)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        line = "/echo [b]not bold[/b] [N] [link=http://x]y[/link]"
        await answered(pilot, app, line)
        assert str(app.query_one(UserBlock).render()) == line
        await run(pilot, app, "/history")
        await until(pilot, lambda: "[N]" in notes(app), "the history, literally")
        assert "[link=http://x]" in notes(app)
