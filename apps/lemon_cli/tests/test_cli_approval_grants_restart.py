"""Through the booted runtime: an "always" grant made in one runtime is in force in the next
one on the same home (coding_agent's hook persists grants in the runtime's store)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lemon_core.bus import EXEC_APPROVALS, Delivery
from lemon_core.capabilities import APPROVALS
from lemon_core.config import load_config
from lemon_core.events import ApprovalRequested
from lemon_runtime import Runtime


def sqlite_runtime(tmp_path: Path) -> Runtime:
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    loaded = load_config(home=home, cwd=tmp_path, environ={})
    return Runtime(profile="execution-only", config=loaded, store="sqlite")


async def test_an_always_grant_survives_a_runtime_restart(tmp_path: Path) -> None:
    action = {"command": "make test"}
    async with sqlite_runtime(tmp_path) as runtime:
        approvals = runtime.context.capabilities.require(APPROVALS)
        assert approvals.statistics().persistent
        sub = runtime.bus.subscribe(EXEC_APPROVALS, delivery=Delivery(bind_current_task=False))
        task = asyncio.ensure_future(approvals.request(tool="bash", action=action, agent_id="a"))
        event = await asyncio.wait_for(sub.get(), 10)
        assert isinstance(event.payload, ApprovalRequested)
        approvals.resolve(event.payload.approval_id, "approve_global")
        assert (await task).persisted is True
        sub.cancel()
    assert (tmp_path / "home" / "store" / "lemon.sqlite3").is_file()

    async with sqlite_runtime(tmp_path) as runtime:
        approvals = runtime.context.capabilities.require(APPROVALS)
        assert approvals.statistics().grants_loaded == 1
        assert approvals.granted("bash", action) == "global"
        outcome = await approvals.request(tool="bash", action=action, agent_id="b")
        assert outcome.from_grant == "global"
        assert approvals.granted("bash", {"command": "make clean"}) is None
