"""``[automation]``: the scheduler's config section (this app's README documents each key)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Final

import msgspec

from lemon_core.config import Section

__all__ = ["SECTIONS", "AutomationConfig"]


class AutomationConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[automation]``: the scheduler runs in the daemon unless ``enabled = false``."""

    enabled: bool | None = None
    """Unset: on in the daemon, off elsewhere (``lemon chat``); true: wherever the app boots;
    false: nowhere."""
    lease_ms: Annotated[int, msgspec.Meta(ge=2000, le=3_600_000)] = 30_000
    """How long a fire's claim holds without renewal (renewed every ``lease_ms / 3``)."""
    poll_ms: Annotated[int, msgspec.Meta(ge=50, le=60_000)] = 1000
    """How soon job changes made by another daemon are picked up."""
    daemon_id: str | None = None
    """This daemon's name in the fire ledger (default ``host:pid``)."""
    max_jobs_per_agent: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 50
    history_keep_per_job: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 200
    retry_backoff_ms: Annotated[int, msgspec.Meta(ge=10, le=86_400_000)] = 30_000
    """The first retry's backoff after a failed fire (each later retry doubles it)."""
    audit_keep_days: Annotated[float, msgspec.Meta(gt=0, le=3650)] = 30.0
    """``cron.audit`` entries older than this are pruned (bounded batches, every tick)."""
    pause_after_idle_days: Annotated[float, msgspec.Meta(ge=0, le=3650)] = 7.0
    """A heartbeat pauses itself (one alert) when its agent had no user run for this long
    (counted from the later of that run and the heartbeat's last ``set-heartbeats``); 0:
    never."""
    daily_cost_cap_usd: Annotated[float, msgspec.Meta(gt=0)] | None = None
    """The agent's spend today (UTC, every run's reported ``cost_usd``) at or above which its
    heartbeat's scheduled fires are ``skipped: daily_cost_cap`` until the next day (one alert
    a day); unset: no cap."""


#: The config sections this app owns, by name (the ``lemon.config`` entry point names it).
SECTIONS: Final[Mapping[str, type[Section]]] = {"automation": AutomationConfig}
