"""``kill -9`` of a real ``lemon serve`` between the reservation and the acceptance, then the
replay after a restart: the uncertain receipt with the run id fixed at reservation.

The daemon runs with the test-only fault point ``LEMON_WEBHOOK_FAULT=hang_after_reserve``: it
announces the reservation on stderr and then waits, so the kill lands exactly there."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec

from lemon_gateway import FAULT_ENV
from lemon_platform_test.lemon_process import lemon_env, serve


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
    with serve({**env, FAULT_ENV: "hang_after_reserve"}, work) as (proc, url):
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
