"""Run-summary ingest: finished runs become ``run_summary`` documents.

The seam is the run store's history (``RunStore.recent``, written by ``RunStore.finalize``
when a run finishes): the ingester reads the runs finished since its cursor, never the
router's or the gateway's internals. Each becomes a document in the run's session scope (and
its project scope when the run's ``meta`` names a ``cwd``), its answer capped at 2,000 bytes,
secrets redacted span by span (``[REDACTED:kind]``), kept ``run_summary_days``. Cron and
heartbeat runs are left out. Flagged text (invisible characters, injection phrases) is not
ingested and is counted.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Final

from lemon_core.store import RunStore, RunSummary
from lemon_memory.documents import MemoryContext
from lemon_memory.errors import MemoryStoreError
from lemon_memory.store import MemoryStore, prepare

__all__ = ["RunIngester"]

_CAP_BYTES: Final = 2000
_SEEN: Final = 4096
_EXCLUDED_ORIGINS: Final = frozenset({"cron", "heartbeat", "automation"})


def _cap(text: str) -> str:
    data = text.encode()
    if len(data) <= _CAP_BYTES:
        return text
    return data[:_CAP_BYTES].decode(errors="ignore") + " [...]"


def _agent_of(session_key: str) -> str:
    parts = session_key.split(":")
    return parts[1] if len(parts) >= 2 and parts[0] == "agent" and parts[1] else "default"


class RunIngester:
    """Reads finished runs from the run store and writes their summaries (loop-only)."""

    def __init__(
        self,
        memory: MemoryStore,
        runs: RunStore,
        *,
        days: int = 30,
        known_secrets: Callable[[], Iterable[str]] = tuple,
        clock: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self._memory = memory
        self._runs = runs
        self._ttl_ms = days * 24 * 3600 * 1000
        self._known = known_secrets
        self._clock = clock
        self._cursor = clock()
        self._seen: OrderedDict[str, None] = OrderedDict()
        self.ingested = 0
        self.skipped = 0

    async def poll_once(self) -> int:
        """Ingest the runs finished since the last poll; how many documents were written."""
        found = await self._runs.recent(limit=200, since_ms=self._cursor)
        written = 0
        for summary in reversed(found):
            if summary.run_id in self._seen:
                continue
            self._seen[summary.run_id] = None
            if len(self._seen) > _SEEN:
                self._seen.popitem(last=False)
            self._cursor = max(self._cursor, summary.finished_at_ms)
            written += await self._ingest(summary)
        return written

    async def _ingest(self, s: RunSummary) -> int:
        origin = str(s.meta.get("origin", ""))
        if origin in _EXCLUDED_ORIGINS or ":cron:" in s.session_key or not s.answer.strip():
            self.skipped += 1
            return 0
        cwd = s.meta.get("cwd")
        ctx = MemoryContext.for_run(
            agent_id=_agent_of(s.session_key),
            session_key=s.session_key,
            cwd=cwd if isinstance(cwd, str) and cwd else None,
        )
        model = s.usage.model if s.usage is not None else None
        body = f"outcome: {'ok' if s.ok else 'failed'}; model: {model or 'unknown'}\n"
        body += "answer: " + _cap(s.answer)
        written = 0
        for scope in ("session", "project"):
            if scope not in ctx.scope_keys():
                continue
            try:
                write = prepare(
                    ctx,
                    text=body,
                    title=f"run {s.run_id}",
                    now_ms=self._clock(),
                    kind="run_summary",
                    scope=scope,
                    ttl_ms=self._ttl_ms,
                    source="ingest",
                    known_secrets=self._known(),
                )
                await self._memory.put(write)
            except MemoryStoreError:  # flagged text, a full scope, a failed write: counted
                self.skipped += 1
                continue
            written += 1
        self.ingested += written
        return written
