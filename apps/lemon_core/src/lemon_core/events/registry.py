"""The registry of typed event payloads: event type string -> payload record class.

A type is registered when its payload crosses an app boundary (the platform contract topics).
Unregistered types pass through the Bus untouched. ``cast`` is the checking conversion used at
trust boundaries (it returns a result, never raises); ``coerce`` is the lenient normalizer used
once at a consumer's entry point (it never raises and returns its input when it cannot convert).
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

import msgspec

from lemon_core.errors import EventPayloadError
from lemon_core.events._payload import Payload
from lemon_core.events.action import Action
from lemon_core.events.approval_pending import ApprovalPending
from lemon_core.events.approval_requested import ApprovalRequested
from lemon_core.events.approval_resolved import ApprovalResolved
from lemon_core.events.bus_backend_changed import BusBackendChanged
from lemon_core.events.channel_delivery import ChannelDelivery
from lemon_core.events.completion import Completion
from lemon_core.events.config_reload_failed import ConfigReloadFailed
from lemon_core.events.config_reloaded import ConfigReloaded
from lemon_core.events.cron_job_changed import CronJobChanged
from lemon_core.events.cron_lifecycle_action import CronLifecycleAction
from lemon_core.events.cron_run_completed import CronRunCompleted
from lemon_core.events.cron_run_started import CronRunStarted
from lemon_core.events.cron_tick import CronTick
from lemon_core.events.delta import Delta
from lemon_core.events.engine_action import EngineAction
from lemon_core.events.goal_changed import GoalChanged
from lemon_core.events.heartbeat_alert import HeartbeatAlert
from lemon_core.events.heartbeat_suppressed import HeartbeatSuppressed
from lemon_core.events.queue_outcome import QueueOutcome
from lemon_core.events.routing_feedback import RoutingFeedback
from lemon_core.events.run_completed import RunCompleted
from lemon_core.events.run_events_overflow import RunEventsOverflow
from lemon_core.events.run_failed import RunFailed
from lemon_core.events.run_phase_changed import RunPhaseChanged
from lemon_core.events.run_started import RunStarted
from lemon_core.events.run_usage import RunUsage
from lemon_core.events.secret_changed import SecretChanged
from lemon_core.events.store_backend_changed import StoreBackendChanged
from lemon_core.events.talk_mode_changed import TalkModeChanged

__all__ = [
    "TOPIC_OF_TYPE",
    "CastError",
    "CastOk",
    "CastResult",
    "cast",
    "coerce",
    "get_field",
    "is_registered",
    "nested_payload_classes",
    "payload_class",
    "payload_classes",
    "registry",
]

_GOAL_TYPES = (
    "goal_set",
    "goal_paused",
    "goal_resumed",
    "goal_completed",
    "goal_cleared",
    "goal_continuation_submitted",
    "goal_loop_verdict",
    "goal_loop_status",
)

# (topic, type, class) in catalog order.
_ENTRIES: tuple[tuple[str, str, type[Payload]], ...] = (
    ("run:<run_id>", "run_started", RunStarted),
    ("run:<run_id>", "delta", Delta),
    ("run:<run_id>", "run_completed", RunCompleted),
    ("run:<run_id>", "run_failed", RunFailed),
    ("run:<run_id>", "run_phase_changed", RunPhaseChanged),
    ("run:<run_id>", "engine_action", EngineAction),
    ("session:<session_key>", "queue_outcome", QueueOutcome),
    ("session:<session_key>", "run_events_overflow", RunEventsOverflow),
    ("exec_approvals", "approval_requested", ApprovalRequested),
    ("exec_approvals", "approval_resolved", ApprovalResolved),
    ("cron", "cron_tick", CronTick),
    ("cron", "cron_run_started", CronRunStarted),
    ("cron", "cron_run_completed", CronRunCompleted),
    ("cron", "cron_job_created", CronJobChanged),
    ("cron", "cron_job_updated", CronJobChanged),
    ("cron", "cron_job_deleted", CronJobChanged),
    ("cron", "cron_lifecycle_action", CronLifecycleAction),
    ("cron", "heartbeat_alert", HeartbeatAlert),
    ("cron", "heartbeat_suppressed", HeartbeatSuppressed),
    ("system", "config_reloaded", ConfigReloaded),
    ("system", "config_reload_failed", ConfigReloadFailed),
    ("system", "secret_changed", SecretChanged),
    ("system", "talk_mode_changed", TalkModeChanged),
    ("system", "bus_backend_changed", BusBackendChanged),
    ("system", "store_backend_changed", StoreBackendChanged),
    *(("goals", goal_type, GoalChanged) for goal_type in _GOAL_TYPES),
    ("routing_feedback", "routing_feedback", RoutingFeedback),
    ("channels", "channel_delivery", ChannelDelivery),
)

_REGISTRY: Mapping[str, type[Payload]] = types.MappingProxyType(
    {event_type: cls for _topic, event_type, cls in _ENTRIES}
)

#: The contract topic each registered type is published on (``run:<run_id>`` for run events).
TOPIC_OF_TYPE: Mapping[str, str] = types.MappingProxyType(
    {event_type: topic for topic, event_type, _cls in _ENTRIES}
)

_NESTED: tuple[type[Payload], ...] = (Completion, RunUsage, Action, ApprovalPending)


def registry() -> Mapping[str, type[Payload]]:
    """Every registered event type and its payload class (read-only, catalog order)."""
    return _REGISTRY


def payload_class(event_type: str) -> type[Payload] | None:
    """The payload class registered for ``event_type``, or ``None``."""
    return _REGISTRY.get(event_type)


def is_registered(event_type: str) -> bool:
    """Whether ``event_type`` has a registered payload class."""
    return event_type in _REGISTRY


def nested_payload_classes() -> tuple[type[Payload], ...]:
    """The payload classes only ever nested in another payload (never published alone)."""
    return _NESTED


def payload_classes() -> tuple[type[Payload], ...]:
    """Every payload class, registered and nested, each once."""
    seen: dict[type[Payload], None] = dict.fromkeys(_REGISTRY.values())
    seen.update(dict.fromkeys(_NESTED))
    return tuple(seen)


class CastOk(msgspec.Struct, frozen=True, kw_only=True):
    """A successful :func:`cast`: ``value`` is the record (or the unregistered input)."""

    value: Any
    ok: bool = True


class CastError(msgspec.Struct, frozen=True, kw_only=True):
    """A failed :func:`cast`: ``reason`` says what is wrong and how to fix it."""

    reason: str
    ok: bool = False


CastResult = CastOk | CastError


def cast(event_type: object, value: Any) -> CastResult:
    """Convert ``value`` to ``event_type``'s payload record for a trust boundary.

    Unregistered types are returned as they are. Never raises.
    """
    if not isinstance(event_type, str):
        return CastError(reason=f"event types are strings, got {type(event_type).__name__}")
    cls = _REGISTRY.get(event_type)
    if cls is None or isinstance(value, cls):
        return CastOk(value=value)
    if not isinstance(value, Mapping):
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        return CastError(
            reason=f"{cls.__name__} requires a mapping payload for {event_type!r}, got {shown}"
        )
    try:
        return CastOk(value=cls.from_map(value))
    except (EventPayloadError, TypeError, ValueError) as error:
        return CastError(reason=f"{cls.__name__} rejected the payload: {error}")


def coerce(event_type: object, value: Any) -> Any:
    """``event_type``'s record built leniently from ``value``, or ``value`` itself when it is
    unregistered, already the record, not a mapping, or cannot be converted. Never raises."""
    cls = _REGISTRY.get(event_type) if isinstance(event_type, str) else None
    if cls is None or isinstance(value, cls) or not isinstance(value, Mapping):
        return value
    try:
        return cls.from_map(value)
    except (EventPayloadError, TypeError, ValueError):
        return value


def get_field(obj: Any, name: str, default: Any = None) -> Any:
    """Read ``name`` from a payload record (attribute) or a plain mapping (key), else
    ``default``. Use it where a value may still be a raw mapping (``usage``, ``detail``)."""
    if isinstance(obj, Payload):
        return getattr(obj, name, default) if name in obj.fields() else default
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return default
