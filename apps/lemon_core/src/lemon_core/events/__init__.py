"""Typed bus events: the :class:`Event` envelope, the payload records and their registry.

Registered types carry a typed, keyword-only, immutable payload record; every other type passes
through with whatever JSON-encodable payload its publisher chose. See ``docs/bus_events.md`` for
the catalog (its registered-types table is generated from :func:`registry`).
"""

from __future__ import annotations

from lemon_core.events._payload import Payload, PayloadFields, PrivateFields
from lemon_core.events.action import Action, ActionKind
from lemon_core.events.approval_pending import ApprovalPending
from lemon_core.events.approval_requested import ApprovalRequested
from lemon_core.events.approval_resolved import ApprovalDecision, ApprovalResolved
from lemon_core.events.bus_backend_changed import BusBackendChanged
from lemon_core.events.channel_delivery import ChannelDelivery
from lemon_core.events.codec import encode_json, to_builtins
from lemon_core.events.completion import Completion
from lemon_core.events.config_reload_failed import ConfigReloadFailed
from lemon_core.events.config_reloaded import ConfigReloaded
from lemon_core.events.cron_job_changed import CronJobAction, CronJobChanged
from lemon_core.events.cron_lifecycle_action import CronLifecycleAction
from lemon_core.events.cron_run_completed import CronRunCompleted
from lemon_core.events.cron_run_started import CronRunStarted
from lemon_core.events.cron_tick import CronTick
from lemon_core.events.delta import Delta
from lemon_core.events.engine_action import EngineAction, EngineActionPhase
from lemon_core.events.envelope import Event, now_ms
from lemon_core.events.error_code import NOT_RETRYABLE, ErrorCode
from lemon_core.events.goal_changed import GoalChanged
from lemon_core.events.heartbeat_alert import HeartbeatAlert
from lemon_core.events.heartbeat_suppressed import HeartbeatSuppressed
from lemon_core.events.queue_outcome import QueueOutcome, QueueOutcomeKind
from lemon_core.events.registry import (
    TOPIC_OF_TYPE,
    CastError,
    CastOk,
    CastResult,
    cast,
    coerce,
    get_field,
    is_registered,
    nested_payload_classes,
    payload_class,
    payload_classes,
    registry,
)
from lemon_core.events.routing_feedback import RoutingFeedback
from lemon_core.events.run_completed import RunCompleted
from lemon_core.events.run_events_overflow import RunEventsOverflow
from lemon_core.events.run_failed import RunFailed
from lemon_core.events.run_phase_changed import RunPhase, RunPhaseChanged
from lemon_core.events.run_started import RunStarted
from lemon_core.events.run_usage import RunUsage
from lemon_core.events.secret_changed import SecretChanged
from lemon_core.events.store_backend_changed import StoreBackendChanged
from lemon_core.events.talk_mode_changed import TalkModeChanged

__all__ = [
    "NOT_RETRYABLE",
    "TOPIC_OF_TYPE",
    "Action",
    "ActionKind",
    "ApprovalDecision",
    "ApprovalPending",
    "ApprovalRequested",
    "ApprovalResolved",
    "BusBackendChanged",
    "CastError",
    "CastOk",
    "CastResult",
    "ChannelDelivery",
    "Completion",
    "ConfigReloadFailed",
    "ConfigReloaded",
    "CronJobAction",
    "CronJobChanged",
    "CronLifecycleAction",
    "CronRunCompleted",
    "CronRunStarted",
    "CronTick",
    "Delta",
    "EngineAction",
    "EngineActionPhase",
    "ErrorCode",
    "Event",
    "GoalChanged",
    "HeartbeatAlert",
    "HeartbeatSuppressed",
    "Payload",
    "PayloadFields",
    "PrivateFields",
    "QueueOutcome",
    "QueueOutcomeKind",
    "RoutingFeedback",
    "RunCompleted",
    "RunEventsOverflow",
    "RunFailed",
    "RunPhase",
    "RunPhaseChanged",
    "RunStarted",
    "RunUsage",
    "SecretChanged",
    "StoreBackendChanged",
    "TalkModeChanged",
    "cast",
    "coerce",
    "encode_json",
    "get_field",
    "is_registered",
    "nested_payload_classes",
    "now_ms",
    "payload_class",
    "payload_classes",
    "registry",
    "to_builtins",
]
