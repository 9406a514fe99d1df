"""The heartbeat's own limits in a real daemon: ``pause_after_idle_days`` without a user run
pauses it (one ``heartbeat_paused`` audit, one alert, no later fire; ``set-heartbeats``
re-arms it), and the agent's ``daily_cost_cap_usd`` (its runs' reported spend today, from the
run history) skips its scheduled fires as ``daily_cost_cap`` with one alert for the day while
a ``wake`` still runs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lemon_automation import AutomationApp
from lemon_automation.jobs import JobStore
from lemon_automation.runs import CronRunStore
from lemon_automation.service import AutomationService
from lemon_control_plane import ControlPlane
from lemon_control_plane.testing import plane_client
from lemon_core.bus import Bus, Subscription
from lemon_core.events import RunUsage
from lemon_core.store import RunStore, RunSummary
from lemon_infra import MemoryFireLedger, SQLiteStore
from lemon_runtime import Runtime

WAIT_S = 20.0


def parts(rt: Runtime) -> tuple[AutomationService, ControlPlane]:
    app = rt.handle("lemon_automation")
    assert isinstance(app, AutomationApp)
    assert app.service is not None
    plane = rt.handle("lemon_control_plane")
    assert isinstance(plane, ControlPlane)
    return app.service, plane


async def lifecycle(sub: Subscription, action: str) -> Any:
    async with asyncio.timeout(WAIT_S):
        while True:
            event = await sub.get()
            if event.type == "cron_lifecycle_action" and event.payload.audit["action"] == action:
                return event.payload.audit


async def test_an_idle_heartbeat_pauses_itself_with_one_alert_and_set_heartbeats_rearms_it(
    boot: Callable[..., Runtime],
) -> None:
    # 0.00003 days is about 2.6 s: the heartbeat (every 1s) is idle after a few fires
    async with boot("[automation]\npause_after_idle_days = 0.00003\n", tick_s=0.2) as rt:
        service, plane = parts(rt)
        cron = rt.bus.subscribe("cron")
        async with plane_client(plane)() as c:
            await c.call(
                "set-heartbeats",
                {"enabled": True, "intervalMs": 1000, "prompt": "/echo HEARTBEAT_OK"},
            )
            paused = await lifecycle(cron, "heartbeat_paused")
            assert paused["reason"] == "idle"
            hb = (await c.call("last-heartbeat", {}))["heartbeat"]
            assert hb["enabled"] is False
            assert hb["nextDueAtMs"] is None  # no later fire
            alert = await c.event("heartbeat", type="alert")
            assert "paused itself" in alert["payload"]["response"]
            assert service.counters.alerts == 1
            last = (await c.call("last-heartbeat", {}))["last"]
            assert (last["status"], last["reason"]) == ("skipped", "idle")

            await c.call("set-heartbeats", {"enabled": True})
            again = (await c.call("last-heartbeat", {}))["heartbeat"]
            assert again["enabled"] is True
            assert again["armedAtMs"] >= paused["ts_ms"]
        cron.cancel()


async def test_the_daily_cost_cap_skips_scheduled_heartbeats_with_one_alert_a_day(
    boot: Callable[..., Runtime],
) -> None:
    async with boot("[automation]\ndaily_cost_cap_usd = 0.5\n", tick_s=0.2) as rt:
        service, plane = parts(rt)
        now = time.time_ns() // 1_000_000
        # the agent's user run today reported $0.75
        await RunStore(rt.store).finalize(
            RunSummary(
                run_id="run_spent",
                session_key="agent:default:main",
                ok=True,
                started_at_ms=now - 10,
                finished_at_ms=now,
                usage=RunUsage(cost_usd=0.75, input_tokens=10, output_tokens=5),
            )
        )
        assert await service.spend_today_usd("default") == 0.75
        assert await service.spend_today_usd("other") == 0.0
        cron = rt.bus.subscribe("cron")
        async with plane_client(plane)() as c:
            await c.call(
                "set-heartbeats",
                {"enabled": True, "intervalMs": 1000, "prompt": "/echo HEARTBEAT_OK"},
            )
            capped = await lifecycle(cron, "heartbeat_capped")
            assert capped["reason"] == "daily_cost_cap"
            # two more scheduled fires are skipped the same way, with no second alert
            skips = 0
            async with asyncio.timeout(WAIT_S):
                while skips < 2:
                    event = await cron.get()
                    audit = getattr(event.payload, "audit", None)
                    if audit and audit.get("reason") == "daily_cost_cap":
                        skips += audit["action"] == "run_skipped"
                        assert audit["action"] != "heartbeat_capped"
            assert service.counters.alerts == 1
            assert service.counters.fired == 0  # no model call
            # a wake is the person asking: it runs
            woke = await c.call("wake", {})
            done = await service._done[woke["cronRunId"]]
            assert done.status == "completed", done
        cron.cancel()


async def test_audit_entries_past_audit_keep_days_are_pruned_in_bounded_batches(
    tmp_path: Path,
) -> None:
    now = time.time_ns() // 1_000_000
    day = 86_400_000
    async with await SQLiteStore.open(tmp_path / "store.sqlite3") as store:
        # a service that is not running: the test's calls are the only prunes
        service = AutomationService(
            jobs=JobStore(store),
            runs=CronRunStore(store),
            ledger=MemoryFireLedger(),
            port=None,
            bus=Bus(),
            owner="test",
            home=tmp_path,
            audit_keep_days=30,
        )
        for i in range(150):
            await service.runs.put_audit(
                {"id": f"audit_old{i}", "action": "job_created", "ts_ms": now - 40 * day + i}
            )
        await service.runs.put_audit({"id": "audit_new", "action": "job_created", "ts_ms": now})
        assert await service.prune_audits() == 100  # one bounded batch
        assert await service.prune_audits() == 50
        assert await service.prune_audits() == 0
        left = await service.runs.audits(limit=1000)
        assert [e["id"] for e in left] == ["audit_new"]
