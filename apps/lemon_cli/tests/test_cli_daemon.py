"""``lemon daemon start|status|logs|stop`` as real subprocesses: one daemon per home, a second
start says where the first is, stop is graceful, and a second ``lemon serve`` on the same home
refuses to start."""

from __future__ import annotations

from pathlib import Path

import httpx

from lemon_platform_test.lemon_process import run_lemon


def test_start_status_logs_stop(env: dict[str, str], started: str, tmp_path: Path) -> None:
    assert httpx.get(f"{started}/healthz").json() == {"ok": True}
    status = run_lemon(env, "daemon", "status")
    assert status.returncode == 0
    assert "running" in status.stdout
    assert "healthy" in status.stdout
    assert started in status.stdout
    logs = run_lemon(env, "daemon", "logs")
    assert "listening on" in logs.stdout
    assert (tmp_path / "home" / "daemon" / "daemon.json").exists()

    again = run_lemon(env, "daemon", "start", "--port", "0")
    assert again.returncode == 1
    assert "already running" in again.stdout
    assert started in again.stdout

    stopped = run_lemon(env, "daemon", "stop")
    assert stopped.returncode == 0, stopped.stdout
    assert "stopped" in stopped.stdout
    after = run_lemon(env, "daemon", "status")
    assert after.returncode == 3
    assert "not running" in after.stdout
    assert not (tmp_path / "home" / "daemon" / "daemon.json").exists()
    assert "stopped" in run_lemon(env, "daemon", "logs").stdout


def test_a_second_serve_on_the_same_home_refuses(env: dict[str, str], started: str) -> None:
    proc = run_lemon(env, "serve", "--port", "0")
    assert proc.returncode == 1
    assert "already running" in proc.stdout
    assert started in proc.stdout


def test_stop_without_a_daemon_says_so(env: dict[str, str]) -> None:
    proc = run_lemon(env, "daemon", "stop")
    assert proc.returncode == 0
    assert "none is running" in proc.stdout


