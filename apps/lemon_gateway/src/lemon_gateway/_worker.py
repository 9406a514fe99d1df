"""ThreadWorker: one per conversation key; launches that key's runs one at a time, FIFO.

A worker owns no queue semantics (the router decides collect/followup/steer/interrupt): it
only keeps accepted requests in order and launches the next when the current run has
completed. It has no task of its own: launching is starting the run's task, and advancing
happens synchronously when a run finalises, so "stop when idle" is atomic with respect to
enqueue (both are loop-only, with no await in between). An idle worker leaves the
registry at once and is recreated on the next submission for its key.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from lemon_gateway._run import Run, RunState

if TYPE_CHECKING:
    from lemon_gateway._gateway import Gateway

__all__ = ["ThreadWorker"]


class ThreadWorker:
    """The per-conversation launcher. Loop-only."""

    __slots__ = ("current", "gateway", "key", "launched", "pending")

    def __init__(self, gateway: Gateway, key: Hashable) -> None:
        self.gateway = gateway
        self.key = key
        self.pending: deque[Run] = deque()
        self.current: Run | None = None
        self.launched = 0

    def enqueue(self, run: Run) -> None:
        """Accept ``run``: launch it now if idle, else keep it in FIFO order."""
        if self.current is None and not self.pending:
            self._launch(run)
        else:
            self.pending.append(run)

    def _launch(self, run: Run) -> None:
        self.current = run
        self.launched += 1
        run.task = self.gateway._spawn(run.main(), name=f"run:{run.run_id}")

    def remove_queued(self, run: Run) -> bool:
        """Take a still-queued run out of the FIFO (for cancellation)."""
        try:
            self.pending.remove(run)
        except ValueError:
            return False
        return True

    def run_finished(self, run: Run) -> None:
        """Called once per run when it has completed: launch the next, or exit when idle."""
        if self.current is run:
            self.current = None
            while self.pending and not self.gateway._stopping:
                nxt = self.pending.popleft()
                if nxt.state is RunState.QUEUED:
                    self._launch(nxt)
                    return
        if self.current is None and not self.pending:
            self.gateway._worker_idle(self)

    @property
    def size(self) -> int:
        """Runs held: the current one plus the queued ones."""
        return len(self.pending) + (self.current is not None)

    def snapshot(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "current": None if self.current is None else self.current.run_id,
            "queued": [r.run_id for r in self.pending],
            "launched": self.launched,
        }
