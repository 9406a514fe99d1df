"""Shared client scenarios for tests: one sequence of session events, told the same way to every
client of the daemon (the terminal UI and the web page), and the transcript each must show.

A scenario is a list of steps: :class:`Sent` (the person sends a message; the daemon answers
with a receipt of that status and run id) or a session event, in order. A client test plays
the steps through its own surface (the TUI through a scripted session port, the page through
the wire events the real :class:`~lemon_control_plane.bridge.EventBridge` makes of them, see
:func:`wire_events`) and asserts :attr:`Scenario.transcript`: who said what, in order, and
that no "queued" / "steering" note is left on a message once it ran.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from lemon_core.events import QueueOutcomeKind, RunPhase
from lemon_core.sessions import (
    QueueNotice,
    RunEnded,
    RunPhaseNotice,
    SessionEvent,
    SessionPort,
    SessionStreamBase,
    TextDelta,
)

__all__ = [
    "QUEUE_WHILE_STREAMING",
    "STEER_WHILE_STREAMING",
    "Scenario",
    "ScriptedStream",
    "Sent",
    "Step",
    "wire_events",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class Sent:
    """The person sends ``text`` in ``mode``; the daemon's receipt says ``status`` (``run_id``:
    the run the message is, or, for a steer taken by the running answer, the run it joined)."""

    text: str
    mode: Literal["collect", "steer", "interrupt"] = "collect"
    status: Literal["started", "queued", "dispatched_to_active"] = "started"
    run_id: str


Step = Sent | SessionEvent


@dataclass(frozen=True, kw_only=True, slots=True)
class Scenario:
    name: str
    steps: tuple[Step, ...]
    transcript: tuple[tuple[Literal["user", "assistant"], str], ...]
    """What the client shows once every step ran: (who, text), top to bottom."""


def _started(key: str, run_id: str) -> RunPhaseNotice:
    return RunPhaseNotice(session_key=key, run_id=run_id, phase=RunPhase.STREAMING)


def _delta(key: str, run_id: str, seq: int, text: str) -> TextDelta:
    return TextDelta(session_key=key, run_id=run_id, seq=seq, text=text)


def _done(key: str, run_id: str, answer: str) -> RunEnded:
    return RunEnded(session_key=key, run_id=run_id, attempt_id=run_id, ok=True, answer=answer)


KEY = "agent:default:main"
ONE = "Answer one, part one. Answer one, part two."
TWO = "Answer two."

QUEUE_WHILE_STREAMING = Scenario(
    name="queue",
    steps=(
        Sent(text="first question", status="started", run_id="run-1"),
        _started(KEY, "run-1"),
        _delta(KEY, "run-1", 1, "Answer one, "),
        _delta(KEY, "run-1", 2, "part one. "),
        Sent(text="second question", status="queued", run_id="run-2"),
        _delta(KEY, "run-1", 3, "Answer one, "),
        _delta(KEY, "run-1", 4, "part two."),
        _done(KEY, "run-1", ONE),
        _started(KEY, "run-2"),
        _delta(KEY, "run-2", 1, "Answer "),
        _delta(KEY, "run-2", 2, "two."),
        _done(KEY, "run-2", TWO),
    ),
    transcript=(
        ("user", "first question"),
        ("assistant", ONE),
        ("user", "second question"),
        ("assistant", TWO),
    ),
)

STEER_WHILE_STREAMING = Scenario(
    name="steer",
    steps=(
        Sent(text="first question", status="started", run_id="run-1"),
        _started(KEY, "run-1"),
        _delta(KEY, "run-1", 1, "Answer one, "),
        _delta(KEY, "run-1", 2, "part one. "),
        Sent(text="and mind this", mode="steer", status="dispatched_to_active", run_id="run-1"),
        QueueNotice(session_key=KEY, run_id="run-1", outcome=QueueOutcomeKind.STEERED),
        _delta(KEY, "run-1", 3, "Answer one, "),
        _delta(KEY, "run-1", 4, "part two."),
        _done(KEY, "run-1", ONE),
    ),
    transcript=(
        ("user", "first question"),
        ("assistant", ONE),
        ("user", "and mind this"),
    ),
)


class ScriptedStream(SessionStreamBase):
    """A session stream the test feeds with :meth:`push` (ends when closed). ``drained`` is
    set while its reader waits for more: what was pushed was taken (and handled)."""

    def __init__(self, session_key: str) -> None:
        super().__init__(session_key)
        self._wake = asyncio.Event()
        self.drained = asyncio.Event()

    def push(self, event: SessionEvent) -> None:
        self._ready.append(event)
        self.drained.clear()
        self._wake.set()

    async def _more(self) -> None:
        self._wake.clear()
        self.drained.set()
        await self._wake.wait()

    def _on_close(self) -> None:
        self._wake.set()


class _OneStream:
    """Just enough of a session port for the bridge: its ``watch_all`` stream."""

    def __init__(self, stream: ScriptedStream) -> None:
        self.stream = stream

    def watch_all(self) -> ScriptedStream:
        return self.stream


async def wire_events(events: Sequence[SessionEvent]) -> list[list[tuple[str, dict[str, Any]]]]:
    """The wire events (name, payload) the real EventBridge sends for each of ``events``, in
    order (one list per session event; empty when the wire has none for it)."""
    from lemon_control_plane.bridge import EventBridge

    out: list[tuple[str, dict[str, Any]]] = []
    each: list[list[tuple[str, dict[str, Any]]]] = []
    stream = ScriptedStream("*")
    port = cast(SessionPort, _OneStream(stream))
    async with EventBridge(port, lambda name, payload, _key: out.append((name, payload))):
        for event in events:
            stream.push(event)
            async with asyncio.timeout(5):
                await stream.drained.wait()  # the bridge projects an event as it takes it
            each.append(list(out))
            out.clear()
    return each
