"""Test doubles for code that drives the router: a scriptable EngineRuntime.

``FakeEngineRuntime`` implements the EngineRuntime capability (plus the optional steer and
liveness extensions) on a real Bus: each accepted command is recorded and the test decides what
the "gateway" publishes on ``run:<id>`` (started, deltas, completion, failure) or whether the
run vanishes. The manual clock (time moves only when something sleeps on it, each sleep
recorded for backoff assertions) is the test kit's ``lemon_platform_test.ManualClock``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from lemon_core.bus import Bus, run_topic
from lemon_core.events import (
    Completion,
    Delta,
    EngineAction,
    ErrorCode,
    RunCompleted,
    RunFailed,
    RunStarted,
)
from lemon_core.execution import ExecutionCommand

__all__ = ["FakeEngineRuntime"]


class FakeEngineRuntime:
    """An EngineRuntime whose runs are played by the test (see the module docstring)."""

    def __init__(
        self,
        bus: Bus,
        *,
        steer: Literal["accept", "reject", "unsupported"] = "unsupported",
        available: bool = True,
    ) -> None:
        self.bus = bus
        self.steer_mode = steer
        self.is_available = available
        self.commands: list[ExecutionCommand] = []
        self.cancelled: list[tuple[str, str]] = []
        self.steered: list[tuple[str, str]] = []
        """Accepted steers: (run id, text)."""
        self.steer_attempts: list[tuple[str, str]] = []
        self.submit_attempts = 0
        self.live: set[str] = set()
        self._seq: dict[str, int] = {}
        self._arrivals: asyncio.Queue[ExecutionCommand] = asyncio.Queue()
        self.complete_on_cancel = True
        self.refuse_next: list[Exception] = []

    # -- EngineRuntime ------------------------------------------------------------------------

    def submit_execution(self, command: ExecutionCommand) -> None:
        self.submit_attempts += 1
        if self.refuse_next:
            raise self.refuse_next.pop(0)
        self.commands.append(command)
        self.live.add(command.run_id)
        self._arrivals.put_nowait(command)

    def cancel(self, run_id: str, reason: str = "user_requested") -> bool:
        self.cancelled.append((run_id, reason))
        if run_id not in self.live:
            return False
        if self.complete_on_cancel and self.bus.running():  # cancel never raises (the contract)
            self.complete(run_id, ok=False, answer="", error=f"cancelled: {reason}")
        return True

    def available(self) -> bool:
        return self.is_available

    # -- optional extensions -----------------------------------------------------------------

    def is_live(self, run_id: str) -> bool:
        return run_id in self.live

    def steer(self, run_id: str, text: str) -> bool:
        self.steer_attempts.append((run_id, text))
        accepted = self.steer_mode == "accept" and run_id in self.live
        if accepted:
            self.steered.append((run_id, text))
        return accepted

    # -- what the test plays -----------------------------------------------------------------

    async def next_command(self) -> ExecutionCommand:
        """The next accepted command, in submission order."""
        return await self._arrivals.get()

    def pending_commands(self) -> int:
        return self._arrivals.qsize()

    def _meta(self, command_run_id: str) -> dict[str, Any]:
        session = next(
            (c.session_key for c in reversed(self.commands) if c.run_id == command_run_id), None
        )
        return {"run_id": command_run_id, "session_key": session}

    def started(self, run_id: str) -> None:
        meta = self._meta(run_id)
        payload = RunStarted.new(run_id=run_id, session_key=meta["session_key"])
        self.bus.broadcast_event(run_topic(run_id), "run_started", payload, meta)

    def action(self, run_id: str, action_id: str, *, kind: str = "tool", title: str = "t") -> None:
        """An ``engine_action`` (phase started) of the run: a tool call began."""
        payload = EngineAction.new(
            action={"id": action_id, "kind": kind, "title": title},
            phase="started",
        )
        self.bus.broadcast_event(run_topic(run_id), "engine_action", payload, self._meta(run_id))

    def delta(self, run_id: str, text: str) -> None:
        seq = self._seq.get(run_id, 0) + 1
        self._seq[run_id] = seq
        payload = Delta.new(run_id=run_id, seq=seq, text=text)
        self.bus.broadcast_event(run_topic(run_id), "delta", payload, self._meta(run_id))

    def complete(
        self,
        run_id: str,
        *,
        ok: bool = True,
        answer: str = "done",
        error: str | None = None,
        error_code: ErrorCode | None = None,
        resume: str | None = None,
    ) -> None:
        self.live.discard(run_id)
        meta = self._meta(run_id)
        completion = Completion.new(
            ok=ok,
            answer=answer,
            error=error,
            error_code=error_code,
            run_id=run_id,
            session_key=meta["session_key"],
            resume=None if resume is None else {"engine": "lemon", "value": resume},
        )
        payload = RunCompleted.new(completed=completion)
        self.bus.broadcast_event(run_topic(run_id), "run_completed", payload, meta)

    def fail(self, run_id: str, reason: str) -> None:
        """``run_failed`` without a completion (the run's owner died)."""
        self.live.discard(run_id)
        meta = self._meta(run_id)
        payload = RunFailed.new(run_id=run_id, session_key=meta["session_key"], reason=reason)
        self.bus.broadcast_event(run_topic(run_id), "run_failed", payload, meta)

    def vanish(self, run_id: str) -> None:
        """Forget the run without publishing anything (a killed gateway run)."""
        self.live.discard(run_id)

    async def play(self, answer: str = "done", *, resume: str | None = None) -> ExecutionCommand:
        """Take the next command and run it to a successful completion."""
        command = await self.next_command()
        self.started(command.run_id)
        self.delta(command.run_id, answer)
        self.complete(command.run_id, answer=answer, resume=resume)
        return command
