"""The registry holds every type of the catalog, with the seed's fields, defaults and enums."""

from __future__ import annotations

import pytest

from lemon_core.events import (
    Action,
    ActionKind,
    ApprovalDecision,
    ApprovalPending,
    ApprovalRequested,
    ApprovalResolved,
    BusBackendChanged,
    ChannelDelivery,
    Completion,
    ConfigReloaded,
    ConfigReloadFailed,
    CronJobAction,
    CronJobChanged,
    CronLifecycleAction,
    CronRunCompleted,
    CronRunStarted,
    CronTick,
    Delta,
    EngineAction,
    EngineActionPhase,
    GoalChanged,
    HeartbeatAlert,
    HeartbeatSuppressed,
    Payload,
    QueueOutcome,
    RoutingFeedback,
    RunCompleted,
    RunEventsOverflow,
    RunFailed,
    RunPhase,
    RunPhaseChanged,
    RunStarted,
    RunUsage,
    SecretChanged,
    StoreBackendChanged,
    TalkModeChanged,
    is_registered,
    nested_payload_classes,
    payload_class,
    payload_classes,
    registry,
)

EXPECTED = {
    "run_started": RunStarted,
    "delta": Delta,
    "run_completed": RunCompleted,
    "run_failed": RunFailed,
    "run_phase_changed": RunPhaseChanged,
    "engine_action": EngineAction,
    "queue_outcome": QueueOutcome,
    "run_events_overflow": RunEventsOverflow,
    "approval_requested": ApprovalRequested,
    "approval_resolved": ApprovalResolved,
    "cron_tick": CronTick,
    "cron_run_started": CronRunStarted,
    "cron_run_completed": CronRunCompleted,
    "cron_job_created": CronJobChanged,
    "cron_job_updated": CronJobChanged,
    "cron_job_deleted": CronJobChanged,
    "cron_lifecycle_action": CronLifecycleAction,
    "heartbeat_alert": HeartbeatAlert,
    "heartbeat_suppressed": HeartbeatSuppressed,
    "config_reloaded": ConfigReloaded,
    "config_reload_failed": ConfigReloadFailed,
    "secret_changed": SecretChanged,
    "talk_mode_changed": TalkModeChanged,
    "bus_backend_changed": BusBackendChanged,
    "store_backend_changed": StoreBackendChanged,
    "goal_set": GoalChanged,
    "goal_paused": GoalChanged,
    "goal_resumed": GoalChanged,
    "goal_completed": GoalChanged,
    "goal_cleared": GoalChanged,
    "goal_continuation_submitted": GoalChanged,
    "goal_loop_verdict": GoalChanged,
    "goal_loop_status": GoalChanged,
    "routing_feedback": RoutingFeedback,
    "channel_delivery": ChannelDelivery,
}

# (fields in order, required) per the catalog table.
FIELDS: dict[type[Payload], tuple[tuple[str, ...], set[str]]] = {
    RunStarted: (
        ("run_id", "session_key", "engine", "model", "provider", "thinking_level"),
        {"run_id"},
    ),
    Delta: (("run_id", "seq", "text", "ts_ms", "meta"), {"run_id", "seq", "text"}),
    RunCompleted: (("completed", "duration_ms"), {"completed"}),
    RunFailed: (("run_id", "session_key", "reason"), {"run_id", "reason"}),
    RunPhaseChanged: (
        (
            "run_id",
            "session_key",
            "conversation_key",
            "phase",
            "previous_phase",
            "source",
            "at",
        ),
        {"run_id", "phase", "source"},
    ),
    EngineAction: (("action", "engine", "phase", "ok", "message", "level"), {"action"}),
    QueueOutcome: (
        ("run_id", "session_key", "outcome", "into_run_id", "mode", "position", "reason"),
        {"run_id", "outcome"},
    ),
    RunEventsOverflow: (("run_id", "session_key"), {"run_id"}),
    ApprovalRequested: (("approval_id", "pending"), {"approval_id", "pending"}),
    ApprovalResolved: (("approval_id", "decision", "pending"), {"approval_id", "decision"}),
    CronTick: (("timestamp_ms",), {"timestamp_ms"}),
    ChannelDelivery: (
        (
            "intent_id",
            "run_id",
            "session_key",
            "channel_id",
            "account_id",
            "peer_kind",
            "peer_id",
            "thread_id",
            "kind",
            "text_preview",
            "ok",
            "error",
            "duration_ms",
            "ts_ms",
        ),
        {"intent_id", "channel_id", "kind", "ok"},
    ),
    Completion: (
        (
            "ok",
            "answer",
            "error",
            "error_code",
            "engine",
            "resume",
            "usage",
            "run_id",
            "session_key",
            "synthetic",
            "retry_of",
            "warning",
            "meta",
        ),
        {"ok"},
    ),
    Action: (("id", "kind", "title", "detail"), {"id", "kind", "title"}),
    ApprovalPending: (
        (
            "id",
            "run_id",
            "session_id",
            "session_key",
            "agent_id",
            "tool",
            "tool_call_id",
            "action",
            "rationale",
            "requested_at_ms",
            "expires_at_ms",
        ),
        {"id", "tool"},
    ),
}


