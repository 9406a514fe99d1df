"""The scheduler in a real daemon: jobs added over the wire fire on the timer through the session
port (the scripted model answers), each fire publishes one ``cron_run_started`` and one
``cron_run_completed`` on ``cron``, the summary reaches the base session as a ``run_completed``
with origin cron, the EventBridge carries the events to operators, heartbeats suppress
``HEARTBEAT_OK`` in terminalization, and the methods exist only while the scheduler runs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from lemon_automation import AutomationApp
from lemon_automation.fire import cron_run_id, router_run_id
from lemon_automation.runs import CronRun
from lemon_automation.service import (
    FORWARD_CAP_BYTES,
    AutomationService,
    JobSpec,
    cap_bytes,
    checklist_is_empty,
    is_suppressed,
)
from lemon_control_plane import ControlPlane
from lemon_control_plane.testing import ClientFactory, plane_client
from lemon_core.bus import Subscription
from lemon_core.bus.topics import session_topic
from lemon_core.wire_methods import WIRE_METHODS
from lemon_runtime import Runtime

MAIN = "agent:default:main"
WAIT_S = 20.0


async def next_of(sub: Subscription, *types: str, **fields: Any) -> Any:
    """The next event on ``sub`` of one of ``types`` whose payload has ``fields``."""

    async with asyncio.timeout(WAIT_S):  # read in this task: it owns the delivery
        while True:
            event = await sub.get()
            if event.type in types and all(
                getattr(event.payload, k, None) == v for k, v in fields.items()
            ):
                return event


async def test_an_every_job_fires_on_the_timer_with_one_start_and_one_completion(
    runtime: Runtime, client: ClientFactory, service: AutomationService
) -> None:
    cron = runtime.bus.subscribe("cron")
    main = runtime.bus.subscribe(session_topic(MAIN))
    async with client() as c:
        job = (
            await c.call(
                "cron.add",
                {"name": "hello", "schedule": "every 1s", "prompt": "/echo hello from cron"},
            )
        )["job"]
        assert job["schedule"] == "every 1s"
        assert job["nextDueAtMs"] == job["anchorMs"] + 1000
        created = await next_of(cron, "cron_job_created")
        assert created.payload.job_id == job["id"]
        assert created.payload.job["next_run_at_ms"] == job["nextDueAtMs"]

        started = await next_of(cron, "cron_run_started", job_id=job["id"])
        completed = await next_of(cron, "cron_run_completed", job_id=job["id"])
        assert completed.payload.cron_run_id == started.payload.cron_run_id
        assert completed.payload.router_run_id == started.payload.router_run_id
        assert completed.payload.status == "completed"
        assert completed.payload.output == "hello from cron"
        assert completed.payload.suppressed is False
        assert started.payload.triggered_by == "schedule"
        assert started.payload.session_key == f"{MAIN}:sub:cron_{job['id']}"

        forwarded = await next_of(main, "run_completed")
        assert forwarded.meta["origin"] == "cron"
        assert forwarded.payload.completed.answer == "hello from cron"
        assert forwarded.payload.completed.run_id == completed.payload.router_run_id

        # the bridge carries them to operators (cron, cron.job, tick)
        wire_done = await c.event("cron", type="run_completed", jobId=job["id"])
        assert wire_done["payload"]["cronRunId"] == completed.payload.cron_run_id
        assert wire_done["stateVersion"]["cron"] >= 1
        tick = await c.event("tick")
        assert isinstance(tick["payload"]["timestampMs"], int)

        await c.call("cron.pause", {"id": job["id"]})
        runs = (await c.call("cron.runs", {"id": job["id"], "limit": 5}))["runs"]
        assert runs, runs
        first = runs[-1]
        assert first["status"] == "completed"
        assert first["triggeredBy"] == "schedule"
        assert first["owner"] == service.owner
        assert first["output"] == "hello from cron"
        dues = [r["dueAtMs"] for r in runs]
        assert dues == sorted(dues, reverse=True)
        assert len(set(dues)) == len(dues)
        removed = await c.call("cron.remove", {"id": job["id"]})
        assert removed["removed"] is True
        deleted = await next_of(cron, "cron_job_deleted")
        assert deleted.payload.job is None
        assert (await c.call("cron.list"))["jobs"] == []
    cron.cancel()
    main.cancel()


async def test_each_fire_is_started_and_completed_once(
    runtime: Runtime, client: ClientFactory
) -> None:
    cron = runtime.bus.subscribe("cron")
    async with client() as c:
        job = (
            await c.call("cron.add", {"name": "n", "schedule": "every 1s", "prompt": "/echo n"})
        )["job"]
        done: list[Any] = []
        starts: dict[str, int] = {}
        while len(done) < 3:
            event = await next_of(cron, "cron_run_started", "cron_run_completed", job_id=job["id"])
            if event.type == "cron_run_started":
                starts[event.payload.cron_run_id] = starts.get(event.payload.cron_run_id, 0) + 1
            else:
                done.append(event.payload.cron_run_id)
        await c.call("cron.remove", {"id": job["id"]})
    assert len(set(done)) == 3
    assert all(starts.get(cid) == 1 for cid in done)
    cron.cancel()


async def test_cron_run_wait_answers_and_bad_input_is_invalid_params(
    client: ClientFactory,
) -> None:
    async with client() as c:
        job = (
            await c.call(
                "cron.add", {"name": "manual", "schedule": "0 9 * * *", "prompt": "/echo now"}
            )
        )["job"]
        assert job["timezone"]  # stored explicitly
        ran = await c.call("cron.run", {"id": job["id"], "wait": True})
        assert ran["status"] == "completed"
        assert ran["output"] == "now"
        assert ran["triggeredBy"] == "manual"
        status = await c.call("cron.status")
        assert status["enabled"] is True
        assert status["jobs"] == 1
        for method, params, needle in (
            ("cron.add", {"name": "x", "schedule": "61 * * * *", "prompt": "p"}, "cron"),
            (
                "cron.add",
                {"name": "x", "schedule": "0 9 * * *", "prompt": "p", "timezone": "Mars/Base"},
                "Mars/Base",
            ),
            ("cron.add", {"name": "x", "schedule": "every 0s", "prompt": "p"}, "every"),
            ("cron.add", {"name": "manual", "schedule": "every 5s", "prompt": "p"}, "exists"),
            ("cron.add", {"name": "x", "schedule": "every 5s", "prompt": " "}, "prompt"),
            ("cron.add", {"name": "x", "schedule": "every 5s", "command": "ls"}, "command"),
            ("cron.update", {"id": job["id"], "agentId": "other"}, "immutable"),
            ("cron.update", {"id": job["id"], "colour": "red"}, "unknown field"),
            ("cron.remove", {"id": "job_nope"}, "no job"),
            ("set-heartbeats", {}, "enabled is required"),
        ):
            res = await c.request(method, params)
            assert res["error"]["code"] == "INVALID_PARAMS", (method, params, res)
            assert needle in res["error"]["message"], (needle, res)
        assert len((await c.call("cron.list"))["jobs"]) == 1


async def test_heartbeat_ok_is_suppressed_before_anything_is_published_or_forwarded(
    runtime: Runtime, client: ClientFactory
) -> None:
    cron = runtime.bus.subscribe("cron")
    main = runtime.bus.subscribe(session_topic(MAIN))
    async with client() as c:
        hb = await c.call(
            "set-heartbeats",
            {"enabled": True, "intervalMs": 3_600_000, "prompt": "/echo   HEARTBEAT_OK  "},
        )
        assert hb["heartbeat"]["purpose"] == "heartbeat"
        assert hb["heartbeat"]["sessionKey"] == "agent:default:main:sub:heartbeat"
        await c.call("wake", {"agentId": "default"})
        completed = await next_of(cron, "cron_run_completed")
        assert completed.payload.suppressed is True
        assert completed.payload.status == "completed"
        suppressed = await next_of(cron, "heartbeat_suppressed")
        assert suppressed.payload.run_id == completed.payload.router_run_id
        wire = await c.event("heartbeat", type="suppressed")
        assert wire["payload"]["agentId"] == "default"
        last = await c.call("last-heartbeat", {"agentId": "default"})
        assert last["last"]["suppressed"] is True

        await c.call("set-heartbeats", {"enabled": True, "prompt": "/echo Status: OK"})
        await c.call("wake", {})
        alert = await next_of(cron, "heartbeat_alert")
        assert alert.payload.response == "Status: OK"
        assert alert.payload.severity == "warning"
        forwarded = await next_of(main, "run_completed")
        assert forwarded.payload.completed.answer == "Status: OK"
        assert forwarded.meta["origin"] == "cron"

        await c.call("set-heartbeats", {"enabled": False})
        assert (await c.call("last-heartbeat", {}))["heartbeat"] is None
    cron.cancel()
    main.cancel()


async def test_an_empty_checklist_skips_the_heartbeat_with_no_model_call(
    runtime: Runtime, client: ClientFactory, service: AutomationService
) -> None:
    workspace = Path(runtime.home) / "agent" / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "HEARTBEAT.md").write_text(
        "# Heartbeat checklist\n\n<!-- add tasks below -->\n## Later\n- \n", encoding="utf-8"
    )
    cron = runtime.bus.subscribe("cron")
    async with client() as c:
        await c.call("set-heartbeats", {"enabled": True, "prompt": "/echo should not run"})
        await c.call("wake", {})
        audit = await next_of(cron, "cron_lifecycle_action")
        while audit.payload.audit.get("action") != "run_skipped":
            audit = await next_of(cron, "cron_lifecycle_action")
        assert audit.payload.audit["reason"] == "empty_checklist"
        last = (await c.call("last-heartbeat", {}))["last"]
        assert last["status"] == "skipped"
        assert last["reason"] == "empty_checklist"
    assert service.counters.fired == 0
    assert await service.port.runs(limit=5) == []
    cron.cancel()


def test_the_forwarded_summary_is_capped_at_12000_bytes_on_a_character_boundary() -> None:
    text = "é" * 7000  # 14,000 bytes
    capped = cap_bytes(text)
    assert len(capped.encode()) <= FORWARD_CAP_BYTES
    assert capped == "é" * 6000


async def test_nothing_starts_in_the_chat_runtime_unless_enabled(
    boot: Callable[..., Runtime],
) -> None:
    async with boot(profile="full") as rt:
        app = rt.handle("lemon_automation")
        assert isinstance(app, AutomationApp)
        assert app.service is None
        assert not [n for n in rt.context.capabilities.require(WIRE_METHODS).names() if "cron" in n]
    async with boot("[automation]\nenabled = true\n", profile="full") as rt:
        app = rt.handle("lemon_automation")
        assert isinstance(app, AutomationApp)
        assert app.service is not None
        assert "cron.list" in rt.context.capabilities.require(WIRE_METHODS).names()


async def test_disabled_in_the_daemon_advertises_no_cron_method(
    boot: Callable[..., Runtime],
) -> None:
    async with boot("[automation]\nenabled = false\n") as rt:
        plane = rt.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        async with plane_client(plane)() as c:
            res = await c.request("cron.list", {})
            assert res["ok"] is False
            hello = c.frames[0]
            methods = hello["features"]["methods"]
            assert "cron.list" not in methods
    async with boot() as rt:
        plane = rt.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        async with plane_client(plane)() as c:
            methods = c.frames[0]["features"]["methods"]
            for name in ("cron.list", "cron.add", "wake", "set-heartbeats", "last-heartbeat"):
                assert name in methods


@pytest.mark.parametrize(
    ("answer", "suppressed"),
    [
        ("HEARTBEAT_OK", True),
        ("  HEARTBEAT_OK\n", True),
        ("HEARTBEAT_OK extra", False),
        ("Status: OK", False),
        ("heartbeat_ok", False),
        ("", False),
        (None, False),
    ],
)
def test_suppressed_exactly_when_the_answer_trims_to_heartbeat_ok(
    answer: str | None, suppressed: bool
) -> None:
    assert is_suppressed(answer) is suppressed


@pytest.mark.parametrize(
    ("text", "empty"),
    [
        ("", True),
        ("# Heartbeat\n\n## Daily\n", True),
        ("<!--\n- check the build\n-->\n# Tasks\n- [ ]\n", True),
        ("# Tasks\n- check the build\n", False),
        ("check mail", False),
    ],
)
def test_an_empty_checklist_is_judged_on_the_files_content(text: str, empty: bool) -> None:
    assert checklist_is_empty(text) is empty


async def test_an_empty_heartbeat_answer_is_an_alert_never_an_empty_message(
    runtime: Runtime, client: ClientFactory
) -> None:
    cron = runtime.bus.subscribe("cron")
    main = runtime.bus.subscribe(session_topic(MAIN))
    async with client() as c:
        await c.call("set-heartbeats", {"enabled": True, "prompt": "/echo"})
        await c.call("wake", {})
        completed = await next_of(cron, "cron_run_completed")
        assert completed.payload.suppressed is False
        alert = await next_of(cron, "heartbeat_alert")
        assert alert.payload.response == "the heartbeat produced no answer"
        forwarded = await next_of(main, "run_completed")
        assert forwarded.payload.completed.answer == "the heartbeat produced no answer"
    cron.cancel()
    main.cancel()


async def test_a_run_past_its_timeout_is_cancelled_then_recorded_timeout(
    client: ClientFactory,
) -> None:
    hold = '/tool bash {"command": "echo never"}'  # waits for an approval nobody gives
    async with client() as c:
        job = (
            await c.call(
                "cron.add",
                {"name": "slow", "schedule": "every 1h", "prompt": hold, "timeoutSec": 1},
            )
        )["job"]
        ran = await c.call("cron.run", {"id": job["id"], "wait": True, "timeoutSec": 30})
        assert ran["status"] == "timeout"
        assert "did not end within 1 s" in ran["error"]
        (record,) = (await c.call("cron.runs", {"id": job["id"]}))["runs"]
        assert record["status"] == "timeout"


async def test_an_at_job_fires_once_and_then_ends_itself(
    runtime: Runtime, client: ClientFactory
) -> None:
    cron = runtime.bus.subscribe("cron")
    when = datetime.now(UTC) + timedelta(seconds=1)
    async with client() as c:
        job = (
            await c.call(
                "cron.add",
                {"name": "once", "schedule": f"at {when.isoformat()}", "prompt": "/echo once"},
            )
        )["job"]
        done = await next_of(cron, "cron_run_completed", job_id=job["id"])
        assert done.payload.output == "once"
        (listed,) = (await c.call("cron.list"))["jobs"]
        assert listed["enabled"] is False
        assert listed["nextDueAtMs"] is None
    cron.cancel()


async def test_a_heartbeat_while_the_users_run_is_active_is_skipped_busy(
    runtime: Runtime, client: ClientFactory, service: AutomationService
) -> None:
    hold = '/tool bash {"command": "echo never"}'  # waits for an approval nobody gives
    async with client() as c:
        held = await c.call("chat.send", {"sessionKey": MAIN, "prompt": hold})
        await c.event("exec.approval.requested", runId=held["runId"])
        await c.call("set-heartbeats", {"enabled": True, "prompt": "/echo HEARTBEAT_OK"})
        await c.call("wake", {})
        last = (await c.call("last-heartbeat", {}))["last"]
        assert last["status"] == "skipped"
        assert last["reason"] == "busy"
        assert service.counters.fired == 0
        await c.call("chat.abort", {"sessionKey": MAIN})


async def test_a_failed_fire_is_retried_max_retries_times_and_a_manual_run_never(
    boot: Callable[..., Runtime],
) -> None:
    hold = '/tool bash {"command": "echo never"}'  # waits for an approval nobody gives
    config = "[automation]\nretry_backoff_ms = 100\n"
    async with boot(config, tick_s=0.2) as rt:
        app = rt.handle("lemon_automation")
        assert isinstance(app, AutomationApp)
        assert app.service is not None
        service = app.service
        plane = rt.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        cron = rt.bus.subscribe("cron")
        when = datetime.now(UTC) + timedelta(seconds=1)
        async with plane_client(plane)() as c:
            job = (
                await c.call(
                    "cron.add",
                    {
                        "name": "flaky",
                        "schedule": f"at {when.isoformat()}",
                        "prompt": hold,
                        "timeoutSec": 1,
                        "maxRetries": 1,
                    },
                )
            )["job"]
            first = await next_of(cron, "cron_run_completed", job_id=job["id"])
            assert first.payload.status == "timeout"
            retry_start = await next_of(cron, "cron_run_started", job_id=job["id"])
            assert retry_start.payload.triggered_by == "retry"
            assert retry_start.payload.cron_run_id != first.payload.cron_run_id
            second = await next_of(cron, "cron_run_completed", job_id=job["id"])
            assert second.payload.cron_run_id == retry_start.payload.cron_run_id
            assert second.payload.status == "timeout"
            # the retry's end was the last attempt: nothing more is planned
            assert await service.runs.retries() == []
            runs = (await c.call("cron.runs", {"id": job["id"]}))["runs"]
            assert [r["triggeredBy"] for r in runs] == ["retry", "schedule"]
            assert runs[0]["attempt"] == 1
            assert runs[0]["retryOf"] == first.payload.cron_run_id
            assert runs[1]["attempt"] == 0
            assert service.counters.errors == []

            # a manual run that fails is never retried
            manual = (
                await c.call(
                    "cron.add",
                    {
                        "name": "manual",
                        "schedule": "every 1h",
                        "prompt": hold,
                        "timeoutSec": 1,
                        "maxRetries": 3,
                    },
                )
            )["job"]
            ran = await c.call("cron.run", {"id": manual["id"], "wait": True, "timeoutSec": 30})
            assert ran["status"] == "timeout"
            assert await service.runs.retries() == []
            assert len((await c.call("cron.runs", {"id": manual["id"]}))["runs"]) == 1
            bad = await c.request(
                "cron.add",
                {"name": "x", "schedule": "every 1h", "prompt": "/echo x", "maxRetries": 11},
            )
            assert bad["error"]["code"] == "INVALID_PARAMS"
            assert (
                "max_retries" in bad["error"]["message"] or "maxRetries" in bad["error"]["message"]
            )
        cron.cancel()


async def test_a_fire_a_dead_owner_left_in_flight_is_interrupted_then_retried(
    boot: Callable[..., Runtime],
) -> None:
    config = "[automation]\nretry_backoff_ms = 100\nlease_ms = 2000\n"
    async with boot(config, tick_s=0.2) as rt:
        app = rt.handle("lemon_automation")
        assert isinstance(app, AutomationApp)
        assert app.service is not None
        service = app.service
        cron = rt.bus.subscribe("cron")
        job = await service.add(
            JobSpec(name="r", schedule="every 1h", prompt="/echo recovered", max_retries=1)
        )
        # a dead daemon claimed a due time, submitted it and stopped renewing
        due = job.created_at_ms + 7
        dead = await service.ledger.claim(job.id, due, "dead:1", lease_ms=60_000)
        assert dead is not None
        submitted = await service.ledger.record(
            dead, status="submitted", run_id=router_run_id(job.id, due)
        )
        assert submitted is not None
        await service.runs.put(
            CronRun(
                cron_run_id=cron_run_id(job.id, due),
                job_id=job.id,
                due_at_ms=due,
                status="submitted",
                owner="dead:1",
            )
        )
        assert await service.ledger.renew(submitted, lease_ms=1) is not None  # then it died
        interrupted = await next_of(cron, "cron_run_completed", job_id=job.id)
        assert interrupted.payload.status == "interrupted"
        assert interrupted.payload.cron_run_id == cron_run_id(job.id, due)
        started = await next_of(cron, "cron_run_started", job_id=job.id)
        assert started.payload.triggered_by == "retry"
        assert started.payload.cron_run_id == cron_run_id(job.id, due + 1)
        done = await next_of(cron, "cron_run_completed", job_id=job.id)
        assert done.payload.cron_run_id == started.payload.cron_run_id
        assert done.payload.status == "completed"
        assert done.payload.output == "recovered"
        assert await service.runs.retries() == []
        # the interrupted fire itself was never re-executed: one router run, the retry's
        ended = await service.ledger.get(job.id, due)
        assert ended is not None
        assert ended.status == "interrupted"
        cron.cancel()


async def test_cron_and_heartbeat_runs_are_denied_the_cron_tool_by_their_tool_policy(
    runtime: Runtime, service: AutomationService, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = await service.add(JobSpec(name="t", schedule="every 1h", prompt="/tools"))
    request = service._request_for(job, job.created_at_ms)
    assert request.tool_policy is not None
    assert "cron" in request.tool_policy.deny
    assert not request.tool_policy.permits("cron")
    hb = await service.set_heartbeat("default", enabled=True, every="30m")
    assert hb is not None
    hb_policy = service._request_for(hb, 0).tool_policy
    assert hb_policy is not None
    assert "cron" in hb_policy.deny
    # the policy reaches the executor: with bash in the blocked set, a call of it is refused
    monkeypatch.setattr("lemon_automation.service.CRON_BLOCKED_TOOLS", {"cron", "bash"})
    _, _, after = await service.run_now(job.id, prompt='/tool bash {"command": "echo hi"}')
    refused = await asyncio.wait_for(after, WAIT_S)
    assert refused.status == "completed", refused  # refused at once, no approval wait
    assert "denied by this run's tool policy" in (refused.output or "")


async def test_cron_abort_cancels_an_active_fire_and_records_it_aborted(
    runtime: Runtime, client: ClientFactory
) -> None:
    hold = '/tool bash {"command": "echo never"}'  # waits for an approval nobody gives
    cron = runtime.bus.subscribe("cron")
    async with client() as c:
        job = (
            await c.call(
                "cron.add",
                {"name": "long", "schedule": "every 1h", "prompt": hold, "maxRetries": 2},
            )
        )["job"]
        cid = (await c.call("cron.run", {"id": job["id"]}))["cronRunId"]
        await next_of(cron, "cron_run_started", cron_run_id=cid)
        aborted = await c.call("cron.abort", {"runId": cid})
        assert aborted["aborted"] is True
        assert aborted["runId"] == cid
        assert aborted["jobId"] == job["id"]
        assert aborted["status"] == "aborted"
        done = await next_of(cron, "cron_run_completed", cron_run_id=cid)
        assert done.payload.status == "aborted"
        (record,) = (await c.call("cron.runs", {"id": job["id"]}))["runs"]
        assert record["status"] == "aborted"
        again = await c.request("cron.abort", {"runId": cid})
        assert again["error"]["code"] == "INVALID_PARAMS"
        assert "not active" in again["error"]["message"]
        for params in ({}, {"runId": "cron_nope"}):
            res = await c.request("cron.abort", params)
            assert res["error"]["code"] == "INVALID_PARAMS", res

        # cron.audit: the durable lifecycle entries, newest first, filtered
        audit = await c.call("cron.audit", {"jobId": job["id"]})
        actions = [e["action"] for e in audit["events"]]
        assert actions[0] == "run_aborted"
        assert actions[-1] == "job_created"
        assert audit["total"] == len(actions)
        assert audit["filters"]["jobId"] == job["id"]
        assert audit["events"][0]["runId"] == cid
        only = await c.call("cron.audit", {"action": "run_aborted", "limit": 5})
        assert [e["runId"] for e in only["events"]] == [cid]
        assert only["summary"]["actionCounts"] == {"run_aborted": 1}
        late = await c.call("cron.audit", {"sinceMs": audit["events"][0]["tsMs"] + 1})
        assert late["events"] == []
        bad = await c.request("cron.audit", {"limit": "many"})
        assert bad["error"]["code"] == "INVALID_PARAMS"
    cron.cancel()


async def test_history_keep_per_job_prunes_older_fires_and_their_records(
    boot: Callable[..., Runtime],
) -> None:
    async with boot("[automation]\nhistory_keep_per_job = 3\n", tick_s=0.2) as rt:
        app = rt.handle("lemon_automation")
        assert isinstance(app, AutomationApp)
        assert app.service is not None
        service = app.service
        job = await service.add(JobSpec(name="k", schedule="every 1h", prompt="/echo kept"))
        other = await service.add(JobSpec(name="o", schedule="every 1h", prompt="/echo other"))
        _, _, first = await service.run_now(other.id)
        assert (await asyncio.wait_for(first, WAIT_S)).status == "completed"
        cids = []
        for _ in range(5):
            _, cid, done = await service.run_now(job.id)
            assert (await asyncio.wait_for(done, WAIT_S)).status == "completed"
            cids.append(cid)
        kept = await service.history(job.id, limit=100)
        assert [r.cron_run_id for r in kept] == cids[:-4:-1]  # the newest three
        assert len(await service.ledger.fires(job.id)) == 3
        for old in cids[:2]:
            assert await service.runs.get(old) is None
        assert len(await service.history(other.id, limit=100)) == 1  # per job


async def test_a_heartbeat_outside_its_active_hours_is_skipped_and_a_wake_still_runs(
    runtime: Runtime, client: ClientFactory, service: AutomationService
) -> None:
    cron = runtime.bus.subscribe("cron")
    now = datetime.now(UTC)
    start = (now + timedelta(hours=2)).strftime("%H:%M")
    end = (now + timedelta(hours=3)).strftime("%H:%M")
    async with client() as c:
        hb = (
            await c.call(
                "set-heartbeats",
                {
                    "enabled": True,
                    "intervalMs": 1000,
                    "activeHours": {"start": start, "end": end},
                    "timezone": "UTC",
                },
            )
        )["heartbeat"]
        assert hb["activeHours"] == f"{start}-{end}"
        assert hb["timezone"] == "UTC"
        async with asyncio.timeout(WAIT_S):
            while True:
                event = await next_of(cron, "cron_lifecycle_action", "cron_run_started")
                assert event.type == "cron_lifecycle_action", "a heartbeat ran outside its hours"
                if event.payload.audit.get("reason") == "outside_active_hours":
                    break
        runs = (await c.call("cron.runs", {"id": hb["id"]}))["runs"]
        assert runs
        assert {(r["status"], r["reason"]) for r in runs} == {("skipped", "outside_active_hours")}
        # an explicit wake is not held to the active hours
        woke = await c.call("wake", {"message": "/echo HEARTBEAT_OK"})
        started = await next_of(cron, "cron_run_started", cron_run_id=woke["cronRunId"])
        assert started.payload.triggered_by == "wake"
        # {} clears them
        cleared = await c.call("set-heartbeats", {"enabled": True, "activeHours": {}})
        assert cleared["heartbeat"]["activeHours"] is None
        for bad in ("25:00-26:00", "09:00-09:00", "9-5", {"start": "09:00"}):
            res = await c.request("set-heartbeats", {"enabled": True, "activeHours": bad})
            assert res["error"]["code"] == "INVALID_PARAMS", (bad, res)
            assert "ctive" in res["error"]["message"], res
        res = await c.request("set-heartbeats", {"enabled": True, "timezone": "Mars/Base"})
        assert res["error"]["code"] == "INVALID_PARAMS"
        await c.call("set-heartbeats", {"enabled": False})
    cron.cancel()


@pytest.mark.parametrize(
    ("hours", "tz", "instant", "inside"),
    [
        ("09:00-18:00", "UTC", "2026-03-02T09:00:00+00:00", True),
        ("09:00-18:00", "UTC", "2026-03-02T18:00:00+00:00", False),  # the end is excluded
        ("22:00-06:00", "UTC", "2026-03-02T23:30:00+00:00", True),  # spans midnight
        ("22:00-06:00", "UTC", "2026-03-02T05:59:00+00:00", True),
        ("22:00-06:00", "UTC", "2026-03-02T12:00:00+00:00", False),
        ("09:00-18:00", "America/New_York", "2026-03-02T13:30:00+00:00", False),  # 08:30 EST
        ("09:00-18:00", "America/New_York", "2026-03-02T14:30:00+00:00", True),  # 09:30 EST
        ("09:00-24:00", "UTC", "2026-03-02T23:59:00+00:00", True),
    ],
)
def test_active_hours_are_judged_in_the_jobs_timezone(
    hours: str, tz: str, instant: str, inside: bool
) -> None:
    from lemon_automation.jobs import Job, in_active_hours

    job = Job(id="h", name="h", kind="every", expr="30m", prompt="p", timezone=tz)
    job = msgspec.structs.replace(job, active_hours=hours)
    at_ms = int(datetime.fromisoformat(instant).timestamp() * 1000)
    assert in_active_hours(job, at_ms) is inside


async def test_a_fire_whose_run_end_never_reaches_this_daemon_ends_from_the_run_history(
    runtime: Runtime, service: AutomationService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With daemons that share only the store, a fire handed to the session's owner runs
    there, and its end is on the owner's bus. The fire learns of it from the shared run
    history within ``history_poll_s``, not at the job's timeout (an hour here)."""
    # this daemon's run-end stream sees no fire's end, as when another daemon executed it
    monkeypatch.setattr("lemon_automation.service._FIRE_RUNS", "run_elsewhere_")
    service.history_poll_s = 0.1
    job = await service.add(
        JobSpec(name="far", schedule="every 1h", prompt="/echo far", timeout_ms=3_600_000)
    )
    _, cid, after = await service.run_now(job.id)
    done = await asyncio.wait_for(after, WAIT_S)
    assert done.status == "completed", done
    assert done.cron_run_id == cid
    fire = await service.ledger.get(job.id, done.due_at_ms)
    assert fire is not None
    assert fire.status == "completed"
