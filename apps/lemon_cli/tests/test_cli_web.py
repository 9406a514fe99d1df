"""``lemon web`` as a real subprocess: with no daemon it says how to start one; with a daemon
(``lemon daemon start``) it prints the chat page's URL (a session's, URL-encoded), which the
daemon serves."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

LEMON = Path(sys.executable).with_name("lemon")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG")}
    return {**keep, "HOME": str(tmp_path), "LEMON_HOME": str(tmp_path / "home")}


def lemon(
    env: dict[str, str], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LEMON), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=cwd,
    )


@pytest.fixture
def started(env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    proc = lemon(env, "daemon", "start", "--port", "0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = re.search(r"(http://127\.0\.0\.1:\d+)", proc.stdout)
    assert found, proc.stdout
    try:
        yield found[1]
    finally:
        lemon(env, "daemon", "stop")


def test_web_without_a_daemon_says_how_to_start_one(env: dict[str, str]) -> None:
    proc = lemon(env, "web", "--no-open")
    assert proc.returncode == 1
    assert "lemon daemon start" in proc.stderr


def test_web_rejects_a_malformed_session_key(env: dict[str, str]) -> None:
    proc = lemon(env, "web", "--no-open", "--session", "a b")
    assert proc.returncode == 2
    assert "lemon web:" in proc.stderr


def test_web_prints_the_pages_url_of_the_running_daemon(env: dict[str, str], started: str) -> None:
    proc = lemon(env, "web", "--no-open")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == started + "/"
    key = "agent:default:web:browser:unknown:stream-recovery-smoke"
    by_key = lemon(env, "web", "--no-open", "--session", key)
    assert by_key.stdout.strip() == f"{started}/chat/{quote(key, safe='')}"
    page = httpx.get(by_key.stdout.strip())
    assert page.status_code == 200
    assert '<script type="module" src="/static/app.js">' in page.text
