"""The session kit's harness and observers: the :class:`SessionPortHarness` Protocol an
implementation's fixture returns, :class:`SessionRecorder` (reads a stream in a task it owns and
waits for predicates over what it saw), and the accounting helpers of the contract checks."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

from lemon_core.events import ApprovalDecision, Event, QueueOutcomeKind
from lemon_core.sessions import (
    QueueNotice,
    RunEnded,
    SessionEvent,
    SessionPort,
    SessionStream,
    TextDelta,
)
from lemon_platform_test.executor import ScriptedExecutor

__all__ = [
    "SETTLING_OUTCOMES",
    "SessionPortHarness",
    "SessionRecorder",
    "carrier",
    "drain",
    "run_ended",
    "settlements",
]

#: The queue outcomes that settle a submission for good (``fallback_queued`` only moves it).
SETTLING_OUTCOMES: frozenset[QueueOutcomeKind] = frozenset(
    {
        QueueOutcomeKind.MERGED,
        QueueOutcomeKind.STEERED,
        QueueOutcomeKind.CANCELLED,
        QueueOutcomeKind.REJECTED,
    }
)


@runtime_checkable
class SessionPortHarness(Protocol):
    """What the kit drives: ports over one running runtime, and the executor behind them.

    ``port`` and ``other_port`` are two port instances over the same runtime (two clients);
    the executor is a :class:`ScriptedExecutor` the kit scripts by prompt.
    """

    @property
    def port(self) -> SessionPort: ...

    @property
    def other_port(self) -> SessionPort:
        """A second port instance over the same runtime (another client)."""
        ...

    @property
    def executor(self) -> ScriptedExecutor: ...

    def port_with(self, *, stream_max_entries: int) -> SessionPort:
        """A further port over the same runtime whose streams hold at most
        ``stream_max_entries`` undelivered events (to make a watcher overflow)."""
        ...

    async def ask_approval(
        self, *, session_key: str, run_id: str, tool: str, action: Mapping[str, Any]
    ) -> str:
        """Make a gated tool of the running attempt ``run_id`` ask for approval, as the
        agent's tools do; return the approval id once it is pending (the request keeps
        waiting in the background for its decision)."""
        ...

    async def approval_outcome(self, approval_id: str) -> ApprovalDecision:
        """The decision the requester of ``approval_id`` received (waits for it)."""
        ...

    def publish_on_session(self, session_key: str, event: Event) -> None:
        """Publish a raw runtime event where the session's streams read it (a late or
        stray event, as a slow runtime would deliver it)."""
        ...


def settlements(events: Sequence[SessionEvent], run_id: str) -> list[SessionEvent]:
    """The events that settle submission ``run_id``: its :class:`RunEnded`, or a
    :class:`QueueNotice` with a settling outcome (exactly one is expected)."""
    return [
        e
        for e in events
        if (isinstance(e, RunEnded) and e.run_id == run_id)
        or (isinstance(e, QueueNotice) and e.run_id == run_id and e.outcome in SETTLING_OUTCOMES)
    ]


def run_ended(events: Sequence[SessionEvent], run_id: str) -> RunEnded | None:
    """The (first) :class:`RunEnded` of ``run_id`` among ``events``."""
    return next((e for e in events if isinstance(e, RunEnded) and e.run_id == run_id), None)


class SessionRecorder:
    """Reads a :class:`SessionStream` in a task it owns (``async with``) and records every
    event, so that a test waits for facts without the stream's bound filling up.

    :meth:`until` waits for a predicate over the recorded events; it fails (with what was
    seen) when the stream ends first or ``timeout_s`` passes (a guard, not a wait).
    """

    def __init__(self, stream: SessionStream, *, timeout_s: float = 10.0) -> None:
        self.stream = stream
        self.timeout_s = timeout_s
        self.events: list[SessionEvent] = []
        self.ended = False
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        self._task = asyncio.get_running_loop().create_task(self._read())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stream.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _read(self) -> None:
        try:
            async for event in self.stream:
                self.events.append(event)
                self._changed.set()
        finally:
            self.ended = True
            self._changed.set()

    async def until(
        self, predicate: Callable[[list[SessionEvent]], bool], what: str
    ) -> list[SessionEvent]:
        """Wait until ``predicate(events)`` holds; return the events recorded so far."""
        try:
            async with asyncio.timeout(self.timeout_s):
                while not predicate(self.events):
                    if self.ended:
                        raise AssertionError(
                            f"the session stream ended before {what}; saw {self._seen()}"
                        )
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(
                f"waited {self.timeout_s} s (failure guard) for {what}; saw {self._seen()}"
            ) from None
        return self.events

    async def ended_run(self, run_id: str) -> RunEnded:
        """Wait for the :class:`RunEnded` of ``run_id``."""
        await self.until(lambda evs: run_ended(evs, run_id) is not None, f"RunEnded of {run_id}")
        found = run_ended(self.events, run_id)
        assert found is not None
        return found

    def _seen(self) -> list[str]:
        return [_describe(e) for e in self.events[-40:]]


def _describe(event: SessionEvent) -> str:
    name = type(event).__name__
    if isinstance(event, TextDelta):
        return f"{name}({event.run_id[-8:]}#{event.seq} {event.text!r})"
    if isinstance(event, QueueNotice):
        return f"{name}({event.run_id[-8:]} {event.outcome.value})"
    if isinstance(event, RunEnded):
        return f"{name}({event.run_id[-8:]} ok={event.ok} {event.error_code})"
    return name


def carrier(events: Sequence[SessionEvent], run_id: str) -> str:
    """The run that carries ``run_id``'s message: itself, or where its merges and steers led."""
    seen = {run_id}
    while True:
        into = next(
            (
                e.into_run_id
                for e in events
                if isinstance(e, QueueNotice)
                and e.run_id == run_id
                and e.outcome in (QueueOutcomeKind.MERGED, QueueOutcomeKind.STEERED)
            ),
            None,
        )
        if into is None or into in seen:
            return run_id
        seen.add(into)
        run_id = into


async def drain(stream: SessionStream, timeout_s: float) -> list[SessionEvent]:
    """Read ``stream`` until it ends (it must: it overflowed)."""
    out: list[SessionEvent] = []
    try:
        async with asyncio.timeout(timeout_s):
            async for event in stream:
                out.append(event)
    except TimeoutError:
        raise AssertionError(f"the overflowed stream did not end; read {out}") from None
    return out
