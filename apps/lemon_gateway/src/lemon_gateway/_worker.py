"""ThreadWorker: one per conversation key; runs that key's runs one at a time, FIFO.

A worker owns no queue semantics (the router decides collect/followup/steer/interrupt): it
only keeps accepted requests in order and runs the next when the current run has
completed. It runs them inside one task of its own (started on the first enqueue, named
after the current run): a no-op run therefore costs no task of its own, which was the
largest single per-run cost. The task ends as soon as the FIFO is empty, and "stop when
idle" is atomic with respect to enqueue (both are loop-only, with no await in between). An
idle worker leaves the registry at once and is recreated on the next submission for its
key.

Cancelling by exact run id stays exact although the task is shared: a run's cancellation
is delivered to the task only while that run is the worker's current run and suspended
inside it (see :meth:`Run.cancel`); the run turns every cancellation of the task into its
own completion and clears it, so the next run never sees it.
"""

from __future__ import annotations

import asyncio
import logging
import types
from collections import deque
from collections.abc import Coroutine, Generator, Hashable
from typing import Any, Protocol

from lemon_gateway._run import _QUEUED, Run

__all__ = ["ThreadWorker", "WorkerOwner"]

log = logging.getLogger("lemon_gateway.worker")

#: Runs served back to back before the worker yields one loop turn to other conversations.
_TURN = 16


@types.coroutine
def _yield() -> Generator[None, None, None]:
    """One event-loop turn (``asyncio.sleep(0)`` without its wrapper coroutine)."""
    yield


class WorkerOwner(Protocol):
    """What a worker may use of its gateway (a narrow port, like the runs' ``RunOwner``): the
    gateway gives its workers the same services object it gives its runs."""

    @property
    def stopping(self) -> bool:
        """Whether the gateway is stopping (a worker then starts no further run)."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
        """Start a task the gateway owns (awaited or cancelled by its stop)."""
        ...

    def worker_idle(self, worker: ThreadWorker) -> None:
        """``worker`` holds no run: the gateway forgets it (a later submission for its key
        creates a new one)."""
        ...


class ThreadWorker:
    """The per-conversation runner. Loop-only."""

    __slots__ = ("current", "gateway", "key", "launched", "pending", "task")

    def __init__(self, gateway: WorkerOwner, key: Hashable) -> None:
        self.gateway = gateway
        self.key = key
        self.pending: deque[Run] = deque()
        self.current: Run | None = None
        self.launched = 0
        self.task: asyncio.Task[None] | None = None

    def enqueue(self, run: Run) -> None:
        """Accept ``run``: keep it in FIFO order and start the worker's task if idle."""
        self.pending.append(run)
        if self.task is None:
            self.task = self.gateway.spawn(self._serve(), name=f"run:{run.run_id}")

    async def _serve(self) -> None:
        task = self.task
        assert task is not None
        gw = self.gateway
        pending = self.pending
        served = 0
        try:
            while pending and not gw.stopping:
                run = pending.popleft()
                if run.state is not _QUEUED or run.task is not None:
                    continue
                self.current = run
                self.launched += 1
                run.task = task
                task.set_name(f"run:{run.run_id}")
                try:
                    await run.main()
                except Exception:  # Run.main never raises; a bug must not stop the FIFO
                    log.exception("run %s escaped its completion handling", run.run_id)
                self.current = None
                # A cancellation that reached the task after its run had completed (during
                # the history write) belongs to that run: clear it before the next run.
                while task.cancelling():
                    task.uncancel()
                served += 1
                if pending and served % _TURN == 0:
                    # Let other conversations' runs take their turn: runs whose executor
                    # never suspends would otherwise drain this whole FIFO in one step.
                    try:
                        await _yield()
                    except asyncio.CancelledError:
                        # Aimed at no run (none is current): stop only on shutdown.
                        while task.cancelling():
                            task.uncancel()
                        if self.gateway.stopping:  # (re-read: the await may change it)
                            break
        finally:
            self.current = None
            self.task = None
            if not pending:
                gw.worker_idle(self)

    def remove_queued(self, run: Run) -> bool:
        """Take a still-queued run out of the FIFO (for cancellation)."""
        try:
            self.pending.remove(run)
        except ValueError:
            return False
        return True

    def run_finished(self, run: Run) -> None:
        """Called once per run when it has completed: leave the registry when idle."""
        if self.current is None and self.task is None and not self.pending:
            self.gateway.worker_idle(self)

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
