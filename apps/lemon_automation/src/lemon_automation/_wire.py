"""lemon_automation's control-plane methods, registered on ``WIRE_METHODS`` while the scheduler
runs (so ``hello-ok`` advertises them only then), with Lemon's parameter names:

- ``cron.list {agentId?}`` (read): ``{jobs, quarantined}``.
- ``cron.add {name, schedule, prompt, agentId?, sessionKey?, timezone?, jitterSec?, enabled?,
  catchUp?, graceSec?, timeoutSec?, maxRetries?, channel?, model?, skills?}`` (admin):
  ``{job}``; ``channel`` (``telegram:<chat id>[:<thread id>]``) also delivers each summary
  there; ``model`` pins ``provider:model``; ``skills`` names the skills the prompt relies on
  (both checked before each fire: ``skipped: preflight`` when they are not available).
  ``schedule`` is ``every 10s``, ``at <ISO instant>``, five cron fields or a macro. A
  ``command`` job is refused (only agent prompts run).
- ``cron.update {id, name?, prompt?, enabled?, jitterSec?, catchUp?, graceSec?, timeoutSec?,
  maxRetries?}``, ``cron.pause {id}``, ``cron.resume {id}``, ``cron.remove {id}`` (admin).
- ``cron.abort {runId}`` (admin): abort the active fire ``runId`` (a ``cronRunId``) its owning
  daemon follows; ``{aborted, runId, jobId, status, routerRunId}`` (status ``aborted``).
- ``cron.audit {limit?, jobId?, runId?, action?, sinceMs?}`` (read): the durable
  ``cron_lifecycle_action`` entries, newest first: ``{events, total, filters, summary}``.
- ``cron.run {id, wait?, timeoutSec?}`` (admin): fire now through the ledger (``triggered_by``
  manual); with ``wait`` the final record (its ``output``).
- ``cron.runs {id?, limit?}`` (read): ``{runs}``, newest first. ``cron.status`` (read).
- ``wake {agentId?, message?}`` (write): the agent's heartbeat now (``triggered_by`` wake).
- ``set-heartbeats {enabled, agentId?, intervalMs?, prompt?, channel?, activeHours?
  {start, end}, timezone?}`` (write).
- ``last-heartbeat {agentId?}`` (read): ``{heartbeat, last}``.

Job and run views are the CLI's ``--json`` shapes with camel-case keys. ``jobId`` is accepted
wherever ``id`` is.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import msgspec

from lemon_automation.jobs import JobError
from lemon_automation.runs import CronRun
from lemon_automation.schedule import ScheduleError
from lemon_automation.service import AutomationService, JobSpec, job_view
from lemon_core.errors import UsageError
from lemon_core.wire_methods import WireCall, WireHandler, WireMethods

__all__ = ["camel", "methods_of", "registered", "snake"]

_OWNER: Final = "lemon_automation"
_UPPER: Final = re.compile(r"([A-Z])")
_UPDATABLE: Final = {
    "name": ("name", 1),
    "prompt": ("prompt", 1),
    "enabled": ("enabled", 1),
    "jitterSec": ("jitter_ms", 1000),
    "catchUp": ("catch_up", 1),
    "graceSec": ("grace_ms", 1000),
    "timeoutSec": ("timeout_ms", 1000),
    "maxRetries": ("max_retries", 1),
    "model": ("model", 1),
    "skills": ("skills", 1),
}


def _camel_key(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def camel(value: Any) -> Any:
    """Snake-case keys to camel case, deeply."""
    if isinstance(value, dict):
        return {_camel_key(k): camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [camel(v) for v in value]
    return value


def snake(value: Any) -> Any:
    """Camel-case keys back to snake case, deeply (the CLI's ``--json``)."""
    if isinstance(value, dict):
        return {
            _UPPER.sub(lambda m: "_" + m.group(1).lower(), k): snake(v) for k, v in value.items()
        }
    if isinstance(value, list):
        return [snake(v) for v in value]
    return value


def _duration(ms: int) -> str:
    """``ms`` in the largest unit that divides it (``30m``, ``90s``, ``1500ms``)."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _active_hours(params: Any) -> str | None:
    """``activeHours``: ``{start, end}`` (``HH:MM``), ``"HH:MM-HH:MM"``, or null (unchanged);
    ``""`` or ``{}`` clears them."""
    value = params.get("activeHours")
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        if not value:
            return ""
        start, end = value.get("start"), value.get("end")
        if isinstance(start, str) and isinstance(end, str):
            return f"{start}-{end}"
    raise UsageError('activeHours must be {"start": "HH:MM", "end": "HH:MM"}')


def _audit_view(entry: dict[str, Any]) -> dict[str, Any]:
    """One audit entry as ``cron.audit`` shows it (Lemon's names)."""
    return {
        "id": entry.get("id"),
        "action": entry.get("action"),
        "tsMs": entry.get("ts_ms"),
        "jobId": entry.get("job_id"),
        "runId": entry.get("run_id"),
        "routerRunId": entry.get("router_run_id"),
        "source": entry.get("source"),
        "status": entry.get("status"),
        "triggeredBy": entry.get("triggered_by"),
        "reason": entry.get("reason"),
        "changedFields": entry.get("changed_fields", []),
    }


def _run_view(run: CronRun) -> dict[str, Any]:
    data: dict[str, Any] = msgspec.to_builtins(run)
    return camel(data)  # type: ignore[no-any-return]


def _given(params: Any, name: str, default: Any) -> Any:
    # An explicit null is "not given": the default applies (a client may send every key).
    value = params.get(name)
    return default if value is None else value


def _strings(params: Any, name: str) -> tuple[str, ...]:
    value = _given(params, name, None)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{name} must be a list of strings")
    return tuple(value)


def pins(params: Any, *, model: str, skills: str) -> dict[str, Any]:
    """The job fields ``model`` / ``skills`` given in an update's ``params`` (under those
    names): ``model`` a ``provider:model`` string, or null or ``""`` (no pin: the configured
    default),
    ``skills`` a list of names (``[]``: none). Checked as ``cron.add`` checks them (the form
    here, the rest by the job's validation; the catalogue and the skills at every fire)."""
    out: dict[str, Any] = {}
    if model in params:
        value = params[model]
        if value is not None and not isinstance(value, str):
            raise UsageError(f"{model} must be a string (provider:model) or null")
        out["model"] = value or None
    if skills in params:
        out["skills"] = _strings(params, skills)
    return out


def _str(params: Any, name: str, *, required: bool = False, default: str | None = None) -> Any:
    value = _given(params, name, default)
    if value is None:
        if required:
            raise UsageError(f"{name} is required")
        return None
    if not isinstance(value, str):
        raise UsageError(f"{name} must be a string")
    return value


def _int(params: Any, name: str, *, default: int | None = None, low: int = 0) -> Any:
    value = _given(params, name, default)
    if value is None:
        return None
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or (isinstance(value, float) and not math.isfinite(value))
        or value < low
    ):
        raise UsageError(f"{name} must be a number >= {low}")
    return value


def _bool(params: Any, name: str, *, default: bool | None = None) -> Any:
    value = _given(params, name, default)
    if value is not None and not isinstance(value, bool):
        raise UsageError(f"{name} must be true or false")
    return value


def _id(params: Any) -> str:
    value = _given(params, "id", params.get("jobId"))
    if not isinstance(value, str) or not value:
        raise UsageError("id is required (the job's id; see cron.list)")
    return value


def methods_of(service: AutomationService) -> dict[str, tuple[WireHandler, str]]:
    async def guarded(op: Any) -> Any:
        try:
            return await op
        except (JobError, ScheduleError) as exc:
            raise UsageError(str(exc)) from None

    async def list_jobs(call: WireCall) -> dict[str, Any]:
        agent = _str(call.params, "agentId")
        jobs, bad = await service.all_jobs()
        views = []
        for job in jobs:
            if agent is not None and job.agent_id != agent:
                continue
            last = await service.last_run(job.id)
            views.append(camel({**job_view(job), "last_status": last and last.status}))
        return {
            "jobs": views,
            "quarantined": [{"id": key, "reason": why} for key, why in bad],
        }

    async def add(call: WireCall) -> dict[str, Any]:
        p = call.params
        if p.get("command") is not None:
            raise UsageError("command jobs are not supported: give an agent prompt")
        known = {
            "name",
            "schedule",
            "prompt",
            "agentId",
            "sessionKey",
            "timezone",
            "jitterSec",
            "enabled",
            "catchUp",
            "graceSec",
            "timeoutSec",
            "maxRetries",
            "channel",
            "model",
            "skills",
        }
        unknown = sorted(set(p) - known)
        if unknown:
            takes = ", ".join(sorted(known))
            raise UsageError(f"unknown field {unknown[0]!r}; cron.add takes {takes}")
        grace = _int(p, "graceSec")
        spec = JobSpec(
            name=_str(p, "name", required=True),
            schedule=_str(p, "schedule", required=True),
            prompt=_str(p, "prompt", required=True),
            agent_id=_str(p, "agentId", default="default"),
            session_key=_str(p, "sessionKey"),
            timezone=_str(p, "timezone"),
            jitter_ms=int(_int(p, "jitterSec", default=0) * 1000),
            enabled=_bool(p, "enabled", default=True),
            catch_up=_str(p, "catchUp", default="latest"),
            grace_ms=None if grace is None else int(grace * 1000),
            timeout_ms=int(_int(p, "timeoutSec", default=300, low=1) * 1000),
            max_retries=int(_int(p, "maxRetries", default=0)),
            channel=_str(p, "channel"),
            model=_str(p, "model"),
            skills=_strings(p, "skills"),
        )
        job = await guarded(service.add(spec))
        return {"job": camel(job_view(job))}

    async def update(call: WireCall) -> dict[str, Any]:
        p = call.params
        job_id = _id(p)
        changes: dict[str, Any] = {}
        for key, value in p.items():
            if key in ("id", "jobId"):
                continue
            if key in ("agentId", "sessionKey"):
                raise UsageError(f"{key} is immutable; remove the job and add a new one")
            if key not in _UPDATABLE:
                raise UsageError(
                    f"unknown field {key!r}; cron.update takes {', '.join(sorted(_UPDATABLE))}"
                )
            name, scale = _UPDATABLE[key]
            scaled = scale != 1 and isinstance(value, int | float)
            changes[name] = int(value * scale) if scaled else value
        changes.update(pins(p, model="model", skills="skills"))
        job = await guarded(service.update(job_id, changes))
        return {"job": camel(job_view(job))}

    def toggle(enabled: bool) -> WireHandler:
        async def handler(call: WireCall) -> dict[str, Any]:
            job = await guarded(service.update(_id(call.params), {"enabled": enabled}))
            return {"job": camel(job_view(job)), "ok": True}

        return handler

    async def remove(call: WireCall) -> dict[str, Any]:
        job = await guarded(service.remove(_id(call.params)))
        return {"removed": True, "id": job.id, "name": job.name}

    async def run(call: WireCall) -> dict[str, Any]:
        p = call.params
        wait = _bool(p, "wait", default=False)
        timeout = _int(p, "timeoutSec", default=300, low=1)
        job, cid, done = await guarded(service.run_now(_id(p)))
        out: dict[str, Any] = {"cronRunId": cid, "jobId": job.id, "status": "submitted"}
        if wait:
            try:
                record = await asyncio.wait_for(asyncio.shield(done), timeout)
            except TimeoutError:
                out["status"] = "running"
                return out
            out.update(_run_view(record))
        return out

    async def abort(call: WireCall) -> dict[str, Any]:
        cid = _str(call.params, "runId")
        if not cid:
            raise UsageError("runId is required (a cronRunId)")
        record = await guarded(service.abort(cid))
        return {
            "aborted": record.status == "aborted",
            "runId": record.cron_run_id,
            "jobId": record.job_id,
            "status": record.status,
            "routerRunId": record.router_run_id,
        }

    async def audit(call: WireCall) -> dict[str, Any]:
        p = call.params
        limit = int(_int(p, "limit", default=100, low=1) or 100)
        limit = min(limit, 1000)
        filters = {
            "limit": limit,
            "jobId": _str(p, "jobId"),
            "runId": _str(p, "runId"),
            "action": _str(p, "action"),
            "sinceMs": _int(p, "sinceMs", low=0),
        }
        found = await service.audit(
            limit=limit,
            job_id=filters["jobId"],
            run_id=filters["runId"],
            action=filters["action"],
            since_ms=filters["sinceMs"],
        )
        events = [_audit_view(e) for e in found]
        counts: dict[str, int] = {}
        for e in events:
            counts[e["action"]] = counts.get(e["action"], 0) + 1
        return {
            "events": events,
            "total": len(events),
            "filters": filters,
            "summary": {"eventCount": len(events), "actionCounts": counts},
        }

    async def runs(call: WireCall) -> dict[str, Any]:
        p = call.params
        job_id = _given(p, "id", p.get("jobId"))
        if job_id is not None and not isinstance(job_id, str):
            raise UsageError("id must be a string")
        limit = _int(p, "limit", default=50, low=1)
        found = await service.history(job_id, limit=min(int(limit), 1000))
        return {"runs": [_run_view(r) for r in found]}

    async def status(call: WireCall) -> dict[str, Any]:
        jobs, bad = await service.all_jobs()
        dues = [d for d in (job_view(j)["next_due_at_ms"] for j in jobs) if d is not None]
        c = service.counters
        return {
            "enabled": True,
            "daemonId": service.owner,
            "jobs": len(jobs),
            "enabledJobs": sum(1 for j in jobs if j.enabled),
            "quarantined": len(bad),
            "nextDueAtMs": min(dues) if dues else None,
            "leaseMs": service.lease_ms,
            "pollMs": service.poll_ms,
            "lastTickMs": c.last_tick_ms,
            "fired": c.fired,
            "completed": c.completed,
            "skipped": c.skipped,
            "lost": c.lost,
            "suppressed": c.suppressed,
            "alerts": c.alerts,
        }

    async def wake(call: WireCall) -> dict[str, Any]:
        agent = _str(call.params, "agentId", default="default")
        message = _str(call.params, "message")
        job = await service.heartbeat(agent)
        if job is None:
            raise UsageError(f"agent {agent!r} has no heartbeat; set one with set-heartbeats")
        _, cid, _ = await guarded(service.run_now(job.id, triggered_by="wake", prompt=message))
        return {"ok": True, "cronRunId": cid, "jobId": job.id}

    async def set_heartbeats(call: WireCall) -> dict[str, Any]:
        p = call.params
        enabled = _bool(p, "enabled")
        if enabled is None:
            raise UsageError("enabled is required (true or false)")
        interval = _int(p, "intervalMs", low=1000)
        job = await guarded(
            service.set_heartbeat(
                _str(p, "agentId", default="default"),
                enabled=enabled,
                every=None if interval is None else _duration(int(interval)),
                prompt=_str(p, "prompt"),
                channel=_str(p, "channel"),
                active_hours=_active_hours(p),
                timezone=_str(p, "timezone"),
            )
        )
        return {"ok": True, "heartbeat": None if job is None else camel(job_view(job))}

    async def last_heartbeat(call: WireCall) -> dict[str, Any]:
        agent = _str(call.params, "agentId", default="default")
        job = await service.heartbeat(agent)
        last = None if job is None else await service.last_run(job.id)
        return {
            "agentId": agent,
            "heartbeat": None if job is None else camel(job_view(job)),
            "last": None if last is None else _run_view(last),
        }

    return {
        "cron.list": (list_jobs, "read"),
        "cron.add": (add, "admin"),
        "cron.update": (update, "admin"),
        "cron.pause": (toggle(False), "admin"),
        "cron.resume": (toggle(True), "admin"),
        "cron.remove": (remove, "admin"),
        "cron.run": (run, "admin"),
        "cron.runs": (runs, "read"),
        "cron.abort": (abort, "admin"),
        "cron.audit": (audit, "read"),
        "cron.status": (status, "read"),
        "wake": (wake, "write"),
        "set-heartbeats": (set_heartbeats, "write"),
        "last-heartbeat": (last_heartbeat, "read"),
    }


@contextmanager
def registered(methods: WireMethods, service: AutomationService) -> Iterator[tuple[str, ...]]:
    """Register the methods while the block runs (unregistered when it ends)."""
    done: list[str] = []
    try:
        for name, (handler, scope) in methods_of(service).items():
            methods.register(name, handler, scope=scope, owner=_OWNER)
            done.append(name)
        yield tuple(done)
    finally:
        for name in done:
            methods.unregister(name)