def test_registry_maps_every_catalog_type_to_its_payload_class() -> None:
    assert dict(registry()) == EXPECTED
    for event_type, cls in EXPECTED.items():
        assert payload_class(event_type) is cls
        assert is_registered(event_type)


def test_unregistered_types_are_not_found() -> None:
    assert payload_class("engine_event") is None
    assert not is_registered("checkpoint_created")
    assert not is_registered("completion")


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        registry()["bogus"] = Delta  # type: ignore[index]  # proving it is immutable


def test_payload_classes_include_the_nested_ones_once_each() -> None:
    classes = payload_classes()
    assert len(classes) == len(set(classes)) == 30
    assert nested_payload_classes() == (Completion, RunUsage, Action, ApprovalPending)
    assert set(nested_payload_classes()) <= set(classes)


@pytest.mark.parametrize("cls", payload_classes(), ids=lambda cls: cls.__name__)
def test_every_payload_reports_its_version(cls: type[Payload]) -> None:
    # Completion is at 2: its error code, usage, synthetic and retry_of became typed fields.
    assert cls.event_version() == (2 if cls is Completion else 1)


@pytest.mark.parametrize("cls", list(FIELDS), ids=lambda cls: cls.__name__)
def test_fields_and_required_fields_match_the_catalog(cls: type[Payload]) -> None:
    names, required = FIELDS[cls]
    assert cls.fields() == names
    assert cls.payload_fields().required == required


def test_private_fields_are_declared_apart_from_the_encoded_fields() -> None:
    assert ApprovalPending.private_fields == {"invocation_context_key"}
    assert ApprovalPending.payload_fields().private == {"invocation_context_key"}
    assert "invocation_context_key" not in ApprovalPending.fields()


def test_module_event_types_may_differ_from_their_registered_types() -> None:
    assert GoalChanged.event_type == "goal_changed"
    assert CronJobChanged.event_type == "cron_job_changed"
    assert {Completion.event_type, Action.event_type, ApprovalPending.event_type} == {
        "completion",
        "action",
        "approval_pending",
    }
    for cls in (RunStarted, Delta, RunCompleted, EngineAction, ChannelDelivery):
        assert payload_class(cls.event_type) is cls


def test_enums_have_the_catalog_members() -> None:
    assert [k.value for k in ActionKind] == [
        "tool",
        "command",
        "file_change",
        "web_search",
        "fetch",
        "subagent",
        "reasoning",
        "note",
        "approval",
        "compaction",
    ]
    assert [p.value for p in EngineActionPhase] == ["started", "updated", "completed"]
    assert [d.value for d in ApprovalDecision] == [
        "approve_once",
        "approve_session",
        "approve_agent",
        "approve_global",
        "deny",
        "timeout",
        "cancelled",
        "expired",
    ]
    assert [p.value for p in RunPhase] == [
        "accepted",
        "queued_in_session",
        "waiting_for_slot",
        "dispatched_to_gateway",
        "starting_engine",
        "streaming",
        "finalizing",
        "completed",
        "failed",
        "aborted",
    ]
    assert {p for p in RunPhase if p.terminal} == {
        RunPhase.COMPLETED,
        RunPhase.FAILED,
        RunPhase.ABORTED,
    }
    assert [a.value for a in CronJobAction] == ["created", "updated", "deleted"]


def test_defaults_match_the_catalog() -> None:
    assert EngineAction(action=Action(id="a", kind=ActionKind.TOOL, title="t")).phase == (
        EngineActionPhase.UPDATED
    )
    assert RunStarted(run_id="r").engine == "lemon"
    assert Delta(run_id="r", seq=0, text="").meta == {}
    assert CronRunStarted(cron_run_id="c", job_id="j").triggered_by == "schedule"
    assert CronRunCompleted(cron_run_id="c", job_id="j").suppressed is False
    assert HeartbeatAlert(agent_id="a").severity == "warning"
    assert ConfigReloaded(reload_id="r").changed_paths == []
    assert Action(id="a", kind=ActionKind.NOTE, title="t").detail == {}


def test_mutable_defaults_are_not_shared_between_records() -> None:
    first = Delta(run_id="r", seq=0, text="")
    second = Delta(run_id="r", seq=1, text="")
    first.meta["x"] = 1
    assert second.meta == {}
