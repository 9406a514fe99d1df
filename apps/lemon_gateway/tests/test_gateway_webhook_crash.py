"""``kill -9`` of a real ``lemon serve`` between the reservation and the acceptance, then the
replay after a restart: the uncertain receipt with the run id fixed at reservation.

The daemon runs with the test-only fault point ``LEMON_WEBHOOK_FAULT=hang_after_reserve``: it
announces the reservation on stderr and then waits, so the kill lands exactly there."""

from __future__ import annotations

import asyncio
import os
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

from lemon_gateway import FAULT_ENV

LEMON = Path(sys.executable).with_name("lemon")


@contextmanager
def _serve(env: dict[str, str], work: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = subprocess.Popen(
        [str(LEMON), "serve", "--port", "0", "--cwd", str(work)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the readiness handshake
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        assert found, (line, proc.stderr.read() if proc.stderr else "")
        yield proc, found[1]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


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
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "SYSTEMROOT")}
    env = {**keep, "HOME": str(tmp_path), "LEMON_HOME": str(home)}
    payload = body("deploy the thing")
    with _serve({**env, FAULT_ENV: "hang_after_reserve"}, work) as (proc, url):
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
    with _serve(env, work) as (_proc, url):
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
