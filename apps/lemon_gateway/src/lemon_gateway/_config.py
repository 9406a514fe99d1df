"""GatewayConfig: the ``[gateway]`` settings, strictly validated."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from lemon_core.config import GatewayConfig as GatewaySettings
from lemon_gateway.errors import GatewayConfigError

__all__ = ["GatewayConfig"]


@dataclass(frozen=True, kw_only=True, slots=True)
class GatewayConfig:
    """Gateway settings. Every bound is explicit; see the README for the overflow behaviour.

    The keys and defaults are those of the ``[gateway]`` section of the config schema
    (``lemon_core.config.GatewayConfig``); boot passes every one of them
    (:meth:`from_settings`), and a test keeps the two and the README table equal.

    * ``max_concurrent_runs``: global slots (default 2).
    * ``slot_request_timeout_s``: a slot waiter re-requests (new generation, same FIFO
      place) after this long.
    * ``require_engine_lock`` / ``engine_lock_timeout_s``: per-session lock; a run that
      cannot get it in time completes with ``error="lock_timeout"``.
    * ``max_launch_attempts`` / ``launch_retry_backoff_s``: failed launches (executor
      ``prepare`` raising) are retried this many times in total, then the run completes
      once with ``meta.synthetic=True`` and a machine-readable error; the first retry waits
      ``launch_retry_backoff_s``, each next one twice as long (``lemon_core.Backoff``).
    * ``prepare_timeout_s``: bound on one ``executor.prepare()``; past it the run completes
      with ``error_code="timeout"`` (not retried: a hung launch is not a failed one).
    * ``store_timeout_s``: bound on every store await of a run (resume state, run history)
      and of the sweep; past it the write counts as failed (the run keeps its answer and
      gets a ``store_failed`` warning) and the slot and the worker move on.
    * ``max_pending_per_conversation`` / ``max_pending_runs``: submission bounds; beyond
      them ``submit_execution`` raises GatewayOverloadedError (nothing is accepted).
    * ``record_run_history``: write a RunSummary to the RunStore for every finished run.
    * ``store_sweep_interval_s``: how often expired store entries (chat state past its
      TTL) are removed; 0 turns the sweep off.
    * ``shared_slots``: with a shared store (PostgreSQL), ``max_concurrent_runs`` is one limit
      for every daemon of the deployment (shared slot leases), not a limit per daemon.
    * ``lease_ttl_s``: how long a shared lease (engine lock, slot) outlives its last renewal
      (renewed every third of it): how soon another daemon takes over from a dead or paused
      one. Unused on one machine.
    """

    max_concurrent_runs: int = 2
    slot_request_timeout_s: float = 30.0
    require_engine_lock: bool = True
    engine_lock_timeout_s: float = 60.0
    max_launch_attempts: int = 3
    launch_retry_backoff_s: float = 0.1
    prepare_timeout_s: float = 60.0
    store_timeout_s: float = 10.0
    shutdown_grace_s: float = 10.0
    max_pending_per_conversation: int = 1_000
    max_pending_runs: int = 100_000
    record_run_history: bool = True
    store_sweep_interval_s: float = 300.0
    default_cwd: str | None = None
    shared_slots: bool = False
    lease_ttl_s: float = 15.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value: object = getattr(self, f.name)
            if f.type == "bool":
                ok = isinstance(value, bool)
            elif f.type == "int":
                ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
            elif f.type == "float":
                ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
            else:
                ok = value is None or isinstance(value, str)
            if f.name == "lease_ttl_s" and ok and not value:
                ok = False
            if not ok:
                raise GatewayConfigError(
                    f"gateway.{f.name} must be a {_describe(f.type)}, got {value!r}"
                )

    @classmethod
    def from_settings(cls, settings: GatewaySettings) -> GatewayConfig:
        """Build from the loaded ``[gateway]`` section: every key of it, and a key the
        gateway does not know is an error (never silently ignored)."""
        return cls.from_mapping(
            {name: getattr(settings, name) for name in settings.__struct_fields__}
        )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> GatewayConfig:
        """Build from a ``[gateway]`` table; unknown keys are an error naming the valid ones."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise GatewayConfigError(
                f"unknown gateway settings {unknown}; valid keys are {sorted(known)}"
            )
        return cls(**dict(data))


def _describe(type_name: object) -> str:
    return {
        "bool": "boolean",
        "int": "positive integer",
        "float": "non-negative number of seconds",
    }.get(str(type_name), "string or nothing")
