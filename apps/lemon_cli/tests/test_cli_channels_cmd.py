"""``lemon channels status`` and ``lemon channels pair ...`` on a real home (config file and
SQLite store), and the doctor's channel line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from lemon_channels import STATUS_TABLE, PairingStore
from lemon_cli.main import app
from lemon_infra import SQLiteStore
from lemon_runtime import store_path


def run(home: Path, *args: str, **env: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"LEMON_HOME": str(home), **env})


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[channels.telegram]\ntoken_env = "LEMON_TEST_TG"\nallowed_users = [1]\n'
    )
    return home


def seed(home: Path) -> str:
    async def work() -> str:
        path = store_path(home)
        path.parent.mkdir(parents=True, exist_ok=True)
        store = await SQLiteStore.open(path)
        try:
            await store.put(
                STATUS_TABLE,
                "telegram",
                {
                    "channel_id": "telegram",
                    "state": "failed",
                    "detail": "bad token",
                    "mode": "polling",
                },
            )
            code = await PairingStore(store).request(
                "telegram", "77", peer_id="77", user_name="mallory"
            )
            assert code is not None
            return code
        finally:
            await store.close()

    return asyncio.run(work())


def test_status_shows_each_channel_and_why_it_failed(home: Path) -> None:
    seed(home)
    result = run(home, "channels", "status", "--json")
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.output)["channels"]
    assert row["channel"] == "telegram"
    assert row["state"] == "failed"
    assert row["detail"] == "bad token"
    text = run(home, "channels", "status")
    assert "failed" in text.output
    assert "bad token" in text.output


def test_status_without_a_channel_says_how_to_add_one(tmp_path: Path) -> None:
    result = run(tmp_path, "channels", "status")
    assert result.exit_code == 0
    assert "[channels.telegram]" in result.output


def test_pair_approve_pairs_the_holder_of_the_code_once(home: Path) -> None:
    code = seed(home)
    listed = run(home, "channels", "pair", "list")
    assert code in listed.output
    approved = run(home, "channels", "pair", "approve", code.lower())
    assert approved.exit_code == 0, approved.output
    assert "user 77" in approved.output
    again = run(home, "channels", "pair", "approve", code)
    assert again.exit_code == 1
    assert "no pairing code" in again.output
    assert "paired   telegram user 77" in run(home, "channels", "pair", "list").output


def test_pair_approve_refuses_what_is_not_a_code(home: Path) -> None:
    seed(home)
    result = run(home, "channels", "pair", "approve", "no; way")
    assert result.exit_code == 2
    assert "not a pairing code" in result.output


def test_doctor_reports_a_missing_token_and_a_failed_channel(home: Path) -> None:
    seed(home)
    missing = run(home, "doctor", "--json")
    lines = [c for c in json.loads(missing.output)["checks"] if c["name"] == "channels"]
    assert lines == [
        {
            "name": "channels",
            "status": "fail",
            "detail": "telegram: no bot token: set LEMON_TEST_TG (environment or "
            "$LEMON_HOME/secrets.env)",
        }
    ]
    failed = run(home, "doctor", "--json", LEMON_TEST_TG="1:x")
    lines = [c for c in json.loads(failed.output)["checks"] if c["name"] == "channels"]
    assert lines == [
        {"name": "channels", "status": "fail", "detail": "telegram: failed: bad token"}
    ]
