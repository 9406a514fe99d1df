"""The daemon restarts while the app is open (a run waiting for an approval): the app shows
reconnecting, connects again with backoff, recovers from the snapshot (the panel of an
approval that is gone closes, no card is left spinning) and works on the new daemon; what is
typed while offline stays in the editor and is never replayed (seed 003)."""

from __future__ import annotations

from pathlib import Path

from lemon_control_plane import ControlPlane, ControlPlaneOptions
from lemon_core.config import load_config
from lemon_runtime import Runtime
from lemon_tui import LemonTUI, websocket_connector
from lemon_tui._editor import Editor
from lemon_tui._widgets import AnswerBlock, ApprovalPanel, NoteLine, ToolCardView, UserBlock

from .conftest import ASK_BASH, open_panel, until


def boot(tmp_path: Path, port: int) -> Runtime:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    loaded = load_config(home=home, cwd=work, environ={})
    options = [ControlPlaneOptions(port=port, cwd=str(work))]
    return Runtime(profile="daemon", config=loaded, options=options)


async def test_a_daemon_restart_is_survived(tmp_path: Path) -> None:
    first = boot(tmp_path, 0)
    await first.start()
    try:
        plane = first.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        url = plane.ws_url
        port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        app = LemonTUI(
            websocket_connector(url, token=plane.local_token), where=url, tool_policy=ASK_BASH
        )
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.status.connection == "online", "connected")
            app.query_one("#input", Editor).value = '/tool bash {"command": "echo hi"}'
            await pilot.press("enter")
            await open_panel(pilot, app)
            await first.stop()
            await until(pilot, lambda: app.status.connection != "online", "the drop is seen")
            second = boot(tmp_path, port)
            async with second:
                await until(pilot, lambda: app.status.connection == "online", "reconnected")
                await until(pilot, lambda: not isinstance(app.screen, ApprovalPanel), "closed")
                await until(pilot, lambda: not app.waiting_for, "nothing is waited for")
                assert all(c.state != "running" for c in app.query(ToolCardView))
                app.query_one("#input", Editor).value = "/echo after the restart"
                await pilot.press("enter")
                await until(
                    pilot,
                    lambda: any(a.text == "after the restart" for a in app.query(AnswerBlock)),
                    "an answer from the new daemon",
                )
    finally:
        await first.stop()


async def test_what_is_typed_while_offline_stays_in_the_editor_and_is_not_replayed(
    tmp_path: Path,
) -> None:
    """Seed 003: no offline mutation is replayed. Enter while offline sends nothing, keeps
    the text in the editor and says the daemon is offline; after the reconnect nothing is
    sent by itself, and Enter again sends it (once)."""
    first = boot(tmp_path, 0)
    await first.start()
    try:
        plane = first.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        url = plane.ws_url
        port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        app = LemonTUI(websocket_connector(url, token=plane.local_token), where=url)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.status.connection == "online", "connected")
            await first.stop()
            await until(pilot, lambda: app.port is None, "the drop is seen")
            editor = app.query_one("#input", Editor)
            editor.value = "/echo typed while offline"
            await pilot.press("enter")

            def said() -> str:
                return "\n".join(str(n.render()) for n in app.query(NoteLine))

            await until(pilot, lambda: "not sent" in said(), "the offline note")
            assert "offline" in said()
            assert editor.text == "/echo typed while offline"  # kept, to send again
            assert not [u for u in app.query(UserBlock) if u.text == "/echo typed while offline"]
            async with boot(tmp_path, port):
                await until(pilot, lambda: app.status.connection == "online", "reconnected")
                for _ in range(30):  # a while online: nothing is sent by itself
                    await pilot.pause(0.02)
                assert not any(a.text == "typed while offline" for a in app.query(AnswerBlock))
                assert not app.query(UserBlock)
                assert editor.text == "/echo typed while offline"
                await pilot.press("enter")  # the person sends it again
                await until(
                    pilot,
                    lambda: any(a.text == "typed while offline" for a in app.query(AnswerBlock)),
                    "sent when sent again",
                )
                assert [u.text for u in app.query(UserBlock)] == ["/echo typed while offline"]
                assert editor.text == ""
    finally:
        await first.stop()
