"""``lemon store backup|restore|check`` through real ``lemon`` subprocesses on real files: a
backup taken while a writer commits is one consistent snapshot; a backup taken while the daemon
runs, restored once it stopped, brings back exactly what the store held then; a restore refuses
while the daemon runs, refuses a damaged or foreign backup without changing anything, and keeps
the replaced store aside; bad paths are clear errors (exit 2); a PostgreSQL store is pointed at
pg_dump."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import threading
from pathlib import Path

import pytest

from lemon_control_plane.local_token import read_local_token
from lemon_control_plane.testing import wire_client
from lemon_core.store import RunStore, RunSummary
from lemon_infra import SQLiteStore, check_store_file
from lemon_platform_test.lemon_process import lemon_env, run_lemon, start_serve, stop_serve

SESSION = "agent:default:main"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return lemon_env(tmp_path, NO_COLOR="1", COLUMNS="400")


def store_of(env: dict[str, str]) -> Path:
    return Path(env["LEMON_HOME"]) / "store" / "lemon.sqlite3"


async def put_runs(path: Path, names: list[str]) -> None:
    async with await SQLiteStore.open(path) as store:
        for i, name in enumerate(names):
            await RunStore(store).finalize(
                RunSummary(run_id=name, session_key=SESSION, ok=True, finished_at_ms=1_000 + i)
            )


async def run_ids(path: Path) -> set[str]:
    async with await SQLiteStore.open(path) as store:
        return {key for key, _ in await store.scan(RunStore.RUNS, limit=10_000)}


def one_line(proc: object) -> str:
    out = getattr(proc, "stdout", "") + getattr(proc, "stderr", "")
    return " ".join(out.split())


class Writer(threading.Thread):
    """Commits rows ``w/000000``, ``w/000001``, ... one transaction each, until stopped;
    ``written`` is set once ``at_least`` rows are committed."""

    def __init__(self, path: Path, at_least: int) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.at_least = at_least
        self.count = 0
        self.written = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        try:
            while not self.stop.is_set():
                conn.execute(
                    "INSERT INTO lemon_kv (tbl, key, value, updated_at_ms) VALUES (?, ?, ?, 0)",
                    ("w", f"{self.count:06d}", b'"' + b"v" * 500 + b'"'),
                )
                self.count += 1
                if self.count >= self.at_least:
                    self.written.set()
        finally:
            conn.close()


async def test_a_backup_taken_while_a_writer_commits_is_one_consistent_snapshot(
    env: dict[str, str], tmp_path: Path
) -> None:
    store = store_of(env)
    await put_runs(store, [f"run-{i}" for i in range(50)])
    writer = Writer(store, at_least=200)
    writer.start()
    try:
        assert await asyncio.to_thread(writer.written.wait, 60)
        proc = await asyncio.to_thread(run_lemon, env, "store", "backup", str(tmp_path / "b"))
        written_after = writer.count
    finally:
        writer.stop.set()
        await asyncio.to_thread(writer.join, 60)
    assert proc.returncode == 0, one_line(proc)
    backup = tmp_path / "b"
    assert f"to {backup}" in proc.stdout
    assert check_store_file(backup) is None
    conn = sqlite3.connect(backup)
    try:
        keys = [k for (k,) in conn.execute("SELECT key FROM lemon_kv WHERE tbl='w' ORDER BY key")]
    finally:
        conn.close()
    # every committed row up to the snapshot, none missing in between: one snapshot
    assert 200 <= len(keys) <= written_after
    assert keys == [f"{i:06d}" for i in range(len(keys))]
    assert await run_ids(backup) == {f"run-{i}" for i in range(50)}


async def test_backup_while_the_daemon_runs_restore_after_it_stopped(
    env: dict[str, str], tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    backup = tmp_path / "before.sqlite3"
    proc, url = start_serve(env, work)
    try:
        ws = url.replace("http://", "ws://") + "/ws"
        token = read_local_token(Path(env["LEMON_HOME"]))
        async with wire_client(ws, token=token)() as client:
            first = await client.call("chat.send", {"sessionKey": SESSION, "prompt": "/echo one"})
            await client.completed(first["runId"])
            done = await asyncio.to_thread(run_lemon, env, "store", "backup", str(backup))
            assert done.returncode == 0, one_line(done)
            later = await client.call("chat.send", {"sessionKey": SESSION, "prompt": "/echo two"})
            await client.completed(later["runId"])
        refused = await asyncio.to_thread(run_lemon, env, "store", "restore", str(backup))
        assert refused.returncode == 2, one_line(refused)
        assert "is running" in one_line(refused)
        assert "lemon daemon stop" in one_line(refused)
    finally:
        stop_serve(proc, graceful=True)
    store = store_of(env)
    assert await run_ids(store) == {first["runId"], later["runId"]}  # the refusal changed nothing
    restored = await asyncio.to_thread(run_lemon, env, "store", "restore", str(backup))
    assert restored.returncode == 0, one_line(restored)
    assert await run_ids(store) == {first["runId"]}
    [aside] = store.parent.glob("lemon.sqlite3.before-restore-*[0-9Z]")
    assert f"kept as {aside}" in one_line(restored)
    assert await run_ids(aside) == {first["runId"], later["runId"]}  # kept whole


def scribble(path: Path) -> None:
    total = path.stat().st_size
    with path.open("r+b") as handle:
        handle.seek(total // 2)
        handle.write(random.Random(24).randbytes(8192))


async def test_restore_checks_the_backup_first_and_mends_a_damaged_store(
    env: dict[str, str], tmp_path: Path
) -> None:
    store = store_of(env)
    await put_runs(store, [f"run-{i:04d}" for i in range(400)])
    good = tmp_path / "good.sqlite3"
    assert run_lemon(env, "store", "backup", str(good)).returncode == 0
    damaged_backup = tmp_path / "damaged.sqlite3"
    damaged_backup.write_bytes(good.read_bytes())
    scribble(damaged_backup)
    foreign = tmp_path / "foreign.sqlite3"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE notes (x)")
    conn.close()
    before = store.read_bytes()
    for bad, why in (
        (damaged_backup, "quick_check"),
        (foreign, "not a Lemon store"),
        (tmp_path / "missing.sqlite3", "does not exist"),
        (store, "the store itself"),
    ):
        proc = run_lemon(env, "store", "restore", str(bad))
        assert proc.returncode == 2, one_line(proc)
        assert why in one_line(proc)
        assert "Traceback" not in one_line(proc)
    assert store.read_bytes() == before
    assert not list(store.parent.glob("*before-restore*"))
    # The store is damaged now: check says so, backup refuses to copy it, restore mends it.
    scribble(store)
    checked = run_lemon(env, "store", "check")
    assert checked.returncode == 2
    assert "lemon store restore" in one_line(checked)
    refused = run_lemon(env, "store", "backup", str(tmp_path / "of-damaged.sqlite3"))
    assert refused.returncode == 2
    assert "damaged" in one_line(refused)
    assert not (tmp_path / "of-damaged.sqlite3").exists()
    mended = run_lemon(env, "store", "restore", str(good))
    assert mended.returncode == 0, one_line(mended)
    assert run_lemon(env, "store", "check").returncode == 0
    assert len(await run_ids(store)) == 400
    [aside] = store.parent.glob("lemon.sqlite3.before-restore-*[0-9Z]")
    assert check_store_file(aside) is not None  # the damaged file, kept as it was


async def test_backup_refuses_bad_paths_and_fills_a_directory(
    env: dict[str, str], tmp_path: Path
) -> None:
    none_yet = run_lemon(env, "store", "backup", str(tmp_path / "x.sqlite3"))
    assert none_yet.returncode == 2
    assert "nothing to back up" in one_line(none_yet)
    await put_runs(store_of(env), ["run-1"])
    taken = tmp_path / "taken.sqlite3"
    taken.write_text("mine")
    for target, why in (
        (taken, "already exists"),
        (tmp_path / "no" / "such" / "dir.sqlite3", "does not exist"),
        (store_of(env), "already exists"),
    ):
        proc = run_lemon(env, "store", "backup", str(target))
        assert proc.returncode == 2, one_line(proc)
        assert why in one_line(proc)
    assert taken.read_text() == "mine"
    folder = tmp_path / "backups"
    folder.mkdir()
    proc = run_lemon(env, "store", "backup", str(folder))
    assert proc.returncode == 0, one_line(proc)
    [written] = folder.iterdir()
    assert written.name.startswith("lemon-store-")
    assert await run_ids(written) == {"run-1"}


def test_a_postgres_store_is_pointed_at_pg_dump(env: dict[str, str], tmp_path: Path) -> None:
    home = Path(env["LEMON_HOME"])
    home.mkdir(parents=True)
    (home / "config.toml").write_text(
        '[store]\nbackend = "postgres"\ndsn_env = "LEMON_TEST_DSN"\nschema = "lemon"\n'
    )
    backup = run_lemon(env, "store", "backup", str(tmp_path / "x"))
    restore = run_lemon(env, "store", "restore", str(tmp_path / "x"))
    assert (backup.returncode, restore.returncode) == (2, 2)
    assert "pg_dump" in one_line(backup)
    assert "pg_restore" in one_line(restore)
