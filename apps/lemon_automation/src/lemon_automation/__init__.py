"""lemon_automation: cron jobs and heartbeats; every due time fires exactly once, on any number
of daemons (claimed in the fire ledger, submitted through ``SESSION_PORT`` with a run id derived
from the due time). The daemon's lifespan runs :class:`AutomationService` (the timer, the fires'
runs, heartbeats, the ``cron`` events) and registers the ``cron.*`` / ``wake`` /
``set-heartbeats`` / ``last-heartbeat`` wire methods (see the README)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lemon_core.facade import lazy_exports

if TYPE_CHECKING:
    from lemon_automation._boot import AutomationApp, lemon_automation_app
    from lemon_automation._section import AutomationConfig
    from lemon_automation.catch_up import CatchUp, Skip, plan_catch_up
    from lemon_automation.fire import FireResult, cron_run_id, fire_due, router_run_id, submit_fire
    from lemon_automation.jobs import Job, JobError, JobStore, jitter_ms
    from lemon_automation.schedule import At, Cron, Every, Schedule, ScheduleError
    from lemon_automation.service import AutomationService, JobSpec

#: Where each facade name lives (loading the config imports the section module only).
_EXPORTS: Final[dict[str, tuple[str, str]]] = {
    "AutomationApp": ("lemon_automation._boot", "AutomationApp"),
    "lemon_automation_app": ("lemon_automation._boot", "lemon_automation_app"),
    "AutomationConfig": ("lemon_automation._section", "AutomationConfig"),
    "CatchUp": ("lemon_automation.catch_up", "CatchUp"),
    "Skip": ("lemon_automation.catch_up", "Skip"),
    "plan_catch_up": ("lemon_automation.catch_up", "plan_catch_up"),
    "FireResult": ("lemon_automation.fire", "FireResult"),
    "cron_run_id": ("lemon_automation.fire", "cron_run_id"),
    "fire_due": ("lemon_automation.fire", "fire_due"),
    "router_run_id": ("lemon_automation.fire", "router_run_id"),
    "submit_fire": ("lemon_automation.fire", "submit_fire"),
    "Job": ("lemon_automation.jobs", "Job"),
    "JobError": ("lemon_automation.jobs", "JobError"),
    "JobStore": ("lemon_automation.jobs", "JobStore"),
    "jitter_ms": ("lemon_automation.jobs", "jitter_ms"),
    "At": ("lemon_automation.schedule", "At"),
    "Cron": ("lemon_automation.schedule", "Cron"),
    "Every": ("lemon_automation.schedule", "Every"),
    "Schedule": ("lemon_automation.schedule", "Schedule"),
    "ScheduleError": ("lemon_automation.schedule", "ScheduleError"),
    "AutomationService": ("lemon_automation.service", "AutomationService"),
    "JobSpec": ("lemon_automation.service", "JobSpec"),
}

__all__ = [
    "At",
    "AutomationApp",
    "AutomationConfig",
    "AutomationService",
    "CatchUp",
    "Cron",
    "Every",
    "FireResult",
    "Job",
    "JobError",
    "JobSpec",
    "JobStore",
    "Schedule",
    "ScheduleError",
    "Skip",
    "cron_run_id",
    "fire_due",
    "jitter_ms",
    "lemon_automation_app",
    "plan_catch_up",
    "router_run_id",
    "submit_fire",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
