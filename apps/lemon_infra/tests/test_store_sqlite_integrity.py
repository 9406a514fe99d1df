"""A damaged SQLite store is refused when it is opened, with the file and what to do; never
opened as if it were fine (every later call would fail with "database disk image is
malformed") and never replaced by an empty one. Real files: a populated store with 8 KB of
random bytes written into its middle, one truncated to zero bytes, one that is not a database."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from lemon_core.store import RunStore, RunSummary, StoreCorruptError, StoreError
from lemon_infra import SQLiteStore, check_store_file


async def populated(path: Path, runs: int = 400) -> Path:
    """A real store with ``runs`` finished runs (a few hundred KB), closed (checkpointed)."""
    async with await SQLiteStore.open(path) as store:
        history = RunStore(store)
        for i in range(runs):
            await history.finalize(
                RunSummary(
                    run_id=f"run-{i:04d}",
                    session_key="agent:default:main",
                    ok=True,
                    answer=f"answer {i} " + "x" * 300,
                    finished_at_ms=1_000 + i,
                )
            )
    return path


def scribble_middle(path: Path, size: int = 8192) -> None:
    """Write ``size`` random bytes (fixed seed) over the middle of ``path``."""
    total = path.stat().st_size
    assert total > 4 * size, total
    with path.open("r+b") as handle:
        handle.seek(total // 2)
        handle.write(random.Random(24).randbytes(size))


async def test_a_store_with_random_bytes_in_the_middle_is_refused_naming_the_file(
    tmp_path: Path,
) -> None:
    path = await populated(tmp_path / "lemon.sqlite3")
    scribble_middle(path)
    before = path.read_bytes()
    with pytest.raises(StoreCorruptError) as caught:
        await SQLiteStore.open(path)
    message = str(caught.value)
    assert str(path) in message
    assert "damaged" in message
    assert "lemon store restore" in message  # what to do
    assert "move" in message
    assert isinstance(caught.value, StoreError)
    assert caught.value.path == path
    assert path.read_bytes() == before  # nothing was changed, nothing replaced


async def test_a_zero_length_store_file_is_refused_not_started_empty(tmp_path: Path) -> None:
    path = await populated(tmp_path / "lemon.sqlite3", runs=3)
    path.write_bytes(b"")
    with pytest.raises(StoreCorruptError, match="0 bytes") as caught:
        await SQLiteStore.open(path)
    assert "lemon store restore" in str(caught.value)
    assert path.stat().st_size == 0  # left as found


async def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "lemon.sqlite3"
    path.write_bytes(b"this is not a database, " * 200)
    with pytest.raises(StoreCorruptError, match=r"not a database|damaged"):
        await SQLiteStore.open(path)


async def test_a_brand_new_store_and_a_healthy_one_open(tmp_path: Path) -> None:
    path = tmp_path / "new" / "lemon.sqlite3"
    async with await SQLiteStore.open(path) as store:
        await store.put("t", "k", 1)
    assert path.stat().st_size > 0
    await populated(tmp_path / "healthy.sqlite3", runs=50)
    async with await SQLiteStore.open(tmp_path / "healthy.sqlite3") as store:
        assert await RunStore(store).get("run-0049") is not None


async def test_check_store_file_reports_each_kind_of_damage(tmp_path: Path) -> None:
    healthy = await populated(tmp_path / "healthy.sqlite3", runs=50)
    assert check_store_file(healthy) is None
    assert check_store_file(tmp_path / "missing.sqlite3") is not None
    damaged = await populated(tmp_path / "damaged.sqlite3")
    scribble_middle(damaged)
    problem = check_store_file(damaged)
    assert problem is not None
    assert "quick_check" in problem
    empty = tmp_path / "empty.sqlite3"
    empty.write_bytes(b"")
    assert "0 bytes" in (check_store_file(empty) or "")
    other = tmp_path / "other.sqlite3"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    assert "not a Lemon store" in (check_store_file(other) or "")
