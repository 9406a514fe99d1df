"""lemon_automation's ``lemon.apps`` hook: the scheduler in the daemon.

Profiles ``daemon`` and ``full``, after the router (the session port it submits through).
``[automation] enabled`` unset: the scheduler runs in the daemon (profile ``daemon``) and
nothing starts anywhere else (``lemon chat``'s hosted runtime, profile ``full``); ``true`` runs
it wherever the app boots; ``false`` nowhere. When it runs: the job and run stores on the
runtime's Store, the fire ledger that goes with that store (the PostgreSQL schema every daemon
on it shares, ``store/fires.sqlite3`` next to the SQLite store, or memory), the service's loops
(:class:`~lemon_automation.service.AutomationService`) and the ``cron.*`` / ``wake`` /
``set-heartbeats`` / ``last-heartbeat`` wire methods (advertised only then), and
``CRON_JOBS`` (:class:`~lemon_automation._tool.AgentCronJobs`, what the agent's ``cron`` tool
calls). Leaving the
lifespan unregisters the methods, cancels the loops and closes the ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from lemon_automation._aborts import CronRunAborts
from lemon_automation._section import SECTIONS, AutomationConfig
from lemon_automation._tool import AgentCronJobs
from lemon_automation._wire import registered
from lemon_automation.jobs import JobStore
from lemon_automation.runs import CronRunStore
from lemon_automation.service import AutomationService, default_daemon_id
from lemon_core.capabilities import MODEL_CATALOG
from lemon_core.channels import CHANNEL_SUPERVISION
from lemon_core.cron import CRON_JOBS
from lemon_core.run_aborts import RUN_ABORTS
from lemon_core.sessions import SESSION_PORT
from lemon_core.wire_methods import WIRE_METHODS
from lemon_runtime import AppSpec, Runtime, open_fire_ledger

__all__ = ["AutomationApp", "AutomationOptions", "lemon_automation_app", "runs_here"]

log = logging.getLogger("lemon_automation")


@dataclass(frozen=True, slots=True)
class AutomationOptions:
    """Per-process settings that are not config keys (tests shorten the tick)."""

    tick_s: float = 60.0


@dataclass(frozen=True, slots=True)
class AutomationApp:
    """The handle: the section as loaded and, when the scheduler runs here, its service."""

    config: AutomationConfig
    service: AutomationService | None = None


def _usable_skills(home: Path) -> list[str]:
    """The names of the skills an agent of ``home`` can load now (the preflight's list)."""
    from lemon_skills import SkillCatalog, SkillsSettings

    return [skill.name for skill in SkillCatalog(SkillsSettings(home=home)).enabled()]


def runs_here(config: AutomationConfig, profile: str) -> bool:
    """Whether the scheduler runs in a runtime of ``profile``."""
    if config.enabled is None:
        return profile == "daemon"
    return config.enabled


@contextlib.asynccontextmanager
async def _lifespan(runtime: Runtime) -> AsyncIterator[AutomationApp]:
    config = runtime.section(AutomationConfig)
    if not runs_here(config, runtime.profile):
        yield AutomationApp(config)
        return
    capabilities = runtime.context.capabilities
    port = capabilities.require(SESSION_PORT)
    methods = capabilities.require(WIRE_METHODS)
    ledger, owned = await open_fire_ledger(runtime.store, runtime.home)
    options = runtime.option(AutomationOptions) or AutomationOptions()
    service = AutomationService(
        jobs=JobStore(runtime.store, max_jobs_per_agent=config.max_jobs_per_agent),
        runs=CronRunStore(runtime.store),
        ledger=ledger,
        port=port,
        bus=runtime.bus,
        owner=config.daemon_id or default_daemon_id(),
        home=runtime.home,
        lease_ms=config.lease_ms,
        poll_ms=config.poll_ms,
        tick_s=options.tick_s,
        retry_backoff_ms=config.retry_backoff_ms,
        history_keep_per_job=config.history_keep_per_job,
        supervision=lambda: capabilities.get(CHANNEL_SUPERVISION),  # lemon_channels', if booted
        pause_after_idle_days=config.pause_after_idle_days,
        daily_cost_cap_usd=config.daily_cost_cap_usd,
        audit_keep_days=config.audit_keep_days,
        models=lambda: capabilities.get(MODEL_CATALOG),  # the agent app's, if booted
        skills=lambda: _usable_skills(runtime.home),
    )
    task = asyncio.create_task(service.run(), name="lemon-automation")
    log.info("automation runs as %s (lease %d ms)", service.owner, config.lease_ms)
    cron_jobs = AgentCronJobs(service)  # the agent's cron tool reaches the jobs through it
    capabilities.register(CRON_JOBS, cron_jobs)
    aborts = CronRunAborts(service)  # the control plane's chat.abort / port.cancel of a cron run
    capabilities.register(RUN_ABORTS, aborts)
    try:
        with registered(methods, service):
            yield AutomationApp(config, service)
    finally:
        capabilities.unregister(CRON_JOBS, cron_jobs)
        capabilities.unregister(RUN_ABORTS, aborts)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if owned:
            close = getattr(ledger, "close", None)
            if close is not None:
                await close()


lemon_automation_app: Final = AppSpec(
    name="lemon_automation",
    lifespan=_lifespan,
    profiles=frozenset({"daemon", "full"}),
    requires=("lemon_router",),
    description="cron jobs and heartbeats (the scheduler runs in the daemon)",
    sections=SECTIONS,
)
