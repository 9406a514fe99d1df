"""A run the runtime retries streams on the wire under the run id ``chat.send`` answered with
(not the retry attempt's id), with one ``started`` and delta ``seq`` increasing across the
attempts. Over the daemon profile whose agent runs a scripted executor: the first attempt
crashes before doing anything, the retry streams the answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lemon_control_plane import ControlPlane, ControlPlaneOptions
from lemon_control_plane.testing import plane_client
from lemon_core.config import load_config
from lemon_core.execution import ExecutionJob
from lemon_runtime import Runtime, discover_apps

from ._scripted_agent import scripted_agent_app

executor_kit = pytest.importorskip("lemon_platform_test.executor")


class _RetriedOnce(executor_kit.ScriptedExecutor):  # type: ignore[misc, name-defined]  # found at run time
    """The first attempt crashes; a retry attempt streams two deltas and completes."""

    def _script_for(self, job: ExecutionJob) -> Any:
        if job.retry_of is None:
            return executor_kit.Script().raise_error("worker killed")
        return executor_kit.Script().delta("second ", "try").complete(answer="second try")


async def test_a_retried_run_streams_under_the_run_id_chat_send_answered(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    scripted = _RetriedOnce()
    runtime = Runtime(
        profile="daemon",
        config=load_config(home=home, cwd=tmp_path, environ={}),
        apps={**discover_apps(), "coding_agent": scripted_agent_app(scripted)},
        options=[ControlPlaneOptions(port=0, cwd=str(tmp_path))],
    )
    async with runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        async with plane_client(plane)() as c:
            sent = await c.call("chat.send", {"sessionKey": "agent:default:main", "prompt": "go"})
            run_id = sent["runId"]
            done = await c.completed(run_id)
    attempts = list(scripted.order)
    assert len(attempts) == 2, attempts
    assert attempts[0] == run_id
    retry = attempts[1]
    assert retry != run_id
    assert done["payload"]["ok"] is True
    assert done["payload"]["answer"] == "second try"
    run_events = [f["payload"] for f in c.frames if f.get("type") == "event"]
    assert not [p for p in run_events if p.get("runId") == retry], "the attempt id leaked"
    started = [p for p in run_events if p.get("type") == "started"]
    assert [p["runId"] for p in started] == [run_id]
    deltas = [p for p in run_events if p.get("type") == "delta"]
    assert [(d["runId"], d["seq"], d["text"]) for d in deltas] == [
        (run_id, 1, "second "),
        (run_id, 2, "try"),
    ]
