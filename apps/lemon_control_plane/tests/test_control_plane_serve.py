"""``lemon serve`` as a real subprocess: it serves the daemon profile on the asked port, and
SIGTERM stops it gracefully (the run in flight ends with a failed completion the client sees,
then ``shutdown``, then exit 0)."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lemon_control_plane.local_token import read_local_token
from lemon_control_plane.testing import wire_client
from lemon_platform_test.lemon_process import LEMON, lemon_env, serve


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return lemon_env(tmp_path)


@pytest.fixture
def serving(env: dict[str, str], work: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    with serve(env, work) as daemon:
        yield daemon


def test_serve_help_exits_zero(env: dict[str, str]) -> None:
    proc = subprocess.run(
        [str(LEMON), "serve", "--help"], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "--port" in proc.stdout


def test_serve_refuses_a_public_bind_without_a_token(env: dict[str, str]) -> None:
    proc = subprocess.run(
        [str(LEMON), "serve", "--host", "0.0.0.0", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "without a token" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_serve_says_when_the_port_is_taken(env: dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [str(LEMON), "serve", "--port", str(port)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    assert proc.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


async def test_sigterm_with_a_run_in_flight_stops_gracefully(
    serving: tuple[subprocess.Popen[str], str], env: dict[str, str]
) -> None:
    proc, url = serving
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"{url}/healthz")).json() == {"ok": True}
    ws_url = url.replace("http://", "ws://") + "/ws"
    async with wire_client(ws_url, token=read_local_token(Path(env["LEMON_HOME"])))() as c:
        sent = await c.call(
            "chat.send",
            {"sessionKey": "agent:default:main", "prompt": '/tool bash {"command": "echo hi"}'},
        )
        await c.event("exec.approval.requested", runId=sent["runId"])
        proc.send_signal(signal.SIGTERM)
        done = await c.completed(sent["runId"])
        await c.event("shutdown")
    assert done["payload"]["ok"] is False
    code = await asyncio.to_thread(proc.wait, 60)
    assert code == 0
    assert proc.stdout is not None
    assert "stopped" in proc.stdout.read()
