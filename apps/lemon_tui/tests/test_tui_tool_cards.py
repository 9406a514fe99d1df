"""Tool cards keyed by action id: started → completed, or sealed when the run ends open."""

from __future__ import annotations

from lemon_control_plane import ControlPlane
from lemon_tui._editor import Editor
from lemon_tui._widgets import ToolCardView

from .conftest import NO_APPROVALS, app_for, until


async def test_a_tool_call_is_one_card_from_start_to_completion(daemon: ControlPlane) -> None:
    app = app_for(daemon, NO_APPROVALS)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        app.query_one("#input", Editor).value = '/tool bash {"command": "echo card-output"}'
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.query(ToolCardView)), "a card")
        card = app.query_one(ToolCardView)
        await until(pilot, lambda: card.state != "running", "the card completed")
        await until(pilot, lambda: not app.waiting_for, "the run ended")
        assert card.state == "ok"
        assert "card-output" in card.message
        assert len(app.query(ToolCardView)) == 1
        assert "✓" in str(card.render())


async def test_a_card_open_when_the_run_is_aborted_is_sealed(daemon: ControlPlane) -> None:
    app = app_for(daemon, NO_APPROVALS)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        app.query_one("#input", Editor).value = '/tool bash {"command": "sleep 30"}'
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.query(ToolCardView)), "a card")
        card = app.query_one(ToolCardView)
        assert card.state == "running"
        await pilot.press("ctrl+c")
        await until(pilot, lambda: not app.waiting_for, "the run ended")
        assert card.state in ("cancelled", "failed")
        assert "…" not in str(card.render()).split("\n")[0]
