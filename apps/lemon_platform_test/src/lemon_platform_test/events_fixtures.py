"""Builders of valid event payloads for tests, each taking keyword overrides.

Every builder fills the required fields with sample values and applies the overrides through the
record's strict ``new``: an unknown override raises ``EventPayloadError``. Nested records accept
overrides as a mapping (``approval_requested(pending={"tool": "read"})``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lemon_core.events import (
    Action,
    ApprovalPending,
    ApprovalRequested,
    ApprovalResolved,
    BusBackendChanged,
    ChannelDelivery,
    Completion,
    ConfigReloaded,
    CronJobChanged,
    CronLifecycleAction,
    CronRunCompleted,
    CronRunStarted,
    CronTick,
    Delta,
    EngineAction,
    GoalChanged,
    HeartbeatAlert,
    QueueOutcome,
    RoutingFeedback,
    RunCompleted,
    RunEventsOverflow,
    RunFailed,
    RunPhaseChanged,
    RunStarted,
    SecretChanged,
    StoreBackendChanged,
    TalkModeChanged,
)

__all__ = [
    "SAMPLE_TS_MS",
    "action",
    "approval_pending",
    "approval_requested",
    "approval_resolved",
    "bus_backend_changed",
    "channel_delivery",
    "completion",
    "config_reloaded",
    "cron_job_changed",
    "cron_lifecycle_action",
    "cron_run_completed",
    "cron_run_started",
    "cron_tick",
    "delta",
    "engine_action",
    "goal_changed",
    "heartbeat_alert",
    "queue_outcome",
    "routing_feedback",
    "run_completed",
    "run_events_overflow",
    "run_failed",
    "run_phase_changed",
    "run_started",
    "secret_changed",
    "store_backend_changed",
    "talk_mode_changed",
]

#: The wall-clock sample used for timestamps.
SAMPLE_TS_MS = 1_754_800_000_000


def _merge(defaults: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    return {**defaults, **overrides}


def completion(**overrides: Any) -> Completion:
    """A successful completion (``ok=True``, ``answer="ok"``)."""
    return Completion.new(**_merge({"ok": True, "answer": "ok"}, overrides))


def action(**overrides: Any) -> Action:
    """A tool action ``act_1``."""
    return Action.new(
        **_merge({"id": "act_1", "kind": "tool", "title": "Example action"}, overrides)
    )


def approval_pending(**overrides: Any) -> ApprovalPending:
    """A pending approval ``appr_1`` for the ``bash`` tool."""
    return ApprovalPending.new(**_merge({"id": "appr_1", "tool": "bash"}, overrides))


def run_started(**overrides: Any) -> RunStarted:
    """A run ``run_test`` started."""
    return RunStarted.new(**_merge({"run_id": "run_test"}, overrides))


def delta(**overrides: Any) -> Delta:
    """Delta ``seq=0`` of ``run_test`` with text ``"delta"``."""
    return Delta.new(**_merge({"run_id": "run_test", "seq": 0, "text": "delta"}, overrides))


_COMPLETION_SHORTHAND = frozenset(Completion.fields())


def run_completed(**overrides: Any) -> RunCompleted:
    """A completed run. Completion fields given at top level (``ok``, ``answer``, ``error``, ...)
    are lifted into the nested completion; an explicit ``completed=`` wins over them."""
    lifted = {k: v for k, v in overrides.items() if k in _COMPLETION_SHORTHAND}
    rest = {k: v for k, v in overrides.items() if k not in _COMPLETION_SHORTHAND}
    if "completed" not in rest:
        rest["completed"] = completion(**lifted)
    return RunCompleted.new(**rest)


def run_failed(**overrides: Any) -> RunFailed:
    """A run ``run_test`` failed with reason ``"test_failure"``."""
    return RunFailed.new(**_merge({"run_id": "run_test", "reason": "test_failure"}, overrides))


def run_phase_changed(**overrides: Any) -> RunPhaseChanged:
    """Run ``run_test`` moved to ``streaming``."""
    defaults = {"run_id": "run_test", "phase": "streaming", "source": "lemon_platform_test"}
    return RunPhaseChanged.new(**_merge(defaults, overrides))


def queue_outcome(**overrides: Any) -> QueueOutcome:
    """Run ``run_test``'s message was steered into the live run ``run_live``."""
    defaults = {"run_id": "run_test", "outcome": "steered", "into_run_id": "run_live"}
    return QueueOutcome.new(**_merge(defaults, overrides))


def run_events_overflow(**overrides: Any) -> RunEventsOverflow:
    """The session missed events of ``run_test``."""
    return RunEventsOverflow.new(**_merge({"run_id": "run_test"}, overrides))


