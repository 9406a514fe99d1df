"""Recovery after a tool card split the answer: the snapshot's active text is the whole run's
text, the open block holds only the text after the card. A delta the snapshot includes is
never shown twice (deterministic: the events and the snapshot are given, no timing)."""

from __future__ import annotations

from typing import Any

from lemon_control_plane import ControlPlane, WebSocketSessionPort
from lemon_core.events import ActionKind, RunPhase
from lemon_core.sessions import ActiveRun, SessionSnapshot, TextDelta, ToolCard
from lemon_tui import ClientPort, LemonTUI
from lemon_tui._widgets import AnswerBlock

from .conftest import until


class SnapshotPort:
    """Answers ``snapshot()`` with a given snapshot (the app's recovery reads only that)."""

    def __init__(self, snapshot: SessionSnapshot) -> None:
        self._snapshot = snapshot

    async def snapshot(self, session_key: str) -> SessionSnapshot:
        return self._snapshot


async def test_recovery_after_a_tool_card_does_not_show_the_first_block_again(
    daemon: ControlPlane,
) -> None:
    async def connect() -> ClientPort:
        port: Any = await WebSocketSessionPort(daemon.ws_url, token=daemon.local_token).__aenter__()
        return port  # type: ignore[no-any-return]

    app = LemonTUI(connect)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        key, run = app.session, "run_split"
        app._handle(TextDelta(session_key=key, run_id=run, seq=1, text="calling bash."))
        card = ToolCard(
            session_key=key, run_id=run, action_id="a1", phase="started",
            kind=ActionKind.COMMAND, title="bash",
        )  # fmt: skip
        app._handle(card)
        app._handle(TextDelta(session_key=key, run_id=run, seq=2, text="bash "))
        # The stream overflowed here (deltas 3 and 4 lost): the snapshot holds all four.
        active = ActiveRun(
            run_id=run, attempt_id=run, attempt=1, phase=RunPhase.STREAMING,
            text="calling bash.bash returned ok", text_seq=4,
        )  # fmt: skip
        port: Any = SnapshotPort(SessionSnapshot(session_key=key, active=active))
        await app._recover(port, history=False)
        # Deltas the snapshot holds, delivered again on the new stream, are skipped.
        app._handle(TextDelta(session_key=key, run_id=run, seq=3, text="returned "))
        app._handle(TextDelta(session_key=key, run_id=run, seq=4, text="ok"))
        app._handle(TextDelta(session_key=key, run_id=run, seq=5, text="."))
        await pilot.pause()
        texts = [a.text for a in app.query(AnswerBlock)]
        assert texts == ["calling bash.", "bash returned ok."]
