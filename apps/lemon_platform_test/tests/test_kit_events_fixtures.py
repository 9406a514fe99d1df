"""The payload builders: valid records, keyword overrides, strictness."""

from __future__ import annotations

import types

import pytest

from lemon_core import EventPayloadError
from lemon_core.events import (
    ActionKind,
    ApprovalDecision,
    ApprovalPending,
    CastOk,
    Completion,
    Payload,
    cast,
    encode_json,
)
from lemon_platform_test import events_fixtures

BUILDERS = {
    "run_started": events_fixtures.run_started,
    "delta": events_fixtures.delta,
    "run_completed": events_fixtures.run_completed,
    "run_failed": events_fixtures.run_failed,
    "run_phase_changed": events_fixtures.run_phase_changed,
    "engine_action": events_fixtures.engine_action,
    "approval_requested": events_fixtures.approval_requested,
    "approval_resolved": events_fixtures.approval_resolved,
    "cron_tick": events_fixtures.cron_tick,
    "cron_run_started": events_fixtures.cron_run_started,
    "cron_run_completed": events_fixtures.cron_run_completed,
    "cron_job_created": events_fixtures.cron_job_changed,
    "cron_lifecycle_action": events_fixtures.cron_lifecycle_action,
    "heartbeat_alert": events_fixtures.heartbeat_alert,
    "config_reloaded": events_fixtures.config_reloaded,
    "secret_changed": events_fixtures.secret_changed,
    "talk_mode_changed": events_fixtures.talk_mode_changed,
    "bus_backend_changed": events_fixtures.bus_backend_changed,
    "goal_set": events_fixtures.goal_changed,
    "routing_feedback": events_fixtures.routing_feedback,
    "channel_delivery": events_fixtures.channel_delivery,
}


@pytest.mark.parametrize("event_type", list(BUILDERS))
def test_builders_return_records_that_cast_to_themselves(event_type: str) -> None:
    built = BUILDERS[event_type]()
    assert isinstance(built, Payload)
    assert cast(event_type, built) == CastOk(value=built)
    assert encode_json(built)


def test_builder_defaults() -> None:
    delta = events_fixtures.delta()
    assert (delta.run_id, delta.seq, delta.text) == ("run_test", 0, "delta")
    assert events_fixtures.run_started().run_id == "run_test"
    assert events_fixtures.run_failed().reason == "test_failure"
    pending = events_fixtures.approval_pending()
    assert (pending.id, pending.tool) == ("appr_1", "bash")
    assert events_fixtures.approval_resolved().decision is ApprovalDecision.APPROVE_ONCE
    assert events_fixtures.cron_tick().timestamp_ms == events_fixtures.SAMPLE_TS_MS
    assert events_fixtures.cron_run_completed().status == "ok"
    delivery = events_fixtures.channel_delivery()
    assert (delivery.intent_id, delivery.channel_id, delivery.kind, delivery.ok) == (
        "intent_1",
        "telegram",
        "final_text",
        True,
    )
    assert events_fixtures.completion() == Completion(ok=True, answer="ok")
    assert events_fixtures.action().kind is ActionKind.TOOL


def test_overrides_replace_defaults() -> None:
    delta = events_fixtures.delta(seq=5, text="hi", run_id="run_9")
    assert (delta.run_id, delta.seq, delta.text) == ("run_9", 5, "hi")


def test_unknown_overrides_raise() -> None:
    with pytest.raises(EventPayloadError, match="bogus"):
        events_fixtures.delta(bogus=True)


def test_run_completed_lifts_completion_fields_and_an_explicit_completed_wins() -> None:
    done = events_fixtures.run_completed(ok=False, answer="done", error="boom", duration_ms=30)
    assert done.completed == Completion(ok=False, answer="done", error="boom")
    assert done.duration_ms == 30
    explicit = events_fixtures.run_completed(completed=Completion(ok=True), ok=False)
    assert explicit.completed.ok is True


def test_nested_pending_overrides_build_records() -> None:
    requested = events_fixtures.approval_requested(pending={"tool": "read"})
    resolved = events_fixtures.approval_resolved(pending={"tool": "read"})
    assert isinstance(requested.pending, ApprovalPending)
    assert requested.pending.tool == "read"
    assert resolved.pending is not None
    assert resolved.pending.tool == "read"
    assert events_fixtures.approval_resolved().pending is None


def test_engine_action_takes_action_overrides() -> None:
    built = events_fixtures.engine_action(action={"kind": "command"}, phase="completed", ok=False)
    assert built.action.kind is ActionKind.COMMAND
    assert built.ok is False


def test_the_lemon_events_fixture_is_the_builder_module(lemon_events: types.ModuleType) -> None:
    assert lemon_events.delta(seq=2).seq == 2
