"""RunStore.recent: every session's finished runs newest first, read by UTC day when a
``since_ms`` bounds it; SessionSettingsStore; forgetting a session's runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the fixture's class, from this folder's conftest
    from lemon_core.clock import ManualClock

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from lemon_core.store import (
    RunStore,
    RunSummary,
    SessionIndexStore,
    SessionSettingsStore,
    system_clock_ms,
)
from lemon_infra import MemoryStore, SQLiteStore

DAY = 86_400_000


def _run(run_id: str, finished: int, session: str = "agent:a:main") -> RunSummary:
    return RunSummary(
        run_id=run_id, session_key=session, ok=True, started_at_ms=finished, finished_at_ms=finished
    )


async def test_recent_is_newest_first_across_days_and_since_reads_only_those_days(
    tmp_path: Path,
) -> None:
    store = await SQLiteStore.open(tmp_path / "s.sqlite3")
    try:
        runs = RunStore(store)
        now = system_clock_ms()
        ages = {"r0": 0, "r1": DAY // 2, "r2": DAY + 5, "r3": 3 * DAY, "r4": 500 * DAY}
        for run_id, age in ages.items():
            await runs.finalize(_run(run_id, now - age, session=f"agent:a:main:sub:{run_id}"))
        everything = await runs.recent(limit=10)
        assert [r.run_id for r in everything] == ["r0", "r1", "r2", "r3", "r4"]
        assert [r.run_id for r in await runs.recent(limit=2)] == ["r0", "r1"]
        two_days = await runs.recent(limit=10, since_ms=now - 2 * DAY)
        assert [r.run_id for r in two_days] == ["r0", "r1", "r2"]
        assert [r.run_id for r in await runs.recent(limit=1, since_ms=now - 2 * DAY)] == ["r0"]
        far = await runs.recent(limit=10, since_ms=now - 1000 * DAY)
        assert [r.run_id for r in far] == ["r0", "r1", "r2", "r3", "r4"]
        assert await runs.forget_session("agent:a:main:sub:r1") == 1
        assert [r.run_id for r in await runs.recent(limit=10)] == ["r0", "r2", "r3", "r4"]
        assert await runs.get("r1") is None
    finally:
        await store.close()


@settings(max_examples=40, deadline=None)
@given(ages=st.lists(st.integers(min_value=0, max_value=40 * DAY), min_size=1, max_size=25))
async def test_recent_with_since_is_the_full_list_filtered(ages: list[int]) -> None:
    store = MemoryStore()
    runs = RunStore(store)
    now = system_clock_ms()
    for n, age in enumerate(ages):
        await runs.finalize(_run(f"r{n:03d}", now - age))
    full = await runs.recent(limit=1000)
    assert [r.finished_at_ms for r in full] == sorted(
        (r.finished_at_ms for r in full), reverse=True
    )
    for since_days in (0, 1, 7, 45):
        since = now - since_days * DAY
        expected = [r.run_id for r in full if r.finished_at_ms >= since]
        assert [r.run_id for r in await runs.recent(limit=1000, since_ms=since)] == expected


async def test_session_settings_set_keep_and_clear(clock: ManualClock) -> None:
    clock.now = 42
    store = MemoryStore()
    settings_store = SessionSettingsStore(store, clock=clock)
    assert await settings_store.get("k") is None
    first = await settings_store.update("k", model="p:m")
    assert (first.model, first.label, first.updated_at_ms) == ("p:m", None, 42)
    both = await settings_store.update("k", label="work")
    assert (both.model, both.label) == ("p:m", "work")
    await settings_store.update("k", model=None, label=None)
    assert await settings_store.get("k") is None  # nothing set: nothing kept


async def test_the_session_index_forgets_a_conversation_and_a_session() -> None:
    store = MemoryStore()
    runs = RunStore(store)
    summary = RunSummary(
        run_id="r", session_key="k", ok=True, finished_at_ms=5, resume=None, answer="a"
    )
    await runs.finalize(summary)
    index = SessionIndexStore(store)
    assert not await index.forget_conversation("k")  # no native id to forget
    assert await index.delete("k")
    assert await index.get("k") is None
    assert await index.recent() == []
    assert not await index.delete("k")


async def test_a_retry_attempt_is_the_same_run_in_the_session_index() -> None:
    store = MemoryStore()
    runs = RunStore(store)
    await runs.finalize(_run("run_1", 1000))
    retried = _run("run_1b", 2000)
    await runs.finalize(RunSummary.from_dict({**retried.to_dict(), "retry_of": "run_1"}))
    entry = await SessionIndexStore(store).get("agent:a:main")
    assert entry is not None
    assert entry.runs == 1  # the failed attempt and its retry are one run
    assert entry.updated_at_ms == 2000
    await runs.finalize(_run("run_2", 3000))
    entry = await SessionIndexStore(store).get("agent:a:main")
    assert entry is not None
    assert entry.runs == 2


class _CountingStore(MemoryStore):
    """A memory store counting the reads (gets and scans) made through it."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def get(self, table: str, key: str) -> Any:
        self.reads += 1
        return await super().get(table, key)

    async def scan(self, table: str, **kwargs: Any) -> list[tuple[str, Any]]:
        self.reads += 1
        return await super().scan(table, **kwargs)


async def test_listing_sessions_is_one_read_with_their_settings() -> None:
    store = _CountingStore()
    runs, settings = RunStore(store), SessionSettingsStore(store)
    await settings.update("agent:a:s00", model="p:before-first-run")
    for n in range(20):
        await runs.finalize(_run(f"r{n}", 1000 + n, session=f"agent:a:s{n:02d}"))
    await settings.update("agent:a:s03", label="work")
    await settings.update("agent:a:s04", model="p:m", label="x")
    await settings.update("agent:a:s04", label=None)
    await runs.finalize(_run("r-again", 5000, session="agent:a:s03"))
    store.reads = 0
    listed = await SessionIndexStore(store).recent(limit=50)
    assert store.reads == 1
    assert [e.session_key for e in listed[:2]] == ["agent:a:s03", "agent:a:s19"]
    by_key = {e.session_key: e for e in listed}
    assert len(by_key) == 20
    assert (by_key["agent:a:s00"].model, by_key["agent:a:s00"].label) == (
        "p:before-first-run",
        None,
    )
    assert (by_key["agent:a:s03"].label, by_key["agent:a:s03"].runs) == ("work", 2)
    assert (by_key["agent:a:s04"].model, by_key["agent:a:s04"].label) == ("p:m", None)
    await settings.delete("agent:a:s04")
    again = {e.session_key: e for e in await SessionIndexStore(store).recent(limit=50)}
    assert again["agent:a:s04"].model is None


async def test_an_older_recency_row_holding_only_the_key_still_lists() -> None:
    store = MemoryStore()
    await RunStore(store).finalize(_run("r", 10, session="agent:a:old"))
    rows = await store.scan(SessionIndexStore.RECENT, limit=10)
    assert len(rows) == 1
    await store.put(SessionIndexStore.RECENT, rows[0][0], "agent:a:old")  # the old shape
    listed = await SessionIndexStore(store).recent()
    assert [e.session_key for e in listed] == ["agent:a:old"]
