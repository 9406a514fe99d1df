"""The model-facing ``cron`` tool in a real daemon: a user's run of the native agent (the
offline scripted model calls the tool with ``/tool cron {...}``) lists, adds, updates, pauses,
resumes, runs and removes its own agent's jobs through lemon_automation's ``CRON_JOBS``; add,
update and remove wait for an approval; bad arguments are an error result naming the field
with nothing stored; another agent's jobs are invisible; cron runs are refused the tool."""

from __future__ import annotations

import json
from typing import Any

from lemon_automation.service import AutomationService, JobSpec
from lemon_control_plane.testing import ClientFactory, WireClient
from lemon_core.cron import CRON_JOBS
from lemon_runtime import Runtime

MAIN = "agent:default:main"


def tool(args: dict[str, Any]) -> str:
    return "/tool cron " + json.dumps(args)


async def ask(c: WireClient, args: dict[str, Any], *, approve: str | None = None) -> str:
    """Run the tool call in a user run; answer its approval with ``approve``; the answer."""
    sent = await c.call("chat.send", {"sessionKey": MAIN, "prompt": tool(args)})
    if approve is not None:
        asked = await c.event("exec.approval.requested", runId=sent["runId"])
        assert asked["payload"]["tool"] == "cron"
        await c.call(
            "exec.approval.resolve",
            {"approvalId": asked["payload"]["approvalId"], "decision": approve},
        )
    done = await c.completed(sent["runId"])
    asked_ids = [
        f for f in c.events("exec.approval.requested") if f["payload"].get("runId") == sent["runId"]
    ]
    assert (approve is not None) == bool(asked_ids), asked_ids
    return str(done["payload"]["answer"])


def result(answer: str) -> Any:
    head = "Offline: tool `cron` returned:\n"
    assert answer.startswith(head), answer
    return json.loads(answer.removeprefix(head))


async def test_the_agent_manages_its_own_jobs_through_the_cron_tool(
    runtime: Runtime, client: ClientFactory, service: AutomationService
) -> None:
    assert runtime.context.capabilities.get(CRON_JOBS) is not None
    other = await service.add(
        JobSpec(name="theirs", schedule="every 1h", prompt="/echo x", agent_id="other")
    )
    async with client() as c:
        assert result(await ask(c, {"action": "list"})) == {"jobs": []}

        added = result(
            await ask(
                c,
                {"action": "add", "name": "daily", "schedule": "daily at 9am",
                 "prompt": "/echo report", "timezone": "Europe/London"},
                approve="approve_once",
            )
        )["job"]  # fmt: skip
        assert added["name"] == "daily"
        assert added["schedule"] == "0 9 * * *"
        assert added["timezone"] == "Europe/London"
        stored = await service.get(added["id"])
        assert stored.agent_id == "default"
        assert stored.session_key is None  # its own sub-session per fire

        (listed,) = result(await ask(c, {"action": "list"}))["jobs"]
        assert listed["id"] == added["id"]
        assert listed["last_status"] is None

        paused = result(await ask(c, {"action": "pause", "id": added["id"]}))["job"]
        assert paused["enabled"] is False
        assert (await service.get(added["id"])).enabled is False
        resumed = result(await ask(c, {"action": "resume", "id": added["id"]}))["job"]
        assert resumed["enabled"] is True

        updated = result(
            await ask(
                c,
                {"action": "update", "id": added["id"], "prompt": "/echo new", "max_retries": 2},
                approve="approve_once",
            )
        )["job"]
        assert updated["prompt"] == "/echo new"
        assert updated["max_retries"] == 2

        ran = result(await ask(c, {"action": "run", "id": added["id"]}))
        assert ran["status"] == "submitted"
        record = await service._done[ran["cron_run_id"]]
        assert record.status == "completed"
        assert record.triggered_by == "manual"
        assert record.output == "new"

        # another agent's job is not this agent's: neither listed nor reachable
        refused = await ask(c, {"action": "pause", "id": other.id})
        assert "tool `cron` failed" in refused
        assert f"this agent has no job {other.id!r}" in refused
        assert (await service.get(other.id)).enabled is True

        removed = result(
            await ask(c, {"action": "remove", "id": added["id"]}, approve="approve_once")
        )
        assert removed == {"id": added["id"], "name": "daily", "removed": True}
        assert result(await ask(c, {"action": "list"})) == {"jobs": []}


