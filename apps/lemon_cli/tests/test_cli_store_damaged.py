"""A damaged store through real ``lemon`` subprocesses: ``lemon doctor`` fails the store check
(it used to say ``ok store``), ``lemon serve`` and an in-process ``lemon chat`` refuse to start
with one clear message naming the file and the way out (exit 2), and the file is left as it was.
Real files: a populated store with 8 KB of random bytes written into its middle, and one
truncated to zero bytes."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from lemon_core.store import RunStore, RunSummary
from lemon_infra import SQLiteStore
from lemon_platform_test.lemon_process import lemon_env, run_lemon


async def _populate(path: Path, runs: int = 400) -> None:
    async with await SQLiteStore.open(path) as store:
        for i in range(runs):
            await RunStore(store).finalize(
                RunSummary(
                    run_id=f"run-{i:04d}",
                    session_key="agent:default:main",
                    ok=True,
                    answer="x" * 300,
                    finished_at_ms=1_000 + i,
                )
            )


def _scribble(path: Path) -> None:
    total = path.stat().st_size
    with path.open("r+b") as handle:
        handle.seek(total // 2)
        handle.write(random.Random(24).randbytes(8192))


@pytest.fixture(params=["random bytes in the middle", "zero length"])
async def damaged(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[dict[str, str], Path]:
    env = lemon_env(tmp_path, NO_COLOR="1", COLUMNS="400", LEMON_DAEMON="0")
    store = Path(env["LEMON_HOME"]) / "store" / "lemon.sqlite3"
    await _populate(store, runs=400 if request.param != "zero length" else 5)
    if request.param == "zero length":
        store.write_bytes(b"")
    else:
        _scribble(store)
    return env, store


def test_doctor_fails_the_store_check_of_a_damaged_store(
    damaged: tuple[dict[str, str], Path],
) -> None:
    env, store = damaged
    before = store.read_bytes()
    proc = run_lemon(env, "doctor", "--json")
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["store"]["status"] == "fail", checks["store"]
    assert str(store) in checks["store"]["detail"]
    assert "lemon store restore" in checks["store"]["detail"]
    assert proc.returncode == 1
    assert store.read_bytes() == before  # the probe wrote nothing into it


def test_serve_and_an_in_process_chat_refuse_a_damaged_store_with_exit_2(
    damaged: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    env, store = damaged
    before = store.read_bytes()
    for args in (("serve", "--port", "0", "--cwd", str(tmp_path)), ("chat", "/echo hi")):
        proc = run_lemon(env, *args, cwd=tmp_path)
        output = " ".join((proc.stdout + proc.stderr).split())
        assert proc.returncode == 2, (args, output)
        assert "Traceback" not in output
        assert str(store) in output, output
        assert "lemon store restore" in output
        assert "listening on" not in output
    assert store.read_bytes() == before
