"""``lemon web`` as a real subprocess: with no daemon it says how to start one; with a daemon
(``lemon daemon start``) it prints the chat page's URL (a session's, URL-encoded), which the
daemon serves."""

from __future__ import annotations

from urllib.parse import quote

import httpx

from lemon_platform_test.lemon_process import run_lemon


def test_web_without_a_daemon_says_how_to_start_one(env: dict[str, str]) -> None:
    proc = run_lemon(env, "web", "--no-open")
    assert proc.returncode == 1
    assert "lemon daemon start" in proc.stderr


def test_web_rejects_a_malformed_session_key(env: dict[str, str]) -> None:
    proc = run_lemon(env, "web", "--no-open", "--session", "a b")
    assert proc.returncode == 2
    assert "lemon web:" in proc.stderr


def test_web_prints_the_pages_url_of_the_running_daemon(env: dict[str, str], started: str) -> None:
    proc = run_lemon(env, "web", "--no-open")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == started + "/"
    key = "agent:default:web:browser:unknown:stream-recovery-smoke"
    by_key = run_lemon(env, "web", "--no-open", "--session", key)
    assert by_key.stdout.strip() == f"{started}/chat/{quote(key, safe='')}"
    page = httpx.get(by_key.stdout.strip())
    assert page.status_code == 200
    assert '<script type="module" src="/static/app.js">' in page.text
