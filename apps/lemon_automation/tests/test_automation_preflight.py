"""Preflight of a fire's credentials and skills, in a real daemon (the offline model is the
configured default): a job pinned to a model whose API key is not set, to a model this runtime
does not know, or naming a skill that is not installed is ``skipped: preflight: ...`` before any
run starts, with a ``cron_run_completed`` (status ``skipped``, the reason as its error), a
``run_skipped`` audit row and one alert per job and reason; a runnable job still runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from lemon_automation import AutomationApp
from lemon_automation.service import AutomationService
from lemon_control_plane import ControlPlane
from lemon_control_plane.testing import ClientFactory, plane_client
from lemon_core.bus import Bus
from lemon_core.events import CronRunCompleted
from lemon_runtime import Runtime


@pytest.fixture
async def daemon(
    boot: Callable[..., Runtime], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Runtime]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with boot(tick_s=0.2) as rt:
        yield rt


def _service(rt: Runtime) -> AutomationService:
    app = rt.handle("lemon_automation")
    assert isinstance(app, AutomationApp)
    assert app.service is not None
    return app.service


def _client(rt: Runtime) -> ClientFactory:
    plane = rt.handle("lemon_control_plane")
    assert isinstance(plane, ControlPlane)
    return plane_client(plane)


async def _completion(bus_events: Any, job_id: str) -> CronRunCompleted:
    async with asyncio.timeout(10):
        while True:
            event = await bus_events.get()
            if event.type == "cron_run_completed" and event.payload.job_id == job_id:
                payload = event.payload
                assert isinstance(payload, CronRunCompleted)
                return payload


async def _add(c: Any, name: str, **params: Any) -> dict[str, Any]:
    job: dict[str, Any] = (
        await c.call(
            "cron.add", {"name": name, "schedule": "0 9 * * *", "prompt": "/echo hi", **params}
        )
    )["job"]
    return job


async def test_a_model_without_its_key_is_skipped_with_a_completion_and_an_audit_row(
    daemon: Runtime,
) -> None:
    service = _service(daemon)
    bus: Bus = daemon.bus
    events = bus.subscribe("cron")
    async with _client(daemon)() as c:
        job = await _add(c, "pinned", model="openai:gpt-4o-mini")
        assert job["model"] == "openai:gpt-4o-mini"
        for _ in range(2):
            ran = await c.call("cron.run", {"id": job["id"], "wait": True})
            assert ran["status"] == "skipped", ran
            assert ran["reason"].startswith("preflight: model openai:gpt-4o-mini: ")
            assert "OPENAI_API_KEY is not set" in ran["reason"]
            done = await _completion(events, job["id"])
            assert done.status == "skipped"
            assert done.error == ran["reason"]
            assert done.router_run_id is None  # nothing was submitted
        assert service.counters.fired == 0  # no run, no model call
        assert service.counters.alerts == 1  # one alert per job and reason, not per fire
        audit = (await c.call("cron.audit", {"jobId": job["id"], "action": "run_skipped"}))[
            "events"
        ]
        assert len(audit) == 2
        assert all(e["reason"].startswith("preflight: model ") for e in audit)
    events.cancel()


async def test_an_unknown_model_and_a_missing_skill_are_skipped_and_a_runnable_job_runs(
    daemon: Runtime,
) -> None:
    service = _service(daemon)
    async with _client(daemon)() as c:
        unknown = await _add(c, "unknown", model="nosuch:model-9")
        ran = await c.call("cron.run", {"id": unknown["id"], "wait": True})
        assert ran["status"] == "skipped"
        assert ran["reason"].startswith("preflight: model nosuch:model-9: not known")

        skilled = await _add(c, "skilled", skills=["nightly-report"])
        assert skilled["skills"] == ["nightly-report"]
        ran = await c.call("cron.run", {"id": skilled["id"], "wait": True})
        assert ran["status"] == "skipped"
        assert ran["reason"] == (
            "preflight: skill 'nightly-report' is not installed or not usable "
            "(see lemon skills list)"
        )
        assert service.counters.fired == 0

        fine = await _add(c, "fine", model="offline:offline")
        ran = await c.call("cron.run", {"id": fine["id"], "wait": True})
        assert ran["status"] == "completed", ran
        assert service.counters.fired == 1


async def test_a_scheduled_fire_is_preflighted_too(daemon: Runtime) -> None:
    service = _service(daemon)
    events = daemon.bus.subscribe("cron")
    async with _client(daemon)() as c:
        job = (
            await c.call(
                "cron.add",
                {"name": "often", "schedule": "every 1s", "prompt": "/echo hi",
                 "model": "openai:gpt-4o-mini"},
            )
        )["job"]  # fmt: skip
        done = await _completion(events, job["id"])
        assert done.status == "skipped"
        assert (done.error or "").startswith("preflight: model openai:gpt-4o-mini: ")
        (run, *_) = (await c.call("cron.runs", {"id": job["id"]}))["runs"]
        assert run["status"] == "skipped"
        assert service.counters.fired == 0
    events.cancel()


async def test_bad_model_and_skills_are_refused_naming_the_field(daemon: Runtime) -> None:
    async with _client(daemon)() as c:
        for params, field in (
            ({"model": "gpt-4o"}, "model: "),
            ({"skills": ["../etc"]}, "skills: "),
            ({"skills": "x"}, "skills must be a list of strings"),
        ):
            bad = await c.request(
                "cron.add",
                {"name": "b", "schedule": "0 9 * * *", "prompt": "/echo x", **params},
            )
            assert bad["error"]["code"] == "INVALID_PARAMS", bad
            assert bad["error"]["message"].startswith(field), bad
        listed = (await c.call("cron.list", {}))["jobs"]
        assert listed == []


async def test_cron_update_changes_the_model_and_skills_with_the_checks_add_makes(
    daemon: Runtime,
) -> None:
    """``cron.update`` takes ``model`` / ``skills``: refused as ``cron.add`` refuses them
    (naming the field, nothing changed), and the new pin is what the next fire preflights."""
    async with _client(daemon)() as c:
        job = await _add(c, "later", model="offline:offline")
        ran = await c.call("cron.run", {"id": job["id"], "wait": True})
        assert ran["status"] == "completed", ran
        for params, field in (
            ({"model": "gpt-4o"}, "model: "),
            ({"model": 7}, "model must be a string"),
            ({"skills": ["../etc"]}, "skills: "),
            ({"skills": "x"}, "skills must be a list of strings"),
        ):
            bad = await c.request("cron.update", {"id": job["id"], **params})
            assert bad["error"]["code"] == "INVALID_PARAMS", bad
            assert bad["error"]["message"].startswith(field), bad
        (kept,) = (await c.call("cron.list", {}))["jobs"]
        assert (kept["model"], kept["skills"]) == ("offline:offline", [])

        moved = (await c.call("cron.update", {"id": job["id"], "model": "nosuch:model-9"}))["job"]
        assert moved["model"] == "nosuch:model-9"
        ran = await c.call("cron.run", {"id": job["id"], "wait": True})
        assert ran["status"] == "skipped"
        assert ran["reason"].startswith("preflight: model nosuch:model-9: not known")

        skilled = (
            await c.call(
                "cron.update", {"id": job["id"], "model": None, "skills": ["nightly-report"]}
            )
        )["job"]
        assert (skilled["model"], skilled["skills"]) == (None, ["nightly-report"])
        ran = await c.call("cron.run", {"id": job["id"], "wait": True})
        assert ran["status"] == "skipped"
        assert ran["reason"].startswith("preflight: skill 'nightly-report' is not installed")

        plain = (await c.call("cron.update", {"id": job["id"], "skills": []}))["job"]
        assert plain["skills"] == []
        ran = await c.call("cron.run", {"id": job["id"], "wait": True})
        assert ran["status"] == "completed", ran
