"""GatewayStatistics: the typed snapshot :meth:`Gateway.statistics` returns.

Every field is a count or a bound taken at one moment on the gateway's loop. The slot and lock
summaries come from :meth:`Scheduler.statistics` and :meth:`EngineLock.statistics`; an
operator who needs the slots, waiters and owners themselves reads ``Gateway.debug_snapshot()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "GatewayInFlight",
    "GatewayLocks",
    "GatewayRuns",
    "GatewaySlots",
    "GatewayStatistics",
    "GatewaySteers",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class GatewayRuns:
    """Live runs (by state) against their bound, and what has happened to runs so far."""

    live: int
    max_pending_runs: int
    by_state: Mapping[str, int]
    submitted: int
    completed: int
    failed: int
    cancelled: int
    synthetic: int


@dataclass(frozen=True, kw_only=True, slots=True)
class GatewaySteers:
    """Steering offers accepted by a running execution, and refused."""

    accepted: int
    refused: int


@dataclass(frozen=True, kw_only=True, slots=True)
class GatewaySlots:
    """The scheduler's slot pool, summarised."""

    max: int
    in_flight: int
    waiting: int
    generations_tracked: int
    stale_releases: int


@dataclass(frozen=True, kw_only=True, slots=True)
class GatewayLocks:
    """The engine lock, summarised."""

    held: int
    waiting: int


@dataclass(frozen=True, kw_only=True, slots=True)
class GatewayInFlight:
    """Runs recorded in flight on a local store, and the completion of a dead owner's runs."""

    recorded_locally: bool
    orphans_completed: int
    vanished_hooks: int
    vanished_hook_errors: int


@dataclass(frozen=True, kw_only=True, slots=True)
class GatewayStatistics:
    """Counters and bounds of a gateway: runs, workers, slots, locks, tasks and failures.

    ``shared`` is ``None`` unless several daemons share the store; then it holds the shared
    leases' counters and ``orphans_completed``.
    """

    state: str
    executor: str
    runs: GatewayRuns
    steers: GatewaySteers
    workers: int
    max_pending_per_conversation: int
    tasks: int
    slots: GatewaySlots
    locks: GatewayLocks
    shared: Mapping[str, object] | None
    in_flight: GatewayInFlight
    launch_failures: int
    store_failures: int
    store_swept: int
    publish_errors: int
    task_crashes: int
