"""The automation service: what the daemon's lifespan runs.

- **Jobs** (:class:`~lemon_automation.jobs.JobStore`) and **run records**
  (:class:`~lemon_automation.runs.CronRunStore`) on the runtime's Store; add / update / pause /
  resume / remove publish ``cron_job_created`` / ``_updated`` / ``_deleted`` on ``cron``.
- **The timer loop**: the :class:`~lemon_automation.scheduler.Scheduler` steps at the next due
  time of any job (at most ``poll_ms`` later, or at once after a local job change), and takes
  over fires whose lease expired every ``lease_ms / 3``. ``cron_tick`` is published every
  ``tick_s`` (60 s) for the wire.
- **A fire's run**: submitted through the session port only. Once the fenced ``submitted`` write
  held, ``cron_run_started`` is published (so at most one per fire, across daemons); the run is
  followed to its end while the lease is renewed every ``lease_ms / 3`` (a renewal refused by the
  fence abandons the fire and cancels the local run); the fenced terminal write decides who
  publishes the one ``cron_run_completed``. A timeout cancels the run first: ``timeout`` once
  the cancel is confirmed (the run ended), ``unknown`` otherwise.
- **Terminalization**: a heartbeat's answer is checked synchronously before anything is
  recorded, published or delivered: exactly ``HEARTBEAT_OK`` (trimmed) is suppressed
  (``heartbeat_suppressed``, nothing forwarded); anything else, an empty answer included, is a
  ``heartbeat_alert`` forwarded to the agent's main session. A cron job's answer is forwarded to
  its base session as a ``run_completed`` on ``session:<base>`` with origin ``cron``, capped at
  12,000 bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import re
import socket
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec

from lemon_automation.fire import (
    FireResult,
    HeldFire,
    cron_run_id,
    fire_due,
    keep_lease,
    router_run_id,
)
from lemon_automation.jobs import (
    MAX_RETRIES,
    Job,
    JobError,
    JobStore,
    in_active_hours,
    parse_active_hours,
)
from lemon_automation.runs import CronRun, CronRunStore, PendingRetry, history, preview
from lemon_automation.schedule import (
    Every,
    ScheduleError,
    parse_duration_ms,
    shorthand_cron,
    zone,
)
from lemon_automation.scheduler import Scheduler, SchedulerHooks, default_request, run_session
from lemon_core.bus import Bus
from lemon_core.capabilities import ModelCatalog
from lemon_core.channels import ChannelSupervision, parse_target
from lemon_core.clock import SYSTEM_CLOCK
from lemon_core.cron import CRON_TOOL
from lemon_core.errors import UsageError
from lemon_core.events import (
    Completion,
    CronJobAction,
    CronJobChanged,
    CronLifecycleAction,
    CronRunCompleted,
    CronRunStarted,
    CronTick,
    ErrorCode,
    HeartbeatAlert,
    HeartbeatSuppressed,
    RunCompleted,
)
from lemon_core.execution import RunRequest, ToolPolicy
from lemon_core.fire_ledger import Fire, FireLedger
from lemon_core.sessions import RunEnded, SessionPort, StreamOverflow

__all__ = [
    "FORWARD_CAP_BYTES",
    "HEARTBEAT_OK",
    "HEARTBEAT_PROMPT",
    "AutomationService",
    "JobSpec",
    "cap_bytes",
    "checklist_is_empty",
    "default_daemon_id",
    "is_suppressed",
    "job_view",
]

log = logging.getLogger("lemon_automation")

CRON: Final = "cron"
FORWARD_CAP_BYTES: Final = 12_000
HEARTBEAT_OK: Final = "HEARTBEAT_OK"
HEARTBEAT_PROMPT: Final = (
    "Read HEARTBEAT.md if it exists. Follow it strictly. Do not repeat old tasks from earlier "
    "chats. If nothing needs attention, reply HEARTBEAT_OK."
)
_NO_ANSWER: Final = "the heartbeat produced no answer"
#: The tools a cron or heartbeat run is denied (by the RunRequest's tool policy): the
#: model-facing ``cron`` tool (lemon_core.cron), so a reminder never schedules more reminders.
CRON_BLOCKED_TOOLS: set[str] = {CRON_TOOL}
#: How many of the newest audit entries ``cron.audit`` filters.
AUDIT_SCAN: Final = 5000
#: How many old fires one prune deletes at most (one prune follows each terminal record).
PRUNE_BATCH: Final = 100
#: The first retry's backoff (each later one doubles it); ``[automation] retry_backoff_ms``.
RETRY_BACKOFF_MS: Final = 30_000
#: The ends a retry follows (never ``unknown``: the run may still be going).
RETRY_STATUSES: Final = frozenset({"failed", "timeout", "interrupted"})
_COMMENT: Final = re.compile(r"<!--.*?-->", re.DOTALL)
_ENDED_KEEP: Final = 2048
#: The prefix of every fire's derived router run id (``router_run_id``).
_FIRE_RUNS: Final = "run_cron_"
_DAY_MS: Final = 86_400_000
_RUN_SCAN: Final = 1000  # the newest finished runs the idle and spend checks read


def default_daemon_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def local_timezone() -> str:
    """The machine's IANA zone name (``TZ``, ``/etc/timezone``, the ``/etc/localtime`` link),
    ``UTC`` when none can be read."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz and "/" in tz:
        return tz
    with contextlib.suppress(OSError):
        text = Path("/etc/timezone").read_text().strip()
        if text:
            return text
    with contextlib.suppress(OSError):
        target = os.readlink("/etc/localtime")
        if "zoneinfo/" in target:
            return target.split("zoneinfo/", 1)[1]
    return "UTC"


def cap_bytes(text: str, cap: int = FORWARD_CAP_BYTES) -> str:
    """``text`` cut to at most ``cap`` UTF-8 bytes (never inside a character)."""
    data = text.encode()
    if len(data) <= cap:
        return text
    return data[:cap].decode(errors="ignore")


def is_suppressed(answer: str | None) -> bool:
    """A heartbeat answer is suppressed exactly when it trims to ``HEARTBEAT_OK``."""
    return answer is not None and answer.strip() == HEARTBEAT_OK


def checklist_is_empty(text: str) -> bool:
    """HEARTBEAT.md holds only headings, comments, empty list items and blank lines."""
    for line in _COMMENT.sub("", text).splitlines():
        item = line.strip()
        if not item or item.startswith("#"):
            continue
        if item in ("-", "*", "+", "- [ ]", "* [ ]", "- [x]"):
            continue
        return False
    return True


def schedule_text(job: Job) -> str:
    if job.kind == "every":
        return f"every {job.expr}"
    if job.kind == "at":
        return f"at {job.expr}"
    return job.expr