def engine_action(**overrides: Any) -> EngineAction:
    """An updated tool action (``action=`` may be a mapping of Action overrides)."""
    nested = overrides.pop("action", None)
    built = nested if isinstance(nested, Action) else action(**dict(nested or {}))
    return EngineAction.new(action=built, **overrides)


def _with_pending(overrides: dict[str, Any], *, required: bool) -> dict[str, Any]:
    pending = overrides.get("pending")
    if isinstance(pending, Mapping):
        overrides["pending"] = approval_pending(**pending)
    elif "pending" not in overrides and required:
        overrides["pending"] = approval_pending()
    return overrides


def approval_requested(**overrides: Any) -> ApprovalRequested:
    """Approval ``appr_1`` requested (``pending=`` may be a mapping of overrides)."""
    fields = _with_pending(_merge({"approval_id": "appr_1"}, overrides), required=True)
    return ApprovalRequested.new(**fields)


def approval_resolved(**overrides: Any) -> ApprovalResolved:
    """Approval ``appr_1`` approved once (``pending=`` may be a mapping of overrides)."""
    fields = _merge({"approval_id": "appr_1", "decision": "approve_once"}, overrides)
    return ApprovalResolved.new(**_with_pending(fields, required=False))


def cron_tick(**overrides: Any) -> CronTick:
    """A tick at :data:`SAMPLE_TS_MS`."""
    return CronTick.new(**_merge({"timestamp_ms": SAMPLE_TS_MS}, overrides))


def cron_run_started(**overrides: Any) -> CronRunStarted:
    """Cron run ``cron_run_1`` of job ``job_1`` started."""
    return CronRunStarted.new(**_merge({"cron_run_id": "cron_run_1", "job_id": "job_1"}, overrides))


def cron_run_completed(**overrides: Any) -> CronRunCompleted:
    """Cron run ``cron_run_1`` of job ``job_1`` completed with status ``ok``."""
    defaults = {"cron_run_id": "cron_run_1", "job_id": "job_1", "status": "ok"}
    return CronRunCompleted.new(**_merge(defaults, overrides))


def cron_job_changed(**overrides: Any) -> CronJobChanged:
    """Job ``job_1`` created."""
    return CronJobChanged.new(**_merge({"action": "created", "job_id": "job_1"}, overrides))


def cron_lifecycle_action(**overrides: Any) -> CronLifecycleAction:
    """An audited ``created`` action."""
    return CronLifecycleAction.new(**_merge({"audit": {"action": "created"}}, overrides))


def heartbeat_alert(**overrides: Any) -> HeartbeatAlert:
    """A heartbeat alert for agent ``default``."""
    return HeartbeatAlert.new(**_merge({"agent_id": "default"}, overrides))


def config_reloaded(**overrides: Any) -> ConfigReloaded:
    """Reload ``reload_1`` succeeded."""
    return ConfigReloaded.new(**_merge({"reload_id": "reload_1"}, overrides))


def secret_changed(**overrides: Any) -> SecretChanged:
    """Secret ``example`` of owner ``default`` was put (never a value)."""
    defaults = {"owner": "default", "name": "example", "action": "put"}
    return SecretChanged.new(**_merge(defaults, overrides))


def bus_backend_changed(**overrides: Any) -> BusBackendChanged:
    """The redis backend came back after an outage (subscribers were told to resync)."""
    defaults = {"backend": "redis", "running": True, "resync": True, "reason": "reconnected"}
    return BusBackendChanged.new(**_merge(defaults, overrides))


def store_backend_changed(**overrides: Any) -> StoreBackendChanged:
    """The postgres store stopped answering (store calls fail fast until a probe succeeds)."""
    defaults = {"backend": "postgres", "running": False, "reason": "PoolTimeout"}
    return StoreBackendChanged.new(**_merge(defaults, overrides))


def talk_mode_changed(**overrides: Any) -> TalkModeChanged:
    """Session ``agent:default:main`` switched to voice."""
    return TalkModeChanged.new(
        **_merge({"session_key": "agent:default:main", "mode": "voice"}, overrides)
    )


def goal_changed(**overrides: Any) -> GoalChanged:
    """Goal ``goal_1``, active."""
    return GoalChanged.new(**_merge({"goal_id": "goal_1", "status": "active"}, overrides))


def routing_feedback(**overrides: Any) -> RoutingFeedback:
    """A successful routed run."""
    defaults = {"fingerprint_key": "fp_1", "outcome": "success", "duration_ms": 12}
    return RoutingFeedback.new(**_merge(defaults, overrides))


def channel_delivery(**overrides: Any) -> ChannelDelivery:
    """A successful ``final_text`` dispatch on telegram."""
    defaults = {"intent_id": "intent_1", "channel_id": "telegram", "kind": "final_text", "ok": True}
    return ChannelDelivery.new(**_merge(defaults, overrides))
