"""Jobs in a real SQLite store: every bad input is refused with the field named and nothing
stored; update refuses unknown and immutable fields; an undecodable row is quarantined and the
other jobs still load; jitter is deterministic and within its bound."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lemon_automation.jobs import JOBS_TABLE, Job, JobError, JobStore, jitter_ms
from lemon_core.store import Store
from lemon_infra import SQLiteStore

NOW = 1_767_225_600_000


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with await SQLiteStore.open(tmp_path / "lemon.sqlite3") as s:
        yield s


def _job(**over: object) -> Job:
    fields: dict[str, object] = {
        "id": "j1",
        "name": "daily",
        "kind": "cron",
        "expr": "0 9 * * *",
        "timezone": "Europe/London",
        "prompt": "summarise",
    }
    fields.update(over)
    return Job(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"expr": "61 * * * *"}, "cron"),
        ({"timezone": "Mars/Base"}, "timezone"),
        ({"kind": "every", "expr": "500ms"}, "every"),
        ({"kind": "at", "expr": "2020-01-01T00:00:00+00:00"}, "at"),
        ({"kind": "every", "expr": "10s", "jitter_ms": 10_000}, "jitter"),
        ({"prompt": "  "}, "prompt"),
        ({"prompt": "x" * (32 * 1024 + 1)}, "prompt"),
        ({"session_key": "agent:"}, "session_key"),
    ],
)
async def test_bad_jobs_are_refused_and_nothing_is_stored(
    store: Store, over: dict[str, object], field: str
) -> None:
    with pytest.raises(JobError) as info:
        await JobStore(store).add(_job(**over), now_ms=NOW)
    assert info.value.field == field
    assert await store.scan(JOBS_TABLE) == []


async def test_duplicate_names_and_the_per_agent_limit(store: Store) -> None:
    jobs = JobStore(store, max_jobs_per_agent=2)
    await jobs.add(_job(), now_ms=NOW)
    with pytest.raises(JobError, match="exists for agent"):
        await jobs.add(_job(id="j2"), now_ms=NOW)
    await jobs.add(_job(id="j2", name="other"), now_ms=NOW)
    with pytest.raises(JobError, match="max_jobs_per_agent"):
        await jobs.add(_job(id="j3", name="third"), now_ms=NOW)
    await jobs.add(_job(id="j4", name="daily", agent_id="coder"), now_ms=NOW)


async def test_update_refuses_unknown_and_immutable_fields(store: Store) -> None:
    jobs = JobStore(store)
    await jobs.add(_job(), now_ms=NOW)
    with pytest.raises(JobError, match="immutable"):
        await jobs.update("j1", {"agent_id": "x"}, now_ms=NOW)
    with pytest.raises(JobError, match="unknown field"):
        await jobs.update("j1", {"colour": "red"}, now_ms=NOW)
    updated = await jobs.update("j1", {"enabled": False, "prompt": "new"}, now_ms=NOW)
    assert (updated.enabled, updated.prompt) == (False, "new")
    assert await jobs.get("j1") == updated


async def test_an_undecodable_row_is_quarantined(store: Store) -> None:
    jobs = JobStore(store)
    await jobs.add(_job(), now_ms=NOW)
    await store.put(JOBS_TABLE, "broken", {"id": "broken", "kind": "weekly"})
    loaded, bad = await jobs.load()
    assert [j.id for j in loaded] == ["j1"]
    assert [k for k, _ in bad] == ["broken"]


async def test_the_watermark_never_moves_back(store: Store) -> None:
    jobs = JobStore(store)
    job = await jobs.add(_job(), now_ms=NOW)
    await jobs.advance(job, 2_000)
    await jobs.advance(job, 1_000)
    stored = await jobs.get("j1")
    assert stored is not None
    assert stored.last_due_at_ms == 2_000


def test_jitter_is_deterministic_and_bounded() -> None:
    job = _job(jitter_ms=5_000)
    values = [jitter_ms(job, NOW + k * 60_000) for k in range(200)]
    assert values == [jitter_ms(job, NOW + k * 60_000) for k in range(200)]
    assert all(0 <= v <= 5_000 for v in values)
    assert len(set(values)) > 50
    assert jitter_ms(_job(), NOW) == 0


async def test_an_unchanged_revision_answers_the_last_load_and_any_write_is_seen(
    store: Store,
) -> None:
    scans = 0
    counting = False
    original = store.scan

    async def counted(table: str, **kw: object) -> list[tuple[str, object]]:
        nonlocal scans
        scans += counting and table == JOBS_TABLE
        return await original(table, **kw)  # type: ignore[arg-type]

    store.scan = counted  # type: ignore[method-assign]
    here, other = JobStore(store), JobStore(store)  # two daemons on one store

    async def load_here() -> list[Job]:
        nonlocal counting
        counting = True
        try:
            return (await here.load())[0]
        finally:
            counting = False

    await here.add(_job(), now_ms=NOW)
    assert [j.id for j in await load_here()] == ["j1"]
    assert [j.id for j in await load_here()] == ["j1"]
    assert scans == 1  # the second load read only the revision
    for change in (
        other.add(_job(id="j2", name="two"), now_ms=NOW),
        other.update("j1", {"prompt": "changed"}, now_ms=NOW),
        other.advance(_job(), NOW + 10),
        other.remove("j2"),
    ):
        before = scans
        await change
        loaded = {j.id: j for j in await load_here()}
        assert scans == before + 1  # the other daemon's write moved the revision
    assert set(loaded) == {"j1"}
    assert loaded["j1"].prompt == "changed"
    assert loaded["j1"].last_due_at_ms == NOW + 10
