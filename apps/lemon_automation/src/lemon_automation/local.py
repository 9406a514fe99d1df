"""The wire methods on this home's store directly, for the CLI when no daemon runs: the same
handlers (so the same validation, messages and shapes) on a service opened without a session
port. A method that runs a job (``cron.run``, ``wake``) is refused: that needs the daemon. A
daemon started later picks the changes up within ``poll_ms``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any, Final, Literal

from lemon_automation._section import AutomationConfig
from lemon_automation._wire import methods_of, snake
from lemon_automation.jobs import JobStore
from lemon_automation.runs import CronRunStore
from lemon_automation.service import AutomationService, default_daemon_id, next_due_ms
from lemon_core.bus import Bus
from lemon_core.config import LoadedConfig
from lemon_core.errors import UsageError
from lemon_core.wire_methods import WireCall
from lemon_runtime import open_configured_store, open_fire_ledger

__all__ = ["call_on_store", "diagnose", "snake"]

Level = Literal["ok", "warn", "fail"]
#: How many of each job's newest fires the doctor reads.
_DOCTOR_FIRES: Final = 200


async def call_on_store(loaded: LoadedConfig, method: str, params: Mapping[str, Any]) -> Any:
    """``method``'s payload, answered on the configured store (raises ``UsageError`` for bad
    input, as the daemon would answer ``INVALID_PARAMS``)."""
    if method in ("cron.run", "wake"):
        raise UsageError("running a job needs the daemon: start it with lemon daemon start")
    async with _service_on_store(loaded) as service:
        handler, _scope = methods_of(service)[method]
        return await handler(WireCall(method=method, params=dict(params)))


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


async def diagnose(loaded: LoadedConfig, *, now_ms: int | None = None) -> list[tuple[Level, str]]:
    """``lemon doctor``'s automation lines, read from the configured store (nothing is
    changed): the jobs and the next due time, quarantined job rows, stale leases (a fire in
    flight whose lease expired: its owner died or stalls, and a daemon's recovery will take it
    over) and the skipped fires among each job's newest ones, by reason. No line when there is
    no job."""
    config = loaded.config.section(AutomationConfig)
    now = now_ms if now_ms is not None else int(datetime.now(UTC).timestamp() * 1000)
    lines: list[tuple[Level, str]] = []
    async with _service_on_store(loaded) as service:
        jobs, bad = await service.all_jobs()
        if not jobs and not bad:
            return []
        state = "off ([automation] enabled = false)" if config.enabled is False else "on"
        dues = [(d, j) for j in jobs if j.enabled for d in [next_due_ms(j)] if d is not None]
        enabled = sum(1 for j in jobs if j.enabled)
        head = f"{len(jobs)} jobs ({enabled} enabled), scheduler {state}"
        if dues:
            due, job = min(dues, key=lambda pair: pair[0])
            head += f"; next due {_when(due)} ({job.name})"
        lines.append(("ok" if config.enabled is not False or not enabled else "warn", head))
        for job_id, reason in bad:
            lines.append(("warn", f"quarantined job row {job_id}: {reason}"))
        stale: list[str] = []
        skipped: dict[str, int] = {}
        for job in jobs:
            for fire in await service.ledger.fires(job.id, limit=_DOCTOR_FIRES):
                if not fire.done and fire.lease_until_ms <= now:
                    ago = (now - fire.lease_until_ms) // 1000
                    stale.append(
                        f"{job.name} due {_when(fire.due_at_ms)} held by {fire.owner} "
                        f"({fire.status}, lease expired {ago} s ago)"
                    )
                if fire.status == "skipped":
                    why = fire.outcome or "unknown"
                    why = why.split(":", 1)[0] if why.startswith("preflight") else why
                    skipped[why] = skipped.get(why, 0) + 1
        for line in stale:
            lines.append(("warn", f"stale lease: {line}; a running daemon takes it over"))
        if skipped:
            counts = ", ".join(f"{n} {why}" for why, n in sorted(skipped.items()))
            lines.append(("ok", f"skipped fires (newest {_DOCTOR_FIRES} per job): {counts}"))
    return lines


@contextlib.asynccontextmanager
async def _service_on_store(loaded: LoadedConfig) -> AsyncIterator[AutomationService]:
    """A service on the configured store with no session port (it runs nothing)."""
    config = loaded.config.section(AutomationConfig)
    store = await open_configured_store(loaded.config, loaded.home)
    bus = Bus()
    try:
        ledger, owned = await open_fire_ledger(store, loaded.home)
        try:
            service = AutomationService(
                jobs=JobStore(store, max_jobs_per_agent=config.max_jobs_per_agent),
                runs=CronRunStore(store),
                ledger=ledger,
                port=None,
                bus=bus,
                owner=config.daemon_id or default_daemon_id(),
                home=loaded.home,
                lease_ms=config.lease_ms,
                poll_ms=config.poll_ms,
            )
            yield service
        finally:
            close = getattr(ledger, "close", None)
            if owned and close is not None:
                with contextlib.suppress(Exception):
                    await close()
    finally:
        bus.close()
        await store.close()
