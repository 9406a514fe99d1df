"""Gateway test kit: observe a run's bus events, build commands, wait on state.

Waiting is by event-loop ticks on an observable condition, never by wall-clock sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from lemon_core.bus import Bus, Delivery, Subscription, run_topic
from lemon_core.errors import DeliveryClosedError
from lemon_core.events import Completion, Event, RunCompleted
from lemon_core.execution import ExecutionCommand, ResumeToken

__all__ = ["RunEvents", "command", "until"]


def command(
    run_id: str,
    *,
    session: str = "agent:test:main",
    key: tuple[str, ...] | None = None,
    prompt: str | None = None,
    resume: ResumeToken | None = None,
    model: str | None = None,
    origin: str | None = None,
    meta: dict[str, Any] | None = None,
) -> ExecutionCommand:
    """An ExecutionCommand with a router-style conversation key (``("session", session)``)."""
    return ExecutionCommand(
        run_id=run_id,
        session_key=session,
        prompt=run_id if prompt is None else prompt,
        conversation_key=("session", session) if key is None else key,
        resume=resume,
        model=model,
        origin=origin,
        meta=meta or {},
    )


async def until(predicate: Callable[[], bool], *, ticks: int = 100_000) -> None:
    """Yield to the event loop until ``predicate()`` holds; fail after ``ticks`` yields."""
    for _ in range(ticks):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"condition not reached after {ticks} event-loop ticks")


class RunEvents:
    """Records the events of watched runs from their ``run:<id>`` topics."""

    def __init__(self, bus: Bus, *, max_entries: int = 10_000) -> None:
        self._bus = bus
        self._max_entries = max_entries
        self._subs: dict[str, Subscription] = {}
        self._seen: dict[str, list[Event]] = {}

    def watch(self, *run_ids: str) -> RunEvents:
        """Subscribe to these runs' topics (do it before submitting)."""
        for run_id in run_ids:
            delivery = Delivery(max_entries=self._max_entries, bind_current_task=False)
            self._subs[run_id] = self._bus.subscribe(run_topic(run_id), delivery=delivery)
            self._seen[run_id] = []
        return self

    def events(self, run_id: str) -> list[Event]:
        """Every event of ``run_id`` published so far, in order."""
        sub = self._subs[run_id]
        seen = self._seen[run_id]
        while True:
            try:
                item = sub.delivery.get_nowait()
            except (asyncio.QueueEmpty, DeliveryClosedError):
                break
            if not isinstance(item, Event):
                raise AssertionError(f"run {run_id}: unexpected bus item {item!r} (overflow?)")
            seen.append(item)
        return list(seen)

    def types(self, run_id: str) -> list[str]:
        return [e.type for e in self.events(run_id)]

    def completions(self, run_id: str) -> list[Completion]:
        """The Completion of every run_completed of ``run_id`` (exactly one is expected)."""
        out: list[Completion] = []
        for e in self.events(run_id):
            if e.type == "run_completed":
                assert isinstance(e.payload, RunCompleted)
                out.append(e.payload.completed)
        return out

    def completed(self, run_id: str) -> Event:
        """The single run_completed event of ``run_id``; fail unless exactly one."""
        found = [e for e in self.events(run_id) if e.type == "run_completed"]
        assert len(found) == 1, f"run {run_id}: {len(found)} run_completed events: {found}"
        return found[0]

    def close(self) -> None:
        for sub in self._subs.values():
            sub.cancel()
