"""``lemon webhooks list|show|sweep`` on a real idempotency store, no daemon: the SQLite file,
and with ``[store] backend = "postgres"`` the PostgreSQL tables of the schema (its own per
test, dropped after)."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from lemon_cli.main import app
from lemon_core.idempotency import IdempotencyStore, StoredResponse, hash_idempotency_key
from lemon_core.store import system_clock_ms
from lemon_infra import PostgresIdempotencyStore, SQLiteIdempotencyStore, drop_schema
from lemon_webhooks import idempotency_store_path

HOUR = 3_600_000
DSN = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


async def _seed(home: Path, schema: str | None = None) -> dict[str, str]:
    now = system_clock_ms()
    store: IdempotencyStore = (
        await SQLiteIdempotencyStore.open(idempotency_store_path(home))
        if schema is None
        else await PostgresIdempotencyStore.open(DSN, schema=schema)
    )
    runs: dict[str, str] = {}
    try:
        for key, state, age in (("done", "accepted", 0), ("crashed", "pending", 0),
                                ("stale", "accepted", 25 * HOUR)):  # fmt: skip
            key_hash = hash_idempotency_key("ci", f"raw-key-{key}")
            runs[key] = f"run_{key}"
            await store.reserve(key_hash=key_hash, integration="ci", body_hash="b",
                                run_id=runs[key], session_key="s", now_ms=now - age,
                                ttl_ms=24 * HOUR, lease_ms=1)  # fmt: skip
            if state == "accepted":
                body = json.dumps({"status": "accepted", "run_id": runs[key]}).encode()
                await store.complete(key_hash=key_hash, run_id=runs[key],
                                     response=StoredResponse(status=202, body=body),
                                     now_ms=now - age)  # fmt: skip
    finally:
        await store.close()
    return runs


def _lemon(home: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["webhooks", *args], env={"LEMON_HOME": str(home)})


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """None (SQLite) or the PostgreSQL schema of this test."""
    if request.param == "sqlite":
        yield None
        return
    schema = f"cliidem_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    yield schema
    asyncio.run(drop_schema(DSN, schema))


def test_list_show_and_sweep_work_on_the_store(tmp_path: Path, backend: str | None) -> None:
    home = tmp_path / "home"
    home.mkdir()
    if backend is not None:
        (home / "config.toml").write_text(
            f'[store]\nbackend = "postgres"\ndsn = "{DSN}"\nschema = "{backend}"\n',
            encoding="utf-8",
        )
    asyncio.run(_seed(home, backend))
    listed = _lemon(home, "list")
    assert listed.exit_code == 0, listed.output
    assert "run_done" in listed.output
    assert "outcome unknown (abandoned)" in listed.output  # run_crashed: lease over
    assert "expired (the next sweep removes it" in listed.output  # run_stale
    assert "raw-key" not in listed.output  # raw keys are never stored, so never shown
    document = json.loads(_lemon(home, "list", "--json").output)
    runs = [r["run_id"] for r in document["records"]]
    assert sorted(runs[:2]) == ["run_crashed", "run_done"]
    assert runs[2] == "run_stale"  # the oldest last
    assert (backend is None) == document["store"].endswith("idempotency.sqlite3")
    assert not (backend is not None and idempotency_store_path(home).exists())

    shown = _lemon(home, "show", "raw-key-done", "--webhook", "ci")
    assert shown.exit_code == 0, shown.output
    record = json.loads(shown.output)
    assert (record["run_id"], record["answer"]) == ("run_done", "accepted")
    assert json.loads(record["response"]["body"])["run_id"] == "run_done"
    by_key = _lemon(home, "show", "raw-key-done")  # the raw key alone: no need for --webhook
    assert by_key.exit_code == 0, by_key.output
    assert json.loads(by_key.output)["run_id"] == "run_done"
    prefix = hash_idempotency_key("ci", "raw-key-crashed")[:8]
    assert json.loads(_lemon(home, "show", prefix).output)["run_id"] == "run_crashed"

    swept = _lemon(home, "sweep")
    assert swept.exit_code == 0, swept.output
    assert "Removed 1 expired reservation(s) and 1 stored response(s)" in swept.output


def test_a_webhook_id_binding_is_not_shown_as_an_unknown_outcome(tmp_path: Path) -> None:
    from lemon_webhooks import REPLAY_WINDOW_MS, WEBHOOK_ID_GUARD_SUFFIX

    home = tmp_path / "home"
    home.mkdir()

    async def bind() -> None:
        store = await SQLiteIdempotencyStore.open(idempotency_store_path(home))
        try:
            await store.reserve(key_hash="ab" * 32, integration="ci" + WEBHOOK_ID_GUARD_SUFFIX,
                                body_hash=hash_idempotency_key("ci", "k"), run_id="run_g",
                                session_key="s", now_ms=system_clock_ms(),
                                ttl_ms=REPLAY_WINDOW_MS, lease_ms=0)  # fmt: skip
        finally:
            await store.close()

    asyncio.run(bind())
    listed = _lemon(home, "list")
    assert listed.exit_code == 0, listed.output
    assert "webhook-id bound to its first key" in listed.output
    assert "outcome unknown" not in listed.output


def test_bad_input_gets_one_clear_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert "No webhook reservations" in _lemon(home, "list").output
    assert not idempotency_store_path(home).exists()
    short = _lemon(home, "show", "abc")
    assert short.exit_code == 2
    assert "too short" in short.output
    blank = _lemon(home, "show", "  ", "--webhook", "ci")
    assert blank.exit_code == 2
    asyncio.run(_seed(home))
    missing = _lemon(home, "show", "ffffffffff")
    assert missing.exit_code == 1
    assert "no reservation matches" in missing.output
    assert "Traceback" not in missing.output


def test_an_unset_postgres_dsn_variable_is_one_clear_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[store]\nbackend = "postgres"\ndsn_env = "LEMON_TEST_UNSET_DSN"\n', encoding="utf-8"
    )
    listed = _lemon(home, "list")
    assert listed.exit_code == 1
    assert "LEMON_TEST_UNSET_DSN" in listed.output
    assert "Traceback" not in listed.output


def test_show_takes_the_callers_key_through_the_real_cli(tmp_path: Path) -> None:
    from lemon_platform_test.lemon_process import lemon_env, run_lemon

    env = lemon_env(tmp_path)
    home = Path(env["LEMON_HOME"])
    home.mkdir()
    asyncio.run(_seed(home))
    shown = run_lemon(env, "webhooks", "show", "raw-key-crashed")
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert (record["run_id"], record["integration"]) == ("run_crashed", "ci")
    assert "raw-key" not in shown.stdout  # the key is looked up by its hash, never printed
    unknown = run_lemon(env, "webhooks", "show", "no-such-key")
    assert unknown.returncode == 1
    assert "no reservation matches" in unknown.stderr
    short = run_lemon(env, "webhooks", "show", "abc")
    assert short.returncode == 2
    assert "no reservation has the key 'abc'" in short.stderr
