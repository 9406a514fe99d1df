"""``[gateway]``: the gateway's config section (declared here, named on its AppSpec)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Final

import msgspec

from lemon_core.config import Section
from lemon_gateway.errors import GatewayConfigError

__all__ = ["GatewayConfig"]

_Count = Annotated[int, msgspec.Meta(ge=1)]
_Seconds = Annotated[float, msgspec.Meta(ge=0)]
_PATH = re.compile(r" - at `\$[^`]*`$")


class GatewayConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[gateway]``: execution slots and bounds. Every bound is explicit and checked when the
    record is made (:class:`GatewayConfigError`), by ``lemon config validate`` as by
    ``GatewayConfig(...)``; the README's ``[gateway]`` table documents each key (a test keeps
    the two equal).

    * ``max_concurrent_runs``: global slots (default 2, at most 1024).
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
      for every daemon of the deployment (shared slot leases), not a limit per daemon. A run
      waits for a shared slot as for a local one, but a store that keeps failing for
      ``engine_lock_timeout_s`` ends the wait with ``store_failed`` (nothing executed).
    * ``lease_ttl_s``: how long a shared lease (engine lock, slot) outlives its last renewal
      (renewed every third of it): how soon another daemon takes over from a dead or paused
      one. Unused on one machine. (The router's session leases have their own,
      ``[router] lease_ttl_s``.)
    """

    env_keys: ClassVar[Mapping[str, str]] = {"LEMON_MAX_CONCURRENT_RUNS": "max_concurrent_runs"}

    max_concurrent_runs: Annotated[int, msgspec.Meta(ge=1, le=1024)] = 2
    slot_request_timeout_s: _Seconds = 30.0
    require_engine_lock: bool = True
    engine_lock_timeout_s: _Seconds = 60.0
    max_launch_attempts: _Count = 3
    launch_retry_backoff_s: _Seconds = 0.1
    prepare_timeout_s: _Seconds = 60.0
    store_timeout_s: _Seconds = 10.0
    shutdown_grace_s: _Seconds = 10.0
    max_pending_per_conversation: _Count = 1_000
    max_pending_runs: _Count = 100_000
    record_run_history: bool = True
    store_sweep_interval_s: _Seconds = 300.0
    default_cwd: str | None = None
    shared_slots: bool = False
    lease_ttl_s: Annotated[float, msgspec.Meta(gt=0)] = 15.0

    def __post_init__(self) -> None:
        hints = _field_types()
        for name in self.__struct_fields__:
            try:
                msgspec.convert(getattr(self, name), hints[name], strict=True)
            except msgspec.ValidationError as exc:
                text = _PATH.sub("", str(exc))
                if ", got" not in text:
                    text += f", got {getattr(self, name)!r}"
                raise GatewayConfigError(f"gateway.{name}: {text}") from None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> GatewayConfig:
        """Build from a ``[gateway]`` table; unknown keys are an error naming the valid ones."""
        known = set(cls.__struct_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise GatewayConfigError(
                f"unknown gateway settings {unknown}; valid keys are {sorted(known)}"
            )
        return cls(**dict(data))


_TYPES: dict[str, Any] = {}


def _field_types() -> dict[str, Any]:
    if not _TYPES:
        _TYPES.update({f.name: f.type for f in msgspec.structs.fields(GatewayConfig)})
    return _TYPES


#: The config sections this app owns, by name: what the ``lemon.config`` entry point names (the
#: loader reads it without importing the rest of the app), the same as its ``AppSpec`` declares.
SECTIONS: Final[Mapping[str, type[Section]]] = {"gateway": GatewayConfig}