def next_due_ms(job: Job) -> int | None:
    if not job.enabled:
        return None
    watermark = job.last_due_at_ms if job.last_due_at_ms is not None else job.created_at_ms
    try:
        return job.schedule().next_after(watermark)
    except ScheduleError:
        return None


def job_view(job: Job) -> dict[str, Any]:
    """A job as the CLI's ``--json`` and the wire show it (snake case; the wire camel-cases)."""
    view: dict[str, Any] = msgspec.to_builtins(job)
    view["schedule"] = schedule_text(job)
    view["next_due_at_ms"] = next_due_ms(job)
    return view


@dataclass(frozen=True, kw_only=True, slots=True)
class JobSpec:
    """What ``cron.add`` / ``lemon cron add`` give: one schedule (``schedule`` text such as
    ``every 10s``, ``at 2026-...``, five cron fields or a macro)."""

    name: str
    schedule: str
    prompt: str
    agent_id: str = "default"
    session_key: str | None = None
    timezone: str | None = None
    jitter_ms: int = 0
    enabled: bool = True
    catch_up: str = "latest"
    grace_ms: int | None = None
    timeout_ms: int = 300_000
    max_retries: int = 0
    channel: str | None = None
    """A delivery target ``<channel>:<peer id>[:<thread id>]``: the summary is also delivered
    there through ``ChannelSupervision``."""
    model: str | None = None
    """The model pin (``provider:model``); ``None``: the configured default."""
    skills: tuple[str, ...] = ()
    """Skills the prompt relies on (each checked before a fire runs)."""


def check_channel(target: str | None) -> str | None:
    """``target`` (stripped) when it parses, ``None`` for none; :class:`JobError` naming
    ``channel`` otherwise."""
    if target is None or not target.strip():
        return None
    try:
        return str(parse_target(target))
    except UsageError as exc:
        raise JobError("channel", str(exc).split(": ", 1)[1]) from None


def parse_schedule(text: str) -> tuple[str, str]:
    """``(kind, expr)`` of a schedule text."""
    stripped = text.strip()
    lowered = stripped.lower()
    expr = shorthand_cron(stripped)  # "daily at 9am", "weekdays at 09:30": stored as cron
    if expr is not None:
        return "cron", expr
    if lowered.startswith("every "):
        return "every", stripped[6:].strip()
    if lowered.startswith("at "):
        return "at", stripped[3:].strip()
    return "cron", stripped


def build_job(spec: JobSpec, *, now_ms: int) -> Job:
    """A new job from ``spec`` (validated by :meth:`JobStore.add`)."""
    if not spec.schedule.strip():
        raise JobError("schedule", "required: every DUR, at TIME, five cron fields or @daily")
    kind, expr = parse_schedule(spec.schedule)
    if spec.catch_up not in ("latest", "all", "skip"):
        raise JobError("catch_up", f"{spec.catch_up!r} is not one of latest, all, skip")
    if kind == "every":
        try:
            parse_duration_ms(expr)
        except ScheduleError as exc:
            raise JobError("every", str(exc).split(": ", 1)[1]) from exc
    return Job(
        id=f"job_{uuid.uuid4().hex[:16]}",
        name=spec.name,
        agent_id=spec.agent_id,
        kind=kind,  # type: ignore[arg-type]  # one of the three by parse_schedule
        expr=expr,
        timezone=spec.timezone or (local_timezone() if kind == "cron" else "UTC"),
        anchor_ms=now_ms,
        prompt=spec.prompt,
        session_key=spec.session_key,
        enabled=spec.enabled,
        jitter_ms=spec.jitter_ms,
        catch_up=spec.catch_up,  # type: ignore[arg-type]  # checked above
        grace_ms=spec.grace_ms,
        timeout_ms=spec.timeout_ms,
        max_retries=spec.max_retries,
        created_at_ms=now_ms,
        channel=check_channel(spec.channel),
        model=spec.model.strip() if spec.model and spec.model.strip() else None,
        skills=tuple(dict.fromkeys(s.strip() for s in spec.skills if s.strip())),
    )


def heartbeat_id(agent_id: str) -> str:
    return f"heartbeat_{agent_id}"


_NO_DAEMON: Final = "running a job needs the daemon: start it with lemon daemon start"


class _NoDaemon:
    """The submitter of a service opened without a daemon (the CLI on the store): it refuses."""

    async def submit(self, request: RunRequest) -> Any:
        raise JobError("id", _NO_DAEMON)


class _Completions:
    """Run ends seen on the port's ``watch_all`` stream, by run id (one stream for every
    fire; an end that arrives before its waiter is kept, bounded)."""

    def __init__(self, port: SessionPort) -> None:
        self._port = port
        self._ended: OrderedDict[str, RunEnded] = OrderedDict()
        self._waiters: dict[str, list[asyncio.Future[RunEnded]]] = {}
        self._ready = asyncio.Event()

    async def pump(self) -> None:
        while True:
            stream = self._port.watch_all()
            self._ready.set()
            try:
                async for event in stream:
                    if isinstance(event, RunEnded) and event.run_id.startswith(_FIRE_RUNS):
                        self._end(event)
                    elif isinstance(event, StreamOverflow):
                        log.warning("automation lost run events (%s); watching again", event.reason)
                        break
            finally:
                stream.close()

    async def ready(self) -> None:
        await self._ready.wait()

    def _end(self, event: RunEnded) -> None:
        self._ended[event.run_id] = event
        while len(self._ended) > _ENDED_KEEP:
            self._ended.popitem(last=False)
        for waiter in self._waiters.pop(event.run_id, []):
            if not waiter.done():
                waiter.set_result(event)

    async def wait(self, run_id: str, timeout_s: float) -> RunEnded | None:
        found = self._ended.get(run_id)
        if found is not None:
            return found
        waiter: asyncio.Future[RunEnded] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(run_id, []).append(waiter)
        try:
            async with asyncio.timeout(timeout_s):
                return await waiter
        except TimeoutError:
            return None
        finally:
            waiters = self._waiters.get(run_id)
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)
                if not waiters:
                    del self._waiters[run_id]


@dataclass
class _Counters:
    fired: int = 0
    completed: int = 0
    skipped: int = 0
    lost: int = 0
    suppressed: int = 0
    alerts: int = 0
    last_tick_ms: int | None = None
    errors: list[str] = field(default_factory=list)


