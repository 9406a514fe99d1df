"""Two real daemons (``lemon serve``) on one PostgreSQL schema and one Redis prefix: an "always"
grant made through A approves on B too, and ``lemon approvals revoke`` (another process, on the
same configured store) is in force on both at once: each asks again."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lemon_control_plane.local_token import read_local_token
from lemon_control_plane.testing import WireClient, wire_client
from lemon_platform_test.lemon_process import lemon_env, run_lemon, start_serve, stop_serve

PG = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("LEMON_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
BASH = '/tool bash {"command": "echo shared"}'


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"grants_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        yield name
    finally:
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def home_env(tmp_path: Path, name: str, schema: str) -> tuple[Path, dict[str, str]]:
    home = tmp_path / name
    (home / "agent").mkdir(parents=True)
    (home / "config.toml").write_text(
        f'[store]\nbackend = "postgres"\ndsn_env = "LEMON_TEST_DSN"\nschema = "{schema}"\n'
        f'[bus]\nbackend = "redis"\nurl = "{REDIS}"\n',
        encoding="utf-8",
    )
    return home, lemon_env(tmp_path, home=home, LEMON_TEST_DSN=PG)


async def run_bash(client: WireClient, session: str, decision: str | None) -> bool:
    """Run BASH in ``session``; answer ``decision`` when asked. Whether it asked."""
    sent = await client.call("chat.send", {"sessionKey": session, "prompt": BASH})
    if decision is not None:
        asked = await client.event("exec.approval.requested", runId=sent["runId"])
        await client.call(
            "exec.approval.resolve",
            {"approvalId": asked["payload"]["approvalId"], "decision": decision},
        )
    await client.completed(sent["runId"])
    return any(
        f["payload"].get("runId") == sent["runId"] for f in client.events("exec.approval.requested")
    )


def grants(env: dict[str, str]) -> list[dict[str, Any]]:
    proc = run_lemon(env, "approvals", "list", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    document = json.loads(proc.stdout)
    assert "PostgreSQL" in document["store"]
    found: list[dict[str, Any]] = document["grants"]
    return found


async def test_a_grant_and_its_revocation_are_live_on_both_daemons(
    tmp_path: Path, schema: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    home_a, env_a = home_env(tmp_path, "a", schema)
    home_b, env_b = home_env(tmp_path, "b", schema)
    proc_a, url_a = start_serve(env_a, work)
    try:
        proc_b, url_b = start_serve(env_b, work)
        try:
            async with (
                wire_client(url_a.replace("http", "ws", 1) + "/ws",
                            token=read_local_token(home_a))() as on_a,
                wire_client(url_b.replace("http", "ws", 1) + "/ws",
                            token=read_local_token(home_b))() as on_b,
            ):  # fmt: skip
                assert await run_bash(on_a, "tui-a", "approve_global")
                # B started before the grant existed: it approves from the shared store.
                assert not await run_bash(on_b, "tui-b", None)
                assert [g["scope"] for g in grants(env_b)] == ["global"]

                revoked = run_lemon(env_b, "approvals", "revoke", "--all")
                assert revoked.returncode == 0, revoked.stdout + revoked.stderr
                assert "Revoked the global grant" in revoked.stdout
                assert grants(env_a) == []

                assert await run_bash(on_a, "tui-a", "deny")
                assert await run_bash(on_b, "tui-b", "deny")
        finally:
            stop_serve(proc_b, graceful=True)
    finally:
        stop_serve(proc_a, graceful=True)
