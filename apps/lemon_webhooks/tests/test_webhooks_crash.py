"""``kill -9`` of a real ``lemon serve`` between the reservation and the acceptance, then the
replay after a restart: the uncertain receipt with the run id fixed at reservation.

The daemon runs through ``fault_daemon.py``, which builds the app with a test-only fault point
(``webhooks_app(faults=...)``; nothing in the environment arms one): it announces the
reservation on stderr and then waits, so the kill lands exactly there."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import msgspec

from lemon_platform_test.lemon_process import lemon_env, serve, stop_serve

_FAULT_DAEMON = Path(__file__).with_name("fault_daemon.py")
_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


@contextmanager
def serve_with_fault(
    env: dict[str, str], work: Path
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``lemon serve --port 0 --cwd work`` with the fault point armed, and its URL (read from
    its readiness handshake); killed at the end of the block."""
    proc = subprocess.Popen(
        [sys.executable, str(_FAULT_DAEMON), "serve", "--port", "0", "--cwd", str(work)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the readiness handshake: printed once it listens
        found = _LISTENING.search(line)
        assert found, line
        yield proc, found[1]
    finally:
        stop_serve(proc)


def _reserved_run_id(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    for line in proc.stderr:
        found = re.search(r"webhook fault point: reserved (run_\S+)", line)
        if found:
            return found[1]
    raise AssertionError("the daemon ended without reaching the fault point")


async def test_a_kill_between_reservation_and_acceptance_replays_outcome_unknown(
    tmp_path: Path, work: Path, make_home: Callable[..., None], sign: Any, body: Any
) -> None:
    home = tmp_path / "home"
    make_home(home)
    env = lemon_env(tmp_path, home=home)
    payload = body("deploy the thing")
    with serve_with_fault(env, work) as (proc, url):
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            pending = asyncio.create_task(
                http.post("/webhooks/ci", content=payload, headers=sign(payload, key="k-1"))
            )
            run_id = await asyncio.to_thread(_reserved_run_id, proc)
            proc.send_signal(signal.SIGKILL)
            assert await asyncio.to_thread(proc.wait, 30) == -signal.SIGKILL
            try:
                await pending
            except httpx.HTTPError:
                pass  # the connection died with the process: no answer, as in a real crash
            else:
                raise AssertionError("a killed daemon cannot have answered")
    with serve(env, work) as (_proc, url):
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            replay = await http.post(
                "/webhooks/ci", content=payload, headers=sign(payload, key="k-1")
            )
    assert replay.status_code == 202
    assert msgspec.json.decode(replay.content) == {
        "status": "outcome_unknown",
        "run_id": run_id,
        "retry_safe": False,
    }
    assert replay.headers["idempotent-replayed"] == "true"
