"""``lemon web`` as a real subprocess: with no daemon it says how to start one; with a daemon
(``lemon daemon start``) it prints the chat page's URL (a session's, URL-encoded), which the
daemon serves."""

from __future__ import annotations

import re
from urllib.parse import quote

import httpx

from lemon_control_plane import AUTH_COOKIE
from lemon_platform_test.lemon_process import run_lemon


def test_web_without_a_daemon_says_how_to_start_one(env: dict[str, str]) -> None:
    proc = run_lemon(env, "web", "--no-open")
    assert proc.returncode == 1
    assert "lemon daemon start" in proc.stderr


def test_web_rejects_a_malformed_session_key(env: dict[str, str]) -> None:
    proc = run_lemon(env, "web", "--no-open", "--session", "a b")
    assert proc.returncode == 2
    assert "lemon web:" in proc.stderr


def test_web_prints_a_one_time_sign_in_link_of_the_running_daemon(
    env: dict[str, str], started: str
) -> None:
    proc = run_lemon(env, "web", "--no-open")
    assert proc.returncode == 0, proc.stderr
    link = proc.stdout.strip()
    assert re.fullmatch(re.escape(started) + r"/login\?once=[A-Za-z0-9_\-]{40,}", link), link
    token = run_lemon(env, "tokens", "local").stdout.strip()
    assert token not in link  # the token never goes into a URL
    with httpx.Client(base_url=started, follow_redirects=True) as http:
        assert http.get("/").status_code == 200  # the page itself is public; its data is not
        signed = http.get(link)  # follows the redirect to the page, keeps the cookie
        assert signed.status_code == 200
        assert '<script type="module" src="/static/app.js">' in signed.text
        assert AUTH_COOKIE in http.cookies
        again = httpx.get(link)
        assert again.status_code == 400  # a link signs in once
    key = "agent:default:web:browser:unknown:stream-recovery-smoke"
    by_key = run_lemon(env, "web", "--no-open", "--session", key).stdout.strip()
    assert by_key.startswith(f"{started}/login?once=")
    page = httpx.get(by_key, follow_redirects=False)
    assert page.status_code == 303
    assert page.headers["location"] == f"/chat/{quote(key, safe='')}"


def test_web_says_so_when_the_daemon_refuses_its_token(env: dict[str, str], started: str) -> None:
    wrong = {**env, "LEMON_CONTROL_PLANE_TOKEN": "lcp_wrong"}
    proc = run_lemon(wrong, "web", "--no-open")
    assert proc.returncode == 1
    assert "refused" in proc.stderr
    assert "LEMON_CONTROL_PLANE_TOKEN" in proc.stderr
