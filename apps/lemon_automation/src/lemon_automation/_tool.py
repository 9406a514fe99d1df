"""What the model-facing ``cron`` tool calls: :class:`AgentCronJobs`, the service as
:class:`lemon_core.cron.CronJobs` (registered under ``CRON_JOBS`` while the scheduler runs).

Every action is scoped to the calling run's agent: ``list`` shows that agent's cron jobs (not
its heartbeat, which ``set-heartbeats`` manages), and a job id of another agent is "no such
job" (the tool never reveals or touches another agent's jobs). ``add`` always makes a job of
the caller's agent in its default sub-session (a run cannot pick another session). Arguments
are the tool's (snake case): unknown ones and bad values are refused with a one-line
:class:`~lemon_core.errors.UsageError` naming the field; nothing is stored then.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from lemon_automation._wire import _bool, _int, _str, _strings, pins
from lemon_automation.jobs import Job, JobError
from lemon_automation.schedule import ScheduleError
from lemon_automation.service import AutomationService, JobSpec, job_view
from lemon_core.cron import CRON_ACTIONS
from lemon_core.errors import UsageError

__all__ = ["AgentCronJobs"]

_ADD: Final = frozenset(
    {"name", "schedule", "prompt", "timezone", "enabled", "jitter_sec", "catch_up",
     "timeout_sec", "max_retries", "channel", "model", "skills"}
)  # fmt: skip
_UPDATE: Final = {
    "name": ("name", 1),
    "prompt": ("prompt", 1),
    "enabled": ("enabled", 1),
    "jitter_sec": ("jitter_ms", 1000),
    "catch_up": ("catch_up", 1),
    "timeout_sec": ("timeout_ms", 1000),
    "max_retries": ("max_retries", 1),
    "model": ("model", 1),
    "skills": ("skills", 1),
}
_ID_ONLY: Final = frozenset({"pause", "resume", "remove", "run", "list"})


def _view(job: Job) -> dict[str, Any]:
    view = job_view(job)
    return {
        k: view.get(k)
        for k in (
            "id", "name", "schedule", "timezone", "enabled", "next_due_at_ms", "prompt",
            "catch_up", "max_retries", "channel", "model", "skills",
        )
    }  # fmt: skip


class AgentCronJobs:
    """See the module docstring."""

    def __init__(self, service: AutomationService) -> None:
        self._service = service

    async def act(
        self, agent_id: str, action: str, arguments: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        args = {k: v for k, v in arguments.items() if k != "action"}
        if action not in CRON_ACTIONS:
            raise UsageError(f"action must be one of {', '.join(CRON_ACTIONS)}, got {action!r}")
        try:
            return await self._act(agent_id, action, args)
        except (JobError, ScheduleError) as exc:
            raise UsageError(str(exc)) from None

    async def _own(self, agent_id: str, args: Mapping[str, Any]) -> Job:
        job_id = args.get("id")
        if not isinstance(job_id, str) or not job_id:
            raise UsageError("id is required (the job's id; see action=list)")
        job = await self._service.jobs.get(job_id)
        if job is None or job.agent_id != agent_id or job.purpose != "cron":
            raise UsageError(f"id: this agent has no job {job_id!r}; see action=list")
        return job

    async def _act(self, agent_id: str, action: str, args: dict[str, Any]) -> Mapping[str, Any]:
        service = self._service
        if action in _ID_ONLY:
            allowed = set() if action == "list" else {"id"}
            extra = sorted(set(args) - allowed)
            if extra:
                takes = "no other field" if action == "list" else "only id"
                raise UsageError(f"unknown field {extra[0]!r}: action={action} takes {takes}")
        if action == "list":
            jobs, _ = await service.all_jobs()
            views = []
            for job in jobs:
                if job.agent_id != agent_id or job.purpose != "cron":
                    continue
                last = await service.last_run(job.id)
                views.append({**_view(job), "last_status": last and last.status})
            return {"jobs": views}
        if action == "add":
            extra = sorted(set(args) - _ADD)
            if extra:
                raise UsageError(
                    f"unknown field {extra[0]!r}; action=add takes {', '.join(sorted(_ADD))}"
                )
            spec = JobSpec(
                name=_str(args, "name", required=True),
                schedule=_str(args, "schedule", required=True),
                prompt=_str(args, "prompt", required=True),
                agent_id=agent_id,
                timezone=_str(args, "timezone"),
                jitter_ms=int(_int(args, "jitter_sec", default=0) * 1000),
                enabled=_bool(args, "enabled", default=True),
                catch_up=_str(args, "catch_up", default="latest"),
                timeout_ms=int(_int(args, "timeout_sec", default=300, low=1) * 1000),
                max_retries=int(_int(args, "max_retries", default=0)),
                channel=_str(args, "channel"),
                model=_str(args, "model"),
                skills=_strings(args, "skills"),
            )
            job = await service.add(spec)
            return {"job": _view(job)}
        if action == "update":
            job = await self._own(agent_id, args)
            changes: dict[str, Any] = {}
            for key, value in args.items():
                if key == "id":
                    continue
                if key not in _UPDATE:
                    takes = ", ".join(sorted(_UPDATE))
                    raise UsageError(f"unknown field {key!r}; action=update takes id, {takes}")
                name, scale = _UPDATE[key]
                scaled = scale != 1 and isinstance(value, int | float)
                changes[name] = int(value * scale) if scaled else value
            changes.update(pins(args, model="model", skills="skills"))
            if not changes:
                raise UsageError(f"action=update needs a field to change: {', '.join(_UPDATE)}")
            job = await service.update(job.id, changes)
            return {"job": _view(job)}
        job = await self._own(agent_id, args)
        if action in ("pause", "resume"):
            job = await service.update(job.id, {"enabled": action == "resume"})
            return {"job": _view(job)}
        if action == "remove":
            await service.remove(job.id)
            return {"removed": True, "id": job.id, "name": job.name}
        _, cid, _ = await service.run_now(job.id)
        return {"cron_run_id": cid, "job_id": job.id, "status": "submitted"}
