"""Overflow recovery: the stream falls behind (a real WebSocketSessionPort with a tiny stream
bound), the app watches again, takes snapshot(), replaces the active answer from it and skips
the deltas the snapshot holds: no duplicated text, the pending approval asked again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from lemon_control_plane import ControlPlane, WebSocketSessionPort
from lemon_core.sessions import ApprovalAsked, SessionEvent, SessionStreamClosedError
from lemon_tui import ClientPort, LemonTUI
from lemon_tui._editor import Editor
from lemon_tui._widgets import AnswerBlock

from .conftest import ASK_BASH, open_panel, until


class GatedStream:
    """A real stream whose events reach the app only once ``gate`` is set."""

    def __init__(self, real: Any, gate: asyncio.Event) -> None:
        self._real = real
        self._gate = gate

    async def get(self) -> SessionEvent:
        await self._gate.wait()
        event: SessionEvent = await self._real.get()
        return event

    def __aiter__(self) -> AsyncIterator[SessionEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[SessionEvent]:
        while True:
            try:
                yield await self.get()
            except SessionStreamClosedError:
                return

    def close(self) -> None:
        self._real.close()

    @property
    def closed(self) -> bool:
        return bool(self._real.closed)


class GatedPort:
    """The real port; only its streams are gated (the test decides when the app reads)."""

    def __init__(self, real: WebSocketSessionPort, gate: asyncio.Event) -> None:
        self._real = real
        self._gate = gate

    def watch(self, session_key: str, *, max_entries: int | None = None) -> GatedStream:
        return GatedStream(self._real.watch(session_key, max_entries=max_entries), self._gate)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


async def test_an_overflow_is_recovered_from_the_snapshot_without_duplicates(
    daemon: ControlPlane, other: WebSocketSessionPort
) -> None:
    gate = asyncio.Event()
    gate.set()

    async def connect() -> ClientPort:
        real = await WebSocketSessionPort(
            daemon.ws_url, token=daemon.local_token, stream_max_entries=2
        ).__aenter__()
        port: Any = GatedPort(real, gate)
        return port  # type: ignore[no-any-return]  # a SessionPort by delegation

    app = LemonTUI(connect, tool_policy=ASK_BASH)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        watching = other.watch("agent:default:main")
        gate.clear()  # the app stops reading: its bounded stream will overflow
        app.query_one("#input", Editor).value = '/tool bash {"command": "echo recovered"}'
        await pilot.press("enter")
        while not isinstance(await watching.get(), ApprovalAsked):
            pass  # the run now waits, with "Offline: calling bash." streamed
        watching.close()
        gate.set()
        await open_panel(pilot, app)
        assert app.recoveries == 1
        first = app.query(AnswerBlock)[0]
        assert first.text == "Offline: calling bash."
        await pilot.press("1")
        await until(pilot, lambda: not app.waiting_for, "the run ended")
        text = "".join(a.text for a in app.query(AnswerBlock))
        assert text.count("Offline: calling bash.") == 1
        assert "recovered" in text
        assert all(a.sealed is not None for a in app.query(AnswerBlock))
