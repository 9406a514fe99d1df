"""The batch the gateway's group commit writes (``RunStore.finalize_many``) leaves the store
exactly as ``RunStore.finalize`` of each summary in order would: run rows, history, recent
runs, the session index (counts, retries folded, settings mirrored) and its recency table."""

from __future__ import annotations

from typing import Any

from lemon_core.events import ErrorCode
from lemon_core.execution import ResumeToken
from lemon_core.store import RunStore, RunSummary, SessionSettingsStore
from lemon_infra import MemoryStore

_TABLES = ("runs", "run_history", "run_recent", "session_index", "session_recent")


def _summaries() -> list[RunSummary]:
    def run(run_id: str, session: str, at: int, **fields: Any) -> RunSummary:
        return RunSummary(
            run_id=run_id,
            session_key=session,
            ok=fields.pop("ok", True),
            answer=f"answer of {run_id}",
            started_at_ms=at - 5,
            finished_at_ms=at,
            duration_ms=5,
            **fields,
        )

    return [
        run("a1", "agent:x:a", 1_000, resume=ResumeToken.native("na")),
        run("b1", "agent:x:b", 1_001),
        run("a2", "agent:x:a", 1_002, ok=False, error_code=ErrorCode.EXECUTOR_FAILED),
        run("a3", "agent:x:a", 1_003, retry_of="a2"),  # the same run again: not counted
        run("b2", "agent:x:b", 999),  # finished earlier than the entry: recency kept
        run("c1", "agent:x:c", 1_004),
    ]


async def _contents(store: MemoryStore) -> dict[str, list[tuple[str, Any]]]:
    return {table: await store.scan(table, limit=1000) for table in _TABLES}


async def _seeded() -> MemoryStore:
    store = MemoryStore()
    # An entry from before the batch, and a session with its own settings.
    await RunStore(store).finalize(RunSummary(run_id="b0", session_key="agent:x:b", ok=True))
    await SessionSettingsStore(store).update("agent:x:c", model="m:1", label="C")
    return store


async def test_gateway_history_fold_batch_equals_one_by_one() -> None:
    one_by_one, batched = await _seeded(), await _seeded()
    for summary in _summaries():
        await RunStore(one_by_one).finalize(summary)
    await RunStore(batched).finalize_many(_summaries())
    assert await _contents(batched) == await _contents(one_by_one)
    index = dict(await batched.scan("session_index"))
    assert index["agent:x:a"]["runs"] == 2  # a3 retried a2
    assert index["agent:x:b"]["runs"] == 3
    assert (index["agent:x:c"]["model"], index["agent:x:c"]["label"]) == ("m:1", "C")


async def test_gateway_history_fold_empty_batch_writes_nothing() -> None:
    store = MemoryStore()
    await RunStore(store).finalize_many([])
    assert store.statistics()["entries"] == 0