class AutomationService(SchedulerHooks):
    """See the module docstring. Start with :meth:`run` (a task); stop by cancelling it."""

    def __init__(
        self,
        *,
        jobs: JobStore,
        runs: CronRunStore,
        ledger: FireLedger,
        port: SessionPort | None,
        bus: Bus,
        owner: str,
        home: Path,
        lease_ms: int = 30_000,
        poll_ms: int = 1000,
        tick_s: float = 60.0,
        retry_backoff_ms: int = RETRY_BACKOFF_MS,
        history_keep_per_job: int = 200,
        history_poll_s: float = 5.0,
        clock_ms: Callable[[], int] | None = None,
        supervision: Callable[[], ChannelSupervision | None] | None = None,
        pause_after_idle_days: float = 7.0,
        daily_cost_cap_usd: float | None = None,
        audit_keep_days: float = 30.0,
        models: Callable[[], ModelCatalog | None] | None = None,
        skills: Callable[[], Iterable[str]] | None = None,
    ) -> None:
        self.jobs = jobs
        self.runs = runs
        self.ledger = ledger
        self.port = port
        self.bus = bus
        self.owner = owner
        self.home = home
        self.lease_ms = lease_ms
        self.poll_ms = poll_ms
        self.tick_s = tick_s
        self.retry_backoff_ms = retry_backoff_ms
        self.history_keep_per_job = history_keep_per_job
        #: How often a followed fire whose run end was not seen here reads the run history.
        self.history_poll_s = history_poll_s
        self._now = clock_ms or SYSTEM_CLOCK.now_ms
        self._supervision = supervision or (lambda: None)  # lemon_channels', looked up per use
        self._models = models or (lambda: None)  # the agent's MODEL_CATALOG, per use
        self._skills = skills  # the names of the usable skills (read in a thread)
        self._alerted: dict[str, str] = {}  # job id -> the preflight reason already alerted
        self.pause_after_idle_ms = int(pause_after_idle_days * _DAY_MS)
        self.daily_cost_cap_usd = daily_cost_cap_usd
        self.audit_keep_ms = int(audit_keep_days * _DAY_MS)
        self._wake = asyncio.Event()
        self._completions = _Completions(port) if port is not None else None
        self._follows: set[asyncio.Task[None]] = set()
        self._done: dict[str, asyncio.Future[CronRun]] = {}
        self._active: dict[str, str] = {}  # cron_run_id -> router run id, fires followed here
        self._aborting: set[str] = set()
        self.counters = _Counters()
        self.scheduler = Scheduler(
            jobs,
            ledger,
            port if port is not None else _NoDaemon(),
            owner=owner,
            clock=SYSTEM_CLOCK,
            sleep=asyncio.sleep,
            lease_ms=lease_ms,
            poll_ms=poll_ms,
            request_for=self._request_for,
            hooks=self,
        )

    def _port(self) -> SessionPort:
        if self.port is None:
            raise JobError("id", _NO_DAEMON)
        return self.port

    def _waits(self) -> _Completions:
        if self._completions is None:
            raise JobError("id", _NO_DAEMON)
        return self._completions

    # -- events -----------------------------------------------------------------------------

    def _publish(self, type_: str, payload: Any, meta: Mapping[str, Any] | None = None) -> None:
        try:
            self.bus.broadcast_event(CRON, type_, payload, meta)
        except Exception as exc:  # a closed bus at shutdown: the record is in the store
            log.warning("automation could not publish %s: %s", type_, exc)

    async def _audit(self, action: str, job_id: str, **fields: Any) -> None:
        audit = {
            "action": action,
            "id": f"audit_{uuid.uuid4().hex[:16]}",
            "job_id": job_id,
            "source": self.owner,
            "ts_ms": self._now(),
            **{k: v for k, v in fields.items() if v is not None},
        }
        try:  # durable first (cron.audit reads it), then published
            await self.runs.put_audit(audit)
        except Exception as exc:
            log.warning("automation could not store audit %s: %s", action, exc)
        self._publish("cron_lifecycle_action", CronLifecycleAction(audit=audit))

    def _job_changed(self, action: CronJobAction, job: Job, *, deleted: bool = False) -> None:
        type_ = f"cron_job_{action.value}"
        payload = CronJobChanged(
            action=action,
            job_id=job.id,
            name=job.name,
            agent_id=job.agent_id,
            job=None if deleted else _wire_job(job),
        )
        self._publish(type_, payload)

    # -- jobs -------------------------------------------------------------------------------

    async def add(self, spec: JobSpec) -> Job:
        now = self._now()
        job = await self.jobs.add(build_job(spec, now_ms=now), now_ms=now)
        self._job_changed(CronJobAction.CREATED, job)
        await self._audit("job_created", job.id)
        self._wake.set()
        return job

    async def update(self, job_id: str, changes: Mapping[str, Any]) -> Job:
        job = await self.jobs.update(job_id, changes, now_ms=self._now())
        self._job_changed(CronJobAction.UPDATED, job)
        await self._audit("job_updated", job.id, changed_fields=sorted(changes))
        self._wake.set()
        return job

    async def get(self, job_id: str) -> Job:
        job = await self.jobs.get(job_id)
        if job is None:
            raise JobError("id", f"no job {job_id!r}; see lemon cron list")
        return job

    async def remove(self, job_id: str) -> Job:
        job = await self.get(job_id)
        await self.jobs.remove(job_id)
        self._job_changed(CronJobAction.DELETED, job, deleted=True)
        await self._audit("job_deleted", job.id)
        return job

    async def all_jobs(self) -> tuple[list[Job], list[tuple[str, str]]]:
        jobs, bad = await self.jobs.load()
        jobs.sort(key=lambda j: (j.created_at_ms, j.id))
        return jobs, bad

    async def history(self, job_id: str | None, *, limit: int) -> list[CronRun]:
        """The newest ``limit`` fires, newest first; a delivered one's ``delivery`` is
        ``delivered`` once the channel recorded its message id, ``unverified`` before."""
        jobs = {j.id: j for j in (await self.jobs.load())[0]}
        ids = [job_id] if job_id is not None else list(jobs)
        found = await history(self.ledger, self.runs, ids, limit=limit, cron_run_id_of=cron_run_id)
        supervision = self._supervision()
        out = []
        for run in found:
            job = jobs.get(run.job_id)
            if run.delivery in ("admitted", "duplicate") and job is not None and job.channel:
                sent: tuple[str, ...] = ()
                if supervision is not None:
                    with contextlib.suppress(Exception):
                        sent = await supervision.message_ids(job.channel, run.cron_run_id)
                run = msgspec.structs.replace(
                    run,
                    delivery="delivered" if sent else "unverified",
                    delivery_message_ids=sent,
                )
            out.append(run)
        return out

    async def last_run(self, job_id: str) -> CronRun | None:
        found = await self.history(job_id, limit=1)
        return found[0] if found else None

    # -- heartbeats -------------------------------------------------------------------------

    async def set_heartbeat(
        self,
        agent_id: str,
        *,
        enabled: bool,
        every: str | None = None,
        prompt: str | None = None,
        channel: str | None = None,
        active_hours: str | None = None,
        timezone: str | None = None,
    ) -> Job | None:
        """Create, change or (``enabled`` false) remove the agent's heartbeat job.
        ``active_hours`` ``""`` clears them."""
        hid = heartbeat_id(agent_id)
        current = await self.jobs.get(hid)
        if not enabled:
            if current is not None:
                await self.remove(hid)
            return None
        if active_hours:
            parse_active_hours(active_hours)
        if channel is not None:
            channel = check_channel(channel) or ""
        if timezone is not None:
            try:
                zone(timezone)
            except ScheduleError as exc:
                raise JobError("timezone", str(exc).split(": ", 1)[1]) from exc
        if every is not None:
            try:
                Every.parse(every, anchor_ms=0)
            except ScheduleError as exc:
                raise JobError("every", str(exc).split(": ", 1)[1]) from exc
        if current is None:
            now = self._now()
            job = Job(
                id=hid,
                name="heartbeat",
                agent_id=agent_id,
                kind="every",
                expr=every or "30m",
                anchor_ms=now,
                created_at_ms=now,
                armed_at_ms=now,
                prompt=prompt or HEARTBEAT_PROMPT,
                session_key=f"agent:{agent_id}:main:sub:heartbeat",
                purpose="heartbeat",
                catch_up="latest",
                channel=channel or None,
                active_hours=active_hours or None,
                timezone=timezone or local_timezone(),
            )
            job = await self.jobs.add(job, now_ms=now)
            self._job_changed(CronJobAction.CREATED, job)
            await self._audit("heartbeat_set", job.id)
            self._wake.set()
            return job
        changes: dict[str, Any] = {"enabled": True, "armed_at_ms": self._now()}
        if prompt is not None:
            changes["prompt"] = prompt
        if every is not None and every != current.expr:
            # a new period restarts the anchor: remove and add (the id stays the agent's)
            await self.jobs.remove(hid)
            now = self._now()
            fresh = msgspec.structs.replace(
                current,
                expr=every,
                anchor_ms=now,
                created_at_ms=now,
                armed_at_ms=now,
                enabled=True,
                last_due_at_ms=None,
            )
            if prompt is not None:
                fresh = msgspec.structs.replace(fresh, prompt=prompt)
            if channel is not None:
                fresh = msgspec.structs.replace(fresh, channel=channel or None)
            job = await self.jobs.add(fresh, now_ms=now)
            self._job_changed(CronJobAction.UPDATED, job)
            self._wake.set()
            return job
        fields: dict[str, Any] = {}
        if channel is not None and (channel or None) != current.channel:
            fields["channel"] = channel or None
        if active_hours is not None and (active_hours or None) != current.active_hours:
            fields["active_hours"] = active_hours or None
        if timezone is not None and timezone != current.timezone:
            fields["timezone"] = timezone
        if fields:  # not updatable through cron.update: the heartbeat row is replaced
            fresh = msgspec.structs.replace(current, **fields)
            await self.jobs.remove(hid)
            await self.jobs.add(fresh, now_ms=self._now())
        return await self.update(hid, changes)

    async def heartbeat(self, agent_id: str) -> Job | None:
        return await self.jobs.get(heartbeat_id(agent_id))

    # -- fires ------------------------------------------------------------------------------

    def _request_for(self, job: Job, due_at_ms: int) -> RunRequest:
        request = default_request(job, due_at_ms)
        meta = {**request.meta, "cron_run_id": cron_run_id(job.id, due_at_ms)}
        if job.purpose == "heartbeat":
            meta["heartbeat"] = True
        # a cron or heartbeat run never manages cron itself (the policy only narrows)
        policy = ToolPolicy(deny=frozenset(CRON_BLOCKED_TOOLS))
        return dataclasses.replace(request, meta=meta, tool_policy=policy, model=job.model)

    async def preflight(self, job: Job, due_at_ms: int, *, manual: bool = False) -> str | None:
        """Why ``due_at_ms`` of ``job`` is skipped with no model call (None: it runs). A manual
        run or a wake is not held to the heartbeat's active hours."""
        if job.channel is not None:
            supervision = self._supervision()
            why = (
                "no channels run in this runtime (lemon_channels did not boot)"
                if supervision is None
                else supervision.check_target(job.channel)
            )
            if why is not None:
                return f"preflight: delivery target {job.channel}: {why}"
        if job.purpose != "heartbeat":
            return await self._runnable(job)
        if not manual and not in_active_hours(job, due_at_ms):
            return "outside_active_hours"
        cap = self.daily_cost_cap_usd
        if not manual and cap is not None and await self.spend_today_usd(job.agent_id) >= cap:
            return "daily_cost_cap"
        if not manual and self.pause_after_idle_ms > 0 and await self._idle(job):
            return "idle"
        checklist = self.home / "agent" / "workspace" / "HEARTBEAT.md"
        try:
            text = await asyncio.to_thread(checklist.read_text, encoding="utf-8")
        except FileNotFoundError:
            text = None
        except OSError as exc:
            return f"preflight: HEARTBEAT.md cannot be read ({exc})"
        if text is not None and checklist_is_empty(text):
            return "empty_checklist"
        if job.skip_when_busy:
            try:
                snap = await self._port().snapshot(f"agent:{job.agent_id}:main")
            except Exception:  # no such session yet: not busy
                return None
            if snap.active is not None:
                return "busy"
        return await self._runnable(job)

    async def _runnable(self, job: Job) -> str | None:
        """Why a run of ``job`` would fail before it reached the model (None: it can start):
        its model (the pin, or the configured default) unknown or without the credentials it
        needs, or a skill it names not installed and usable. Read fresh for every fire (a key
        set or a skill installed since counts at once)."""
        catalog = self._models()
        if catalog is not None:
            infos = await asyncio.to_thread(catalog.models)
            if job.model is None:
                info = next((m for m in infos if m.default), None)
            else:
                info = next((m for m in infos if m.ref == job.model), None)
                if info is None:
                    return (
                        f"preflight: model {job.model}: not known to this runtime (see the "
                        "[providers] of config.toml and lemon_ai's catalogue)"
                    )
            if info is not None and info.unavailable:
                return f"preflight: model {info.ref}: {info.unavailable}"
        if job.skills and self._skills is not None:
            try:
                usable = set(await asyncio.to_thread(self._skills))
            except Exception as exc:  # an unreadable skills lockfile: nothing named can load
                return f"preflight: skills cannot be read ({exc})"
            missing = [name for name in job.skills if name not in usable]
            if missing:
                return (
                    f"preflight: skill {missing[0]!r} is not installed or not usable "
                    "(see lemon skills list)"
                )
        return None

    async def skipped(self, job: Job, due_at_ms: int, reason: str) -> None:
        self.counters.skipped += 1
        cid = cron_run_id(job.id, due_at_ms)
        if reason == "interrupted":
            record = await self.runs.get(cid)
            if record is not None:
                record = msgspec.structs.replace(
                    record, status="interrupted", finished_at_ms=self._now()
                )
                await self.runs.put(record)
                await self._plan_retry(job, record)
            # a fire left in flight by a dead owner: its one completion is published here
            self._publish(
                "cron_run_completed",
                CronRunCompleted(
                    cron_run_id=cid,
                    router_run_id=router_run_id(job.id, due_at_ms),
                    job_id=job.id,
                    agent_id=job.agent_id,
                    session_key=run_session(job),
                    status="interrupted",
                    error="the owner stopped while the run was in flight",
                ),
            )
        if reason.startswith("preflight:"):
            # a fire that would have failed: its one completion says why, and no run started
            self._publish(
                "cron_run_completed",
                CronRunCompleted(
                    cron_run_id=cid,
                    router_run_id=None,
                    job_id=job.id,
                    agent_id=job.agent_id,
                    session_key=run_session(job),
                    status="skipped",
                    error=reason,
                ),
                {"origin": "cron"},
            )
        await self._audit("run_skipped", job.id, run_id=cid, status="skipped", reason=reason)
        if reason == "idle":  # the heartbeat pauses itself: no later fire, so one alert
            with contextlib.suppress(JobError):
                await self.jobs.update(job.id, {"enabled": False}, now_ms=self._now())
            days = self.pause_after_idle_ms / _DAY_MS
            await self._audit("heartbeat_paused", job.id, run_id=cid, reason="idle")
            self._alert(
                job,
                cid,
                f"the heartbeat paused itself: no user message for {days:g} days "
                "(turn it back on with lemon heartbeat set)",
            )
        if reason == "daily_cost_cap" and await self._first_today(job, "cost_cap"):
            await self._audit("heartbeat_capped", job.id, run_id=cid, reason="daily_cost_cap")
            self._alert(
                job,
                cid,
                f"the heartbeat stopped for today: the agent spent at least "
                f"${self.daily_cost_cap_usd:g} today ([automation] daily_cost_cap_usd)",
            )
        if reason.startswith("preflight:") and self._alerted.get(job.id) != reason:
            self._alerted[job.id] = reason  # one alert per job and reason, not one per fire
            self._alert(job, cid, f"{job.name} did not run: {reason}")
        await self.prune(job.id)

    async def spend_today_usd(self, agent_id: str) -> float:
        """What ``agent_id``'s runs reported spending since 00:00 UTC today (the newest
        ``_RUN_SCAN`` finished runs of the run history)."""
        now = self._now()
        runs = await self._port().runs(limit=_RUN_SCAN, since_ms=now - now % _DAY_MS)
        return sum(
            r.usage.cost_usd
            for r in runs
            if r.usage is not None and _agent_of(r.session_key) == agent_id
        )

    async def _idle(self, job: Job) -> bool:
        """No user run of the job's agent within ``pause_after_idle_ms``, counted from the
        later of that run and the heartbeat's arming (cron and heartbeat runs do not count)."""
        since = self._now() - self.pause_after_idle_ms
        if max(job.armed_at_ms, job.created_at_ms) > since:
            return False
        runs = await self._port().runs(limit=_RUN_SCAN, since_ms=since)
        return not any(
            _agent_of(r.session_key) == job.agent_id and not _automation_session(r.session_key)
            for r in runs
        )

    async def _first_today(self, job: Job, kind: str) -> bool:
        """Whether this daemon is the first (of all daemons on the ledger) to raise ``kind``
        for ``job`` today: claimed in the fire ledger as ``(<job>#<kind>, today)``."""
        now = self._now()
        day = now - now % _DAY_MS
        fire = await self.ledger.claim(f"{job.id}#{kind}", day, self.owner, lease_ms=1)
        if fire is None:
            return False
        await self.ledger.record(fire, status="skipped", outcome=kind)
        return True

    def _alert(self, job: Job, run_id: str, text: str) -> None:
        """An alert about ``job`` that no run made (a preflight failure): ``heartbeat_alert``
        for a heartbeat, and a failed summary on the base session (never a channel: the
        target is what failed)."""
        self.counters.alerts += 1
        if job.purpose == "heartbeat":
            self._publish(
                "heartbeat_alert",
                HeartbeatAlert(
                    agent_id=job.agent_id,
                    job_id=job.id,
                    job_name=job.name,
                    run_id=run_id,
                    response=text,
                    severity="warning",
                ),
            )
        self._forward(job, run_id, ok=False, text=text)

    async def fired(self, job: Job, result: FireResult, triggered_by: str) -> None:
        fire = result.fire
        if fire is None:
            return
        self.counters.fired += 1
        if job.kind == "at" and triggered_by == "schedule":
            with contextlib.suppress(JobError):
                await self.jobs.update(job.id, {"enabled": False}, now_ms=self._now())
        cid = cron_run_id(job.id, fire.due_at_ms)
        started = self._now()
        pending = await self.runs.get_retry(cid)  # also for a retry a takeover submitted
        if pending is not None:
            triggered_by = "retry"
        record = CronRun(
            cron_run_id=cid,
            job_id=job.id,
            due_at_ms=fire.due_at_ms,
            status=fire.status,
            triggered_by=triggered_by,
            router_run_id=fire.run_id,
            owner=self.owner,
            started_at_ms=started,
            attempt=pending.attempt if pending is not None else 0,
            retry_of=pending.retry_of if pending is not None else None,
        )
        if result.status == "rejected":
            reason = result.receipt.reason if result.receipt is not None else None
            done = msgspec.structs.replace(
                record, status="failed", error=reason, finished_at_ms=started
            )
            await self.runs.put(done)
            if pending is not None:
                await self.runs.drop_retry(cid)
            self._publish(
                "cron_run_completed",
                CronRunCompleted(
                    cron_run_id=cid,
                    router_run_id=fire.run_id,
                    job_id=job.id,
                    agent_id=job.agent_id,
                    session_key=run_session(job),
                    status="failed",
                    error=reason,
                ),
            )
            await self._plan_retry(job, done)
            await self.prune(job.id)
            self._resolve(cid, done)
            return
        await self.runs.put(record)
        if pending is not None:
            await self.runs.drop_retry(cid)
        self._publish(
            "cron_run_started",
            CronRunStarted(
                cron_run_id=cid,
                router_run_id=fire.run_id,
                job_id=job.id,
                job_name=job.name,
                agent_id=job.agent_id,
                session_key=run_session(job),
                triggered_by=triggered_by,
                started_at_ms=started,
            ),
            {"run_id": fire.run_id, "origin": "cron"},
        )
        task = asyncio.create_task(self._follow(job, fire, record))
        self._follows.add(task)
        task.add_done_callback(self._follows.discard)

    async def prune(self, job_id: str) -> int:
        """Keep the newest ``history_keep_per_job`` fires of ``job_id``: delete one bounded batch
        (``PRUNE_BATCH``) of older done fires and their run records. Run after each terminal
        record, so a job converges to its bound however long it ran. A pruned due time is
        behind the job's watermark: it is never planned again."""
        try:
            dues = await self.ledger.prune(
                job_id, keep=self.history_keep_per_job, limit=PRUNE_BATCH
            )
            for due in dues:
                await self.runs.delete(cron_run_id(job_id, due))
        except Exception as exc:  # the next terminal record tries again
            log.warning("automation could not prune the history of %s: %s", job_id, exc)
            return 0
        return len(dues)

    async def _plan_retry(self, job: Job, run: CronRun) -> None:
        """After the fenced terminal write of ``run`` (so one daemon plans it): a scheduled fire
        (or a retry) that ended ``failed``, ``timeout`` or ``interrupted`` is retried while
        ``job.max_retries`` allows, as a new fire ``(job, original due + attempt ms)`` (a new
        ``cron_run_id``), no sooner than ``retry_backoff_ms * 2**(attempt-1)`` from now. Never
        for ``unknown`` (the run may still be going), never for manual or wake runs."""
        if run.status not in RETRY_STATUSES or run.triggered_by not in ("schedule", "retry"):
            return
        attempt = run.attempt + 1
        if attempt > min(job.max_retries, MAX_RETRIES):
            return
        due = run.due_at_ms - run.attempt + attempt
        cid = cron_run_id(job.id, due)
        retry = PendingRetry(
            cron_run_id=cid,
            job_id=job.id,
            due_at_ms=due,
            attempt=attempt,
            retry_of=run.cron_run_id,
            not_before_ms=self._now() + self.retry_backoff_ms * 2 ** (attempt - 1),
        )
        try:
            await self.runs.put_retry(retry)
        except Exception as exc:
            log.warning("automation could not plan retry %d of %s: %s", attempt, job.id, exc)
            return
        await self._audit(
            "retry_scheduled",
            job.id,
            run_id=cid,
            status=run.status,
            reason=f"attempt {attempt} of {job.max_retries}, retrying {run.cron_run_id}",
        )
        self._wake.set()

    async def run_retries(self) -> int:
        """Fire each planned retry whose backoff has passed (claimed in the ledger: of any number
        of daemons one runs it). Returns how many this daemon submitted."""
        now = self._now()
        count = 0
        for retry in await self.runs.retries():
            if retry.not_before_ms > now:
                continue
            job = await self.jobs.get(retry.job_id)
            if job is None or not (job.enabled or job.kind == "at"):
                await self.runs.drop_retry(retry.cron_run_id)
                continue
            result = await fire_due(
                self.ledger,
                self._port(),
                job_id=job.id,
                due_at_ms=retry.due_at_ms,
                owner=self.owner,
                lease_ms=self.lease_ms,
                request=self._request_for(job, retry.due_at_ms),
            )
            if result.status == "lost":
                existing = await self.ledger.get(job.id, retry.due_at_ms)
                if existing is not None and not existing.done:
                    continue  # in flight: its claimer (or a takeover) drops the plan
                await self.runs.drop_retry(retry.cron_run_id)
                continue
            await self.fired(job, result, "retry")
            count += 1
        return count

    def _resolve(self, cid: str, run: CronRun) -> None:
        waiter = self._done.pop(cid, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(run)

    async def _follow(self, job: Job, fire: Fire, record: CronRun) -> None:
        run_id = fire.run_id or router_run_id(job.id, fire.due_at_ms)
        self._active[record.cron_run_id] = run_id
        held = HeldFire(fire)
        lost = held.lost
        renewer = asyncio.create_task(keep_lease(self.ledger, held, self.lease_ms))
        lost_wait = asyncio.create_task(lost.wait())
        ended_task = asyncio.create_task(self._ended(run_id, job, record.started_at_ms or 0))
        try:
            await asyncio.wait({ended_task, lost_wait}, return_when=asyncio.FIRST_COMPLETED)
            if lost.is_set():
                log.warning(
                    "automation lost fire %s@%d to another daemon; abandoning it",
                    job.id,
                    fire.due_at_ms,
                )
                self.counters.lost += 1
                ended_task.cancel()
                with contextlib.suppress(Exception):
                    await self._port().cancel(run_id=run_id)
                return
            ended = ended_task.result()
            status = "completed" if ended is not None and ended.ok else "failed"
            if ended is None:
                ended, status = await self._time_out(run_id, job)
            if record.cron_run_id in self._aborting and status != "completed":
                status = "aborted"
        finally:
            renewer.cancel()
            lost_wait.cancel()
            self._active.pop(record.cron_run_id, None)
            self._aborting.discard(record.cron_run_id)
        await self._terminalize(job, held.fire, record, run_id, ended, status)

    async def _ended(self, run_id: str, job: Job, since_ms: int) -> RunEnded | None:
        """The end of ``run_id`` within the job's timeout (None: not seen in time): from this
        daemon's run events, or from the shared run history, read every
        ``history_poll_s``. The history is how a fire hears of a run another daemon executed
        for it (handed to the session's owner, whose events are on its own bus when the
        daemons share only the store); its answer is then not known here."""
        waits = self._waits()
        deadline = asyncio.get_running_loop().time() + job.timeout_ms / 1000
        while (left := deadline - asyncio.get_running_loop().time()) > 0:
            ended = await waits.wait(run_id, min(left, self.history_poll_s))
            if ended is not None:
                return ended
            found = await self._from_history(run_id, since_ms)
            if found is not None:
                return found
        return None

    async def _from_history(self, run_id: str, since_ms: int | None = None) -> RunEnded | None:
        """``run_id`` as the run history shows it finished (None: not there, or unreadable)."""
        with contextlib.suppress(Exception):
            since = None if since_ms is None else max(0, since_ms - 60_000)  # clock skew
            for done in await self._port().runs(limit=200, since_ms=since):
                if done.run_id == run_id:
                    return RunEnded(
                        session_key=done.session_key,
                        run_id=run_id,
                        attempt_id=done.attempt_id or run_id,
                        ok=done.ok,
                        error_code=done.error_code,
                    )
        return None

    async def _time_out(self, run_id: str, job: Job) -> tuple[RunEnded | None, str]:
        """Cancel the run; ``timeout`` once its end is seen, ``unknown`` when it is not. A run
        the run history shows finished (its end was lost with an overflowed stream) is taken as
        it ended, with no answer."""
        found = await self._from_history(run_id)
        if found is not None:
            return found, "completed" if found.ok else "failed"
        try:
            await self._port().cancel(run_id=run_id)
        except Exception as exc:
            log.warning("automation could not cancel timed-out run %s: %s", run_id, exc)
            return None, "unknown"
        ended = await self._waits().wait(run_id, min(30.0, max(1.0, job.timeout_ms / 1000)))
        return ended, "timeout" if ended is not None else "unknown"

    async def _terminalize(
        self,
        job: Job,
        fire: Fire,
        record: CronRun,
        run_id: str,
        ended: RunEnded | None,
        status: str,
    ) -> None:
        answer = ended.answer if ended is not None else None
        heartbeat = job.purpose == "heartbeat"
        # Suppression is decided here, before anything is recorded, published or delivered.
        suppressed = heartbeat and status == "completed" and is_suppressed(answer)
        error = None
        if status == "aborted":
            error = "aborted by an operator"
        elif status == "timeout":
            error = f"the run did not end within {job.timeout_ms // 1000} s (cancelled)"
        elif status == "unknown":
            error = "the run timed out and its cancel could not be confirmed"
        elif ended is not None and not ended.ok:
            error = ended.error or (str(ended.error_code) if ended.error_code else "failed")
        written = await self.ledger.record(
            fire,
            status=status,
            run_id=run_id,
            outcome="suppressed" if suppressed else error,
        )
        if written is None:
            log.warning(
                "automation: fire %s@%d was taken over; its late end is not recorded",
                job.id,
                fire.due_at_ms,
            )
            self.counters.lost += 1
            return
        finished = self._now()
        self._alerted.pop(job.id, None)  # it ran: a later preflight failure alerts again
        alert_text = (answer or "").strip() or error or _NO_ANSWER
        delivery = None
        if job.channel is not None and not suppressed:
            # the fenced terminal write held: this daemon alone delivers the fire, keyed by
            # its cron_run_id (a repeat is a duplicate in the channel's outbox)
            text = alert_text if heartbeat else (answer or error or "(no answer)")
            delivery = await self._deliver(job, record.cron_run_id, run_id, text)
        done = msgspec.structs.replace(
            record,
            status=status,
            router_run_id=run_id,
            finished_at_ms=finished,
            suppressed=suppressed,
            error=error,
            output=preview(answer),
            delivery=delivery,
        )
        await self.runs.put(done)
        self.counters.completed += 1
        if status == "aborted":
            with contextlib.suppress(Exception):  # it expires in a day anyway
                await self.runs.drop_abort(record.cron_run_id)
        await self._plan_retry(job, done)
        await self.prune(job.id)
        session = run_session(job)
        self._publish(
            "cron_run_completed",
            CronRunCompleted(
                cron_run_id=record.cron_run_id,
                router_run_id=run_id,
                job_id=job.id,
                agent_id=job.agent_id,
                session_key=session,
                status=status,
                duration_ms=finished - (record.started_at_ms or finished),
                output=preview(answer),
                error=error,
                suppressed=suppressed,
            ),
            {"run_id": run_id, "origin": "cron"},
        )
        if heartbeat:
            if suppressed:
                self.counters.suppressed += 1
                self._publish(
                    "heartbeat_suppressed",
                    HeartbeatSuppressed(
                        agent_id=job.agent_id, job_id=job.id, job_name=job.name, run_id=run_id
                    ),
                )
            else:
                self.counters.alerts += 1
                self._publish(
                    "heartbeat_alert",
                    HeartbeatAlert(
                        agent_id=job.agent_id,
                        job_id=job.id,
                        job_name=job.name,
                        run_id=run_id,
                        response=alert_text,
                        severity="warning",
                    ),
                )
                if job.channel is None:  # with a channel, the alert went there
                    self._forward(job, run_id, ok=True, text=alert_text)
        elif job.session_key is None:
            self._forward(job, run_id, ok=status == "completed", text=answer or error or "")
        self._resolve(record.cron_run_id, done)

    async def _deliver(self, job: Job, cid: str, run_id: str, text: str) -> str:
        """Admit ``text`` to the job's channel target through ``ChannelSupervision`` (intent
        id: the ``cron_run_id``); the delivery status recorded on the run."""
        assert job.channel is not None
        supervision = self._supervision()
        try:
            if supervision is None:
                raise UsageError("no channels run in this runtime")
            receipt = await supervision.submit(
                job.channel,
                intent_id=cid,
                text=cap_bytes(text),
                run_id=run_id,
                session_key=f"agent:{job.agent_id}:main",
                meta={"origin": "cron", "cron_job_id": job.id, "cron_run_id": cid},
            )
            status: str = receipt.status
        except Exception as exc:  # a full outbox, a channel that stopped: recorded, not raised
            status = f"failed: {exc}"
        await self._audit(
            "delivery_admitted" if not status.startswith("failed") else "delivery_failed",
            job.id,
            run_id=cid,
            status=status,
            reason=job.channel,
        )
        return status

    def _forward(self, job: Job, run_id: str, *, ok: bool, text: str) -> None:
        """The summary on the base session: a ``run_completed`` with origin cron."""
        base = f"agent:{job.agent_id}:main"
        completion = Completion(
            ok=ok,
            answer=cap_bytes(text) if ok else None,
            error=None if ok else cap_bytes(text) or "failed",
            error_code=None if ok else ErrorCode.PROVIDER_ERROR,
            run_id=run_id,
            session_key=base,
            meta={"origin": "cron", "cron_job_id": job.id, "job_name": job.name},
        )
        try:
            self.bus.broadcast_event(
                f"session:{base}",
                "run_completed",
                RunCompleted(completed=completion),
                {"run_id": run_id, "session_key": base, "origin": "cron"},
            )
        except Exception as exc:
            log.warning("automation could not forward run %s: %s", run_id, exc)

    async def audit(
        self,
        *,
        limit: int,
        job_id: str | None = None,
        run_id: str | None = None,
        action: str | None = None,
        since_ms: int | None = None,
    ) -> list[dict[str, Any]]:
        """The newest ``limit`` audit entries matching every filter given, newest first."""
        out = []
        for entry in await self.runs.audits(limit=AUDIT_SCAN):
            if job_id is not None and entry.get("job_id") != job_id:
                continue
            if run_id is not None and entry.get("run_id") != run_id:
                continue
            if action is not None and entry.get("action") != action:
                continue
            if since_ms is not None and int(entry.get("ts_ms", 0)) < since_ms:
                continue
            out.append(entry)
            if len(out) >= limit:
                break
        return out

    async def abort(self, cron_run_id: str, *, timeout_s: float = 10.0) -> CronRun:
        """Abort the active fire ``cron_run_id``: its router run is cancelled and the fire
        recorded ``aborted`` (never retried). A fire this daemon follows is cancelled here; one
        another daemon follows is asked through the store (``automation_aborts``): that daemon
        cancels the run through its own session port within ``poll_ms`` and records the
        abort. Returns the fire's record (still ``submitted`` when the end was not seen within
        ``timeout_s``)."""
        record = await self.runs.get(cron_run_id)
        if record is None:
            raise JobError("runId", f"no cron run {cron_run_id!r}")
        if record.status not in ("claimed", "submitted"):
            raise JobError("runId", f"cron run {cron_run_id!r} is not active ({record.status})")
        run_id = self._active.get(cron_run_id)
        if run_id is None:
            return await self._abort_elsewhere(record, timeout_s)
        waiter = self._done.get(cron_run_id)
        if waiter is None:
            waiter = asyncio.get_running_loop().create_future()
            self._done[cron_run_id] = waiter
        self._aborting.add(cron_run_id)
        await self._port().cancel(run_id=run_id)
        await self._audit("run_aborted", record.job_id, run_id=cron_run_id, status="aborted")
        try:
            async with asyncio.timeout(timeout_s):
                return await asyncio.shield(waiter)
        except TimeoutError:
            return record

    async def _abort_elsewhere(self, record: CronRun, timeout_s: float) -> CronRun:
        """Ask the daemon following ``record`` to abort it; wait (polling the shared record,
        with a deadline) until the fire ended."""
        cid = record.cron_run_id
        await self.runs.request_abort(cid, job_id=record.job_id, by=self.owner, at_ms=self._now())
        await self._audit(
            "run_abort_requested",
            record.job_id,
            run_id=cid,
            status=record.status,
            reason=f"asked {record.owner} (it follows the run)",
        )
        self._wake.set()  # a fire this daemon picks up meanwhile (a takeover) serves it too
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        step = min(0.1, self.poll_ms / 1000)
        while (left := deadline - loop.time()) > 0:
            current = await self.runs.get(cid)
            if current is not None and current.status not in ("claimed", "submitted"):
                return current
            await asyncio.sleep(min(step, left))
        return await self.runs.get(cid) or record

    async def serve_aborts(self) -> int:
        """Cancel, through this daemon's session port, each fire it follows that another
        daemon asked to abort (``cron.abort`` there); run every scheduler step. Returns how
        many it cancelled."""
        count = 0
        for cid, run_id in list(self._active.items()):
            if cid in self._aborting:
                continue
            asked = await self.runs.abort_request(cid)
            if asked is None:
                continue
            self._aborting.add(cid)
            try:
                await self._port().cancel(run_id=run_id)
            except Exception as exc:  # asked again at the next step
                self._aborting.discard(cid)
                log.warning("automation could not cancel run %s to abort it: %s", run_id, exc)
                continue
            count += 1
            await self._audit(
                "run_aborted",
                str(asked.get("job_id", "")),
                run_id=cid,
                status="aborted",
                reason=f"requested by {asked.get('by')}",
            )
        return count

    async def run_now(
        self, job_id: str, *, triggered_by: str = "manual", prompt: str | None = None
    ) -> tuple[Job, str, asyncio.Future[CronRun]]:
        """Fire ``job_id`` now through the same ledger (due time: now). Returns the job, the
        fire's ``cron_run_id`` and a future of its final record."""
        job = await self.get(job_id)
        if prompt is not None:
            job = msgspec.structs.replace(job, prompt=prompt)
        due = self._now()
        cid = cron_run_id(job.id, due)
        waiter: asyncio.Future[CronRun] = asyncio.get_running_loop().create_future()
        reason = await self.preflight(job, due, manual=True)
        if reason is not None:
            fire = await self.ledger.claim(job.id, due, self.owner, lease_ms=1)
            if (
                fire is None
                or await self.ledger.record(fire, status="skipped", outcome=reason) is None
            ):
                raise JobError("id", "this instant was already claimed; try again")
            await self.skipped(job, due, reason)
            waiter.set_result(
                CronRun(
                    cron_run_id=cid,
                    job_id=job.id,
                    due_at_ms=due,
                    status="skipped",
                    triggered_by=triggered_by,
                    owner=self.owner,
                    reason=reason,
                )
            )
            return job, cid, waiter
        self._done[cid] = waiter
        await self._waits().ready()
        result = await fire_due(
            self.ledger,
            self._port(),
            job_id=job.id,
            due_at_ms=due,
            owner=self.owner,
            lease_ms=self.lease_ms,
            request=self._request_for(job, due),
        )
        if result.status == "lost":
            self._done.pop(cid, None)
            raise JobError("id", "this instant was already claimed; try again")
        await self.fired(job, result, triggered_by)
        return job, cid, waiter

    # -- loops ------------------------------------------------------------------------------

    async def prune_audits(self) -> int:
        """Delete one bounded batch (``PRUNE_BATCH``) of audit entries older than
        ``audit_keep_ms``; run every tick, so the table converges to its window."""
        try:
            return await self.runs.prune_audits(
                before_ms=self._now() - self.audit_keep_ms, limit=PRUNE_BATCH
            )
        except Exception as exc:  # the store is down: the next tick tries again
            log.warning("automation could not prune the audit: %s", exc)
            return 0

    async def _tick_forever(self) -> None:
        while True:
            now = self._now()
            self.counters.last_tick_ms = now
            self._publish("cron_tick", CronTick(timestamp_ms=now))
            await self.prune_audits()
            await asyncio.sleep(self.tick_s)

    async def _schedule_forever(self) -> None:
        last_recover = 0.0
        failing = False
        while True:
            self._wake.clear()
            try:
                await self.scheduler.step()
                await self.run_retries()
                if self._active:
                    await self.serve_aborts()
                if time.monotonic() - last_recover >= self.lease_ms / 3000:
                    last_recover = time.monotonic()
                    await self.scheduler.recover()
                delay_ms = await self.scheduler.next_wake_ms() - self._now()
                failing = False
            except Exception as exc:  # the store is down: log once, keep polling
                if not failing:
                    log.warning("automation scheduler step failed: %s", exc)
                failing = True
                delay_ms = self.poll_ms
            delay_ms = min(max(0, delay_ms), self.poll_ms, self.lease_ms // 3)
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow the stop's cancel
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay_ms / 1000):
                    await self._wake.wait()

    async def run(self) -> None:
        """The service's loops (cancel to stop); every followed fire is cancelled with it."""
        tasks = [
            asyncio.create_task(self._waits().pump()),
            asyncio.create_task(self._tick_forever()),
        ]
        try:
            await self._waits().ready()
            await self._schedule_forever()
        finally:
            for task in [*tasks, *self._follows]:
                task.cancel()
            for task in [*tasks, *list(self._follows)]:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task


def _agent_of(session_key: str) -> str:
    parts = session_key.split(":")
    if len(parts) >= 2 and parts[0] == "agent" and parts[1]:
        return parts[1]
    return "default"


def _automation_session(session_key: str) -> bool:
    """A cron fire's or heartbeat's own session (not a person's)."""
    return ":sub:cron_" in session_key or session_key.endswith(":sub:heartbeat")


def _wire_job(job: Job) -> dict[str, Any]:
    """The ``job`` map of ``cron_job_*`` (the bridge reads these names)."""
    return {
        "id": job.id,
        "name": job.name,
        "schedule": schedule_text(job),
        "enabled": job.enabled,
        "agent_id": job.agent_id,
        "session_key": job.session_key,
        "next_run_at_ms": next_due_ms(job),
        "timezone": job.timezone,
        "kind": job.purpose,
    }
