"""What ``lemon serve`` says about access, and TLS end to end: a loopback daemon says its
clients present the home's local token; a non-loopback bind without TLS warns that tokens cross
the network in clear; with ``[control_plane] tls_cert`` / ``tls_key`` it serves HTTPS and the
owner's ``lemon chat`` still reaches it (trusting exactly that certificate); ``lemon config
validate`` checks the TLS files."""

from __future__ import annotations

import json
import queue
import re
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from lemon_control_plane.testing import self_signed_certificate
from lemon_platform_test.lemon_process import LEMON, lemon_env, run_lemon, stop_serve


@contextmanager
def serving(env: dict[str, str], work: Path, *args: str) -> Iterator[list[str]]:
    """``lemon serve --port 0`` and its first two lines (the listening line, the access one)."""
    proc = subprocess.Popen(
        [str(LEMON), "serve", "--port", "0", "--cwd", str(work), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    out = proc.stdout
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(out.readline()) for _ in range(2)])
    reader.start()
    try:
        try:
            first, second = lines.get(timeout=60), lines.get(timeout=60)
        except queue.Empty:
            pytest.fail("lemon serve did not print its two banner lines within 60 s")
        assert "listening on" in first, (first, second)
        yield [first, second]
    finally:
        stop_serve(proc, graceful=True)
        reader.join(30)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def test_a_loopback_daemon_says_its_clients_present_the_local_token(
    env: dict[str, str], work: Path
) -> None:
    with serving(env, work) as lines:
        assert "local token" in lines[1]
        assert "lemon tokens local" in lines[1]
        assert "in clear" not in "".join(lines)


def test_a_non_loopback_bind_without_tls_warns_that_tokens_cross_the_network_in_clear(
    env: dict[str, str], work: Path
) -> None:
    with_token = {**env, "LEMON_CONTROL_PLANE_TOKEN": "lcp_banner-test-token"}
    with serving(with_token, work, "--host", "0.0.0.0") as lines:
        text = "".join(lines)
    assert "without TLS" in text
    assert "in clear" in text
    assert "tls_cert" in text


def test_with_tls_the_daemon_serves_https_and_lemon_chat_still_reaches_it(
    tmp_path: Path, work: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    if self_signed_certificate(home) is None:
        pytest.skip("no openssl command to make a test certificate with")
    (home / "config.toml").write_text(
        '[control_plane]\ntls_cert = "cert.pem"\ntls_key = "key.pem"\n', encoding="utf-8"
    )
    env = lemon_env(tmp_path)
    with_token = {**env, "LEMON_CONTROL_PLANE_TOKEN": "lcp_banner-test-token"}
    with serving(with_token, work, "--host", "0.0.0.0") as lines:
        assert re.search(r"listening on https://0\.0\.0\.0:\d+", lines[0]), lines
        assert "in clear" not in "".join(lines)
        done = run_lemon(env, "chat", "--json", "/echo over tls", cwd=work)
        assert done.returncode == 0, done.stdout + done.stderr
        answer = json.loads(done.stdout)
        assert (answer["via"], answer["answer"]) == ("daemon", "over tls")
        status = run_lemon(env, "daemon", "status")
        assert "healthy" in status.stdout, status.stdout
        web = run_lemon(env, "web", "--no-open")
        assert web.returncode == 0, web.stderr
        assert re.match(r"https://0\.0\.0\.0:\d+/login\?once=", web.stdout), web.stdout


def test_config_validate_checks_the_tls_files(env: dict[str, str], tmp_path: Path) -> None:
    env = {**env, "COLUMNS": "400"}  # one line per issue
    config = Path(env["LEMON_HOME"])
    config.mkdir()
    (config / "config.toml").write_text('[control_plane]\ntls_cert = "cert.pem"\n')
    half = run_lemon(env, "config", "validate")
    assert half.returncode == 1
    assert "control_plane.tls_key" in half.stdout
    assert "both tls_cert and tls_key" in half.stdout
    (config / "config.toml").write_text(
        '[control_plane]\ntls_cert = "cert.pem"\ntls_key = "/nowhere/key.pem"\n'
    )
    missing = run_lemon(env, "config", "validate")
    assert missing.returncode == 1
    assert "cert.pem is not a readable file" in missing.stdout
    assert "/nowhere/key.pem is not a readable file" in missing.stdout
    (config / "config.toml").write_text("[control_plane]\nlocal_auth = false\n")
    assert run_lemon(env, "config", "validate").returncode == 0
