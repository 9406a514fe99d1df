"""HistoryWriter: run history written by group commit.

Every run that ends writes its :class:`~lemon_core.store.RunSummary` before its
``run_completed`` is published (a client that hears the run end and then lists its sessions
sees it). Written one by one, that is two store batches and an index read per run. The writer
gathers the summaries of the runs that end in the same loop turns and writes them with one
:meth:`RunStore.finalize_many` (one ``put_many`` for every run of the batch, all or nothing,
then one index read and write per session): each run still awaits its own summary's write
before it publishes, so nothing is published before it is recorded, and a process that dies
between a run's end and the batch's write loses nothing that its in-flight record does not
cover (the run is still recorded in flight until its finalisation goes on: the next gateway
on the store completes it as ``vanished``).

A batch that fails (the store raised, or gave no answer within ``store_timeout_s``) fails for
every run in it: each run is told (its wait raises), counts its own store failure and keeps
its outcome, as a run whose single write failed did. The batch is bounded by the pending
bound of the gateway (one summary per live run at most).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from lemon_core.store import RunStore, RunSummary
from lemon_gateway._bound import bounded

__all__ = ["HistoryWriter"]


class HistoryWriter:
    """Group commit of run summaries into one :class:`RunStore`. Loop-only."""

    __slots__ = ("_batch", "_run_store", "_spawn", "_timeout_s", "batches", "written")

    def __init__(
        self,
        run_store: RunStore,
        *,
        timeout_s: float,
        spawn: Callable[[Coroutine[Any, Any, None], str], asyncio.Task[None]],
    ) -> None:
        self._run_store = run_store
        self._timeout_s = timeout_s
        self._spawn = spawn
        self._batch: list[tuple[RunSummary, asyncio.Future[None]]] | None = None
        #: Batches written and summaries in them (for statistics and tests).
        self.batches = 0
        self.written = 0

    def write(self, summary: RunSummary) -> asyncio.Future[None]:
        """Queue ``summary`` for the next batch; the future resolves once the batch holding
        it is written (or raises what the batch's write raised)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        batch = self._batch
        if batch is None:
            # The first summary of a batch: the flush starts on the next loop turn, so every
            # run that ends before then joins this batch.
            batch = self._batch = []
            self._spawn(self._flush(), "run-history")
        batch.append((summary, future))
        return future

    async def _flush(self) -> None:
        batch, self._batch = self._batch or [], None
        try:
            await bounded(
                self._run_store.finalize_many([summary for summary, _ in batch]),
                self._timeout_s,
            )
        except asyncio.CancelledError:
            # The stop's forced cancel: every run of the batch is told as a run whose own
            # write was interrupted (its wait is cancelled; it counts the failure).
            for _, future in batch:
                future.cancel()
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return
        except Exception as exc:  # the store raised, or the bound passed: every run is told
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        self.batches += 1
        self.written += len(batch)
        for _, future in batch:
            if not future.done():
                future.set_result(None)
