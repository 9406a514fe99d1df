"""``lemon doctor`` with a PostgreSQL store and a Redis bus: each probed for real; a server it
cannot reach is one clear line (password redacted) and exit 2."""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from lemon_cli.main import app

PG = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("LEMON_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"doc_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    yield name
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def doctor(home: Path, config: str, *args: str, **env: str) -> tuple[int, str]:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config, encoding="utf-8")
    result = CliRunner().invoke(
        app, ["doctor", *args], env={"LEMON_HOME": str(home), "LEMON_MODEL": "", **env}
    )
    return result.exit_code, result.output


def test_doctor_probes_postgres_and_redis(tmp_path: Path, schema: str) -> None:
    code, out = doctor(
        tmp_path / "home",
        f'[store]\nbackend = "postgres"\ndsn_env = "DOCTOR_PG"\nschema = "{schema}"\n'
        f'[bus]\nbackend = "redis"\nurl = "{REDIS}"\n',
        "--json",
        DOCTOR_PG=PG,
    )
    assert code == 0, out
    by_name = {c["name"]: c for c in json.loads(out)["checks"]}
    assert by_name["store"]["status"] == "ok"
    assert f"schema {schema}" in by_name["store"]["detail"]
    assert by_name["bus"]["status"] == "ok"
    assert "Redis publish/subscribe ok" in by_name["bus"]["detail"]


def failed(out: str, name: str) -> str:
    (check,) = [c for c in json.loads(out)["checks"] if c["name"] == name]
    assert check["status"] == "fail"
    detail: str = check["detail"]
    assert "\n" not in detail  # one line
    return detail


def test_a_wrong_dsn_is_one_clear_line_and_exit_2(tmp_path: Path) -> None:
    dsn = f"postgresql://u:hunter2@127.0.0.1:{closed_port()}/x"
    config = f'[store]\nbackend = "postgres"\ndsn = "{dsn}"\n'
    code, out = doctor(tmp_path / "home", config, "--json")
    assert code == 2, out
    detail = failed(out, "store")
    assert detail.startswith("PostgreSQL store postgresql://u:***@127.0.0.1:")
    assert "cannot connect" in detail
    assert "hunter2" not in out
    code, text = doctor(tmp_path / "home", config)  # the same without --json
    assert code == 2
    assert "hunter2" not in text


def test_a_wrong_redis_url_is_one_clear_line_and_exit_2(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{closed_port()}/0"
    code, out = doctor(tmp_path / "home", f'[bus]\nbackend = "redis"\nurl = "{url}"\n', "--json")
    assert code == 2, out
    detail = failed(out, "bus")
    assert detail.startswith(f"Redis bus {url}: cannot connect")


def test_an_unset_dsn_variable_is_named(tmp_path: Path) -> None:
    config = '[store]\nbackend = "postgres"\ndsn_env = "NOT_SET_ANYWHERE"\n'
    code, out = doctor(tmp_path / "home", config, "--json")
    assert code == 2, out
    assert "the variable NOT_SET_ANYWHERE is not set" in failed(out, "store")