async def test_a_denied_approval_changes_nothing(
    client: ClientFactory, service: AutomationService
) -> None:
    async with client() as c:
        answer = await ask(
            c,
            {"action": "add", "name": "n", "schedule": "every 1h", "prompt": "/echo n"},
            approve="deny",
        )
        assert "was not approved" in answer
    jobs, _ = await service.all_jobs()
    assert jobs == []


async def test_bad_arguments_are_an_error_naming_the_field_and_store_nothing(
    client: ClientFactory, service: AutomationService
) -> None:
    cases = [
        ({"action": "add", "name": "n", "schedule": "61 * * * *", "prompt": "/echo n"}, "61"),
        (
            {
                "action": "add",
                "name": "n",
                "schedule": "0 9 * * *",
                "prompt": "/echo n",
                "timezone": "Mars/Base",
            },
            "timezone",
        ),
        ({"action": "add", "name": "n", "schedule": "every 1h", "prompt": ""}, "prompt"),
        ({"action": "add", "name": "n", "schedule": "every 0s", "prompt": "/echo n"}, "every"),
        ({"action": "add", "schedule": "every 1h", "prompt": "/echo n"}, "name is required"),
        ({"action": "update", "id": "job_nope", "prompt": "x"}, "no job 'job_nope'"),
    ]
    async with client() as c:
        for args, needle in cases:
            answer = await ask(c, args, approve="approve_once")
            assert "tool `cron` failed" in answer, (args, answer)
            assert needle in answer, (args, answer)
            assert "nothing was changed" in answer
        # refused by the tool's schema before anything runs (no approval asked)
        for args, needle in [
            ({"action": "explode"}, "action"),
            ({"action": "list", "session_key": "agent:x:main"}, "session_key"),
            ({"action": "pause"}, "id is required"),
        ]:
            answer = await ask(c, args)
            assert "failed" in answer, (args, answer)
            assert needle in answer, (args, answer)
    jobs, _ = await service.all_jobs()
    assert jobs == []


async def test_the_tool_updates_the_model_pin_and_the_skills_and_refuses_bad_ones(
    client: ClientFactory, service: AutomationService
) -> None:
    job = await service.add(JobSpec(name="pin", schedule="every 1h", prompt="/echo x"))
    async with client() as c:
        changed = result(
            await ask(
                c,
                {"action": "update", "id": job.id, "model": "offline:offline",
                 "skills": ["nightly-report"]},
                approve="approve_once",
            )
        )  # fmt: skip
        assert (changed["job"]["model"], changed["job"]["skills"]) == (
            "offline:offline",
            ["nightly-report"],
        )
        for args, needle in (
            ({"model": "gpt-4o"}, "model: 'gpt-4o' is not provider:model"),
            ({"skills": ["../etc"]}, "skills: '../etc' is not a skill name"),
        ):
            answer = await ask(
                c, {"action": "update", "id": job.id, **args}, approve="approve_once"
            )
            assert "tool `cron` failed" in answer, (args, answer)
            assert needle in answer, (args, answer)
            assert "nothing was changed" in answer
        unpinned = result(
            await ask(
                c, {"action": "update", "id": job.id, "model": "", "skills": []},
                approve="approve_once",
            )
        )  # fmt: skip
        assert (unpinned["job"]["model"], unpinned["job"]["skills"]) == (None, [])
    stored = await service.get(job.id)
    assert (stored.model, stored.skills) == (None, ())


async def test_a_cron_run_is_refused_the_cron_tool(service: AutomationService) -> None:
    job = await service.add(JobSpec(name="t", schedule="every 1h", prompt=tool({"action": "list"})))
    _, _, done = await service.run_now(job.id)
    record = await done
    assert record.status == "completed", record
    assert "denied by this run's tool policy" in (record.output or "")