def test_lemon_chat_talks_to_the_running_daemon(
    env: dict[str, str], started: str, tmp_path: Path
) -> None:
    # One client code path: with a daemon running for the home, the chat is its client (the
    # session port over the WebSocket) instead of hosting a runtime of its own.
    import json

    done = run_lemon(env, "chat", "--json", "/echo through the daemon", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document["via"] == "daemon"
    assert document["answer"] == "through the daemon"
    listed = run_lemon(env, "sessions", "list", "--json", cwd=tmp_path)
    assert any(row["runs"] >= 1 for row in json.loads(listed.stdout))
    local = run_lemon({**env, "LEMON_DAEMON": "0"}, "chat", "--json", "/echo here", cwd=tmp_path)
    assert json.loads(local.stdout)["via"] == "in-process"


def test_lemon_tokens_create_list_revoke(env: dict[str, str], tmp_path: Path) -> None:
    created = run_lemon(env, "tokens", "create", "ci", "--scopes", "read,write")
    assert created.returncode == 0, created.stderr
    token_id = created.stdout.split()[2]
    secret = created.stdout.split("token (shown once): ")[1].strip()
    listed = run_lemon(env, "tokens", "list")
    assert f"{token_id}  ci  read,write  active" in listed.stdout
    assert secret not in listed.stdout  # stored hashed, never shown again
    assert run_lemon(env, "tokens", "revoke", token_id).returncode == 0
    assert "revoked" in run_lemon(env, "tokens", "list").stdout
    assert run_lemon(env, "tokens", "revoke", "nosuch").returncode == 2


def test_lemon_chat_passes_the_token_and_never_hosts_beside_a_daemon_that_refuses(
    env: dict[str, str], tmp_path: Path
) -> None:
    # The chat presents LEMON_CONTROL_PLANE_TOKEN when it is set (else the home's local token).
    # A daemon that refuses it is said so, instead of quietly hosting a second runtime on the
    # same home next to the daemon.
    import json
    import re

    created = run_lemon(env, "tokens", "create", "me", "--scopes", "read,write,approvals")
    assert created.returncode == 0, created.stderr
    secret = created.stdout.split("token (shown once): ")[1].strip()
    proc = run_lemon(env, "daemon", "start", "--port", "0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"http://127\.0\.0\.1:\d+", proc.stdout)
    try:
        wrong = {**env, "LEMON_CONTROL_PLANE_TOKEN": "lcp_not-a-token"}
        refused = run_lemon(wrong, "chat", "--json", "/echo wrong token", cwd=tmp_path)
        assert refused.returncode != 0
        said = refused.stdout + refused.stderr
        assert "LEMON_CONTROL_PLANE_TOKEN" in said, said
        assert "local_token" in said, said
        assert '"via": "in-process"' not in said
        with_token = {**env, "LEMON_CONTROL_PLANE_TOKEN": secret}
        done = run_lemon(with_token, "chat", "--json", "/echo with token", cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["via"] == "daemon"
    finally:
        run_lemon(env, "daemon", "stop")


def test_lemon_tokens_local_prints_the_owners_token_the_daemon_requires(
    env: dict[str, str], started: str
) -> None:
    import asyncio

    from lemon_control_plane.local_token import local_token_path
    from lemon_control_plane.testing import wire_client

    printed = run_lemon(env, "tokens", "local")
    assert printed.returncode == 0, printed.stderr
    token = printed.stdout.strip()
    assert token == local_token_path(Path(env["LEMON_HOME"])).read_text().strip()
    line = run_lemon(env, "tokens", "local", "--env").stdout.strip()
    assert line == f"export LEMON_CONTROL_PLANE_TOKEN={token}"
    ws = started.replace("http://", "ws://") + "/ws"

    async def connect(with_token: str | None) -> dict[str, object]:
        async with wire_client(ws, token=with_token)(handshake=False) as c:
            return await c.connect()

    assert asyncio.run(connect(token))["type"] == "hello-ok"
    assert asyncio.run(connect(None))["error"] == {
        "code": "UNAUTHORIZED",
        "message": "invalid or missing token",
    }


def test_status_and_doctor_say_whether_the_daemon_runs(env: dict[str, str], tmp_path: Path) -> None:
    import json
    import re

    before = run_lemon(env, "status")
    assert before.returncode == 0, before.stderr
    assert re.search(
        r"^daemon\s+not running \(start one: lemon daemon start\)$", before.stdout, re.M
    )
    proc = run_lemon(env, "daemon", "start", "--port", "0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    try:
        state = json.loads((tmp_path / "home" / "daemon" / "daemon.json").read_text())
        expected = rf"running, pid {state['pid']}, {re.escape(state['url'])}, up \d+s"
        status = run_lemon(env, "status")
        assert status.returncode == 0, status.stderr
        assert re.search(rf"^daemon\s+{expected}$", status.stdout, re.M), status.stdout
        report = json.loads(run_lemon(env, "doctor", "--json").stdout)
        [daemon] = [c for c in report["checks"] if c["name"] == "daemon"]
        assert daemon["status"] == "ok"
        assert re.fullmatch(expected, daemon["detail"]), daemon
        plain = run_lemon(env, "doctor")
        assert re.search(rf"ok daemon\s+{expected}", plain.stdout), plain.stdout
    finally:
        run_lemon(env, "daemon", "stop")
    after = json.loads(run_lemon(env, "doctor", "--json").stdout)
    [daemon] = [c for c in after["checks"] if c["name"] == "daemon"]
    assert daemon["detail"].startswith("not running")


def test_daemon_logs_shows_runs_webhook_deliveries_and_provider_errors_and_follows(
    env: dict[str, str], tmp_path: Path
) -> None:
    # One line each, secrets hidden; `--follow` prints a run made after it started.
    import json
    import socket
    import subprocess
    import threading
    import time

    from lemon_platform_test.lemon_process import LEMON
    from lemon_webhooks import WebhookSecret, sign_webhook

    secret = WebhookSecret(b"s" * 32)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    home = tmp_path / "home"
    home.mkdir()
    (home / "secrets.env").write_text(f"LEMON_TEST_HOOK_SECRET={secret.text()}\n")
    (home / "config.toml").write_text(
        f'[providers.dead]\nkind = "openai_completions"\n'
        f'base_url = "http://me:hunter2pass@127.0.0.1:{closed}/v1"\n'
        '[webhooks]\nenabled = true\n[[webhooks.endpoints]]\nid = "ci"\n'
        'secret_env = "LEMON_TEST_HOOK_SECRET"\n'
    )
    proc = run_lemon(env, "daemon", "start", "--port", "0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    url = json.loads((home / "daemon" / "daemon.json").read_text())["url"]
    follower: subprocess.Popen[str] | None = None
    try:
        assert run_lemon(env, "chat", "--json", "/echo first", cwd=tmp_path).returncode == 0
        failed = run_lemon(env, "chat", "--model", "dead:m", "hello", cwd=tmp_path)
        assert failed.returncode != 0
        body = json.dumps({"prompt": "/echo hooked"}).encode()
        ts, msg_id = int(time.time()), "msg_logs_1"
        posted = httpx.post(
            f"{url}/webhooks/ci",
            content=body,
            headers={
                "content-type": "application/json",
                "idempotency-key": "delivery-1",
                "webhook-id": msg_id,
                "webhook-timestamp": str(ts),
                "webhook-signature": sign_webhook(secret, msg_id, ts, body),
            },
        )
        assert posted.status_code == 202, posted.text
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the webhook's run finishes in the background
            shown = run_lemon(env, "daemon", "logs")
            if "(accepted)" in shown.stdout and shown.stdout.count(" ok, session ") >= 2:
                break
            time.sleep(0.2)
        lines = shown.stdout.splitlines()
        assert shown.returncode == 0, shown.stderr
        assert any("listening on" in line for line in lines)  # the log file's tail first
        runs = [line for line in lines if " run run_" in line and " ok, session " in line]
        assert len(runs) >= 2, shown.stdout  # the chat's and the webhook's
        errors = [line for line in lines if " provider-error " in line]
        assert errors, shown.stdout  # one line per failed attempt
        assert all("connection" in line and "dead:m" in line for line in errors), errors
        assert "hunter2pass" not in shown.stdout  # the URL's password is hidden
        [delivery] = [line for line in lines if " webhook ci delivery " in line]
        assert "-> run run_" in delivery
        assert "delivery-1" not in shown.stdout  # the raw key is never stored nor shown

        follower = subprocess.Popen(
            [str(LEMON), "daemon", "logs", "--follow", "--lines", "1"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        seen: list[str] = []

        def read() -> None:
            assert follower is not None
            assert follower.stdout is not None
            for line in follower.stdout:
                seen.append(line)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        time.sleep(1.5)  # it has printed the past and is following
        assert run_lemon(env, "chat", "/echo followed", cwd=tmp_path).returncode == 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any("session " in s for s in seen[2:]):
            time.sleep(0.1)
        new = [s for s in seen if " run run_" in s and " ok, session " in s]
        assert len(new) >= 2, seen  # the last one before it started, and the followed one
        assert follower.poll() is None  # still following
    finally:
        if follower is not None:
            follower.terminate()
            follower.wait(30)
            for pipe in (follower.stdout, follower.stderr):
                if pipe is not None:
                    pipe.close()
        run_lemon(env, "daemon", "stop")
