"""Strict ``new``, lenient ``from_map``, ``cast``, ``coerce``, ``get_field``, no item access and
the JSON codec."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from lemon_core import EventPayloadError
from lemon_core.events import (
    Action,
    ActionKind,
    ApprovalDecision,
    ApprovalPending,
    ApprovalRequested,
    ApprovalResolved,
    CastError,
    CastOk,
    Completion,
    Delta,
    EngineAction,
    EngineActionPhase,
    Event,
    GoalChanged,
    RunCompleted,
    RunPhase,
    RunPhaseChanged,
    RunStarted,
    cast,
    coerce,
    encode_json,
    get_field,
    now_ms,
    to_builtins,
)

# -- strict new ---------------------------------------------------------------------------------


def test_new_builds_a_record_from_keywords() -> None:
    delta = Delta.new(run_id="r1", seq=3, text="hi")
    assert delta == Delta(run_id="r1", seq=3, text="hi")


def test_new_rejects_unknown_fields_naming_them() -> None:
    with pytest.raises(EventPayloadError, match=r"unknown Delta fields: \['bogus'\]"):
        Delta.new(run_id="r1", seq=1, text="x", bogus=True)


def test_new_rejects_missing_required_fields_naming_them() -> None:
    with pytest.raises(EventPayloadError, match=r"missing required Delta fields: \['seq'"):
        Delta.new(run_id="r1")


def test_new_rejects_mistyped_values() -> None:
    with pytest.raises(EventPayloadError, match=r"invalid Delta payload"):
        Delta.new(run_id="r1", seq="one", text="x")


def test_new_rejects_an_enum_value_outside_the_set() -> None:
    with pytest.raises(EventPayloadError, match="kind"):
        Action.new(id="a", kind="teleport", title="t")


def test_new_builds_nested_records_strictly() -> None:
    completed = RunCompleted.new(completed={"ok": True})
    assert completed.completed == Completion(ok=True)
    with pytest.raises(EventPayloadError, match="unknown Completion fields"):
        RunCompleted.new(completed={"ok": True, "bogus": 1})


def test_new_converts_enum_strings_to_members() -> None:
    action = EngineAction.new(action={"id": "a", "kind": "tool", "title": "t"}, phase="completed")
    assert action.action.kind is ActionKind.TOOL
    assert action.phase is EngineActionPhase.COMPLETED
    assert action.phase == "completed"


def test_run_phase_changed_build_stamps_the_time_and_validates_the_phase() -> None:
    before = dt.datetime.now(dt.UTC)
    changed = RunPhaseChanged.build(run_id="r", phase="streaming", source="router")
    assert changed.phase is RunPhase.STREAMING
    assert changed.at is not None
    assert changed.at >= before
    with pytest.raises(EventPayloadError):
        RunPhaseChanged.build(run_id="r", phase="running", source="router")


# -- lenient from_map ---------------------------------------------------------------------------


def test_from_map_passes_a_record_through_unchanged() -> None:
    delta = Delta(run_id="r", seq=1, text="x")
    assert Delta.from_map(delta) is delta


def test_from_map_drops_unknown_keys_at_every_level() -> None:
    raw = {
        "action": {"id": "a", "kind": "tool", "title": "t", "zz_extra": 1},
        "zz_unknown": True,
    }
    assert EngineAction.from_map(raw) == EngineAction(
        action=Action(id="a", kind=ActionKind.TOOL, title="t")
    )


def test_from_map_keeps_false() -> None:
    assert GoalChanged.from_map({"goal_id": "g", "loop_auto_enabled": False}).loop_auto_enabled is (
        False
    )
    done = RunCompleted.from_map({"completed": {"ok": False}, "duration_ms": 0})
    assert done.completed.ok is False


def test_from_map_converts_unambiguous_scalars() -> None:
    assert Delta.from_map({"run_id": "r", "seq": "7", "text": "x"}).seq == 7


def test_from_map_still_requires_required_fields() -> None:
    with pytest.raises(EventPayloadError, match="missing required ApprovalPending fields"):
        ApprovalRequested.from_map({"approval_id": "a", "pending": {"id": "p"}})


def test_from_map_accepts_the_legacy_flat_completion_shape() -> None:
    done = RunCompleted.from_map({"ok": True, "answer": "done", "duration_ms": 12})
    assert done == RunCompleted(completed=Completion(ok=True, answer="done"), duration_ms=12)


def test_from_map_rejects_a_record_of_another_class_and_non_mappings() -> None:
    with pytest.raises(EventPayloadError, match="got a RunStarted record"):
        Delta.from_map(RunStarted(run_id="r"))  # type: ignore[arg-type]  # misuse on purpose
    with pytest.raises(EventPayloadError, match="requires a mapping"):
        Delta.from_map(["run_id", "r"])  # type: ignore[arg-type]  # misuse on purpose


# -- cast and coerce ----------------------------------------------------------------------------


def test_cast_returns_the_record_for_a_valid_mapping() -> None:
    result = cast("approval_resolved", {"approval_id": "a", "decision": "expired"})
    assert isinstance(result, CastOk)
    assert result.value == ApprovalResolved(approval_id="a", decision=ApprovalDecision.EXPIRED)


def test_cast_reports_a_rejected_payload_without_raising() -> None:
    result = cast("run_completed", {"answer": "no ok"})
    assert isinstance(result, CastError)
    assert "RunCompleted rejected the payload" in result.reason
    assert "ok" in result.reason


def test_cast_reports_a_non_mapping_payload() -> None:
    result = cast("delta", "just text")
    assert isinstance(result, CastError)
    assert "Delta requires a mapping payload" in result.reason


def test_cast_passes_unregistered_types_and_records_through() -> None:
    assert cast("engine_event", 42) == CastOk(value=42)
    record = Delta(run_id="r", seq=1, text="x")
    assert cast("delta", record) == CastOk(value=record)


def test_coerce_converts_what_it_can_and_returns_the_input_otherwise() -> None:
    assert coerce("delta", {"run_id": "r", "seq": 1, "text": "x"}) == Delta(
        run_id="r", seq=1, text="x"
    )
    broken = {"run_id": "r"}
    assert coerce("delta", broken) is broken
    assert coerce("delta", "text") == "text"
    assert coerce("custom_thing", {"a": 1}) == {"a": 1}


# -- reading ------------------------------------------------------------------------------------


def test_item_access_on_a_payload_raises_with_a_hint() -> None:
    delta = Delta(run_id="r", seq=1, text="x")
    with pytest.raises(TypeError, match="attribute access only"):
        delta["text"]


def test_get_field_reads_records_and_plain_mappings() -> None:
    completed = RunCompleted.new(completed={"ok": True, "usage": {"input_tokens": 3}})
    assert get_field(completed.completed, "ok") is True
    assert get_field(completed.completed.usage, "input_tokens") == 3
    assert get_field({"ok": False}, "ok") is False
    assert get_field(completed, "missing", "default") == "default"
    assert get_field(None, "ok") is None


# -- codec --------------------------------------------------------------------------------------


def test_private_fields_are_left_out_of_json() -> None:
    pending = ApprovalPending(id="p", tool="bash", invocation_context_key="secret-ctx")
    requested = ApprovalRequested(approval_id="a", pending=pending)
    encoded = encode_json(Event.new("approval_requested", requested))
    assert b"secret-ctx" not in encoded
    assert b"invocation_context_key" not in encoded
    assert pending.invocation_context_key == "secret-ctx"


def test_json_uses_enum_values_and_iso_datetimes() -> None:
    at = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    changed = RunPhaseChanged(run_id="r", phase=RunPhase.STREAMING, source="router", at=at)
    data = json.loads(encode_json(changed))
    assert data["phase"] == "streaming"
    assert data["at"] == "2026-01-02T03:04:05+00:00"


def test_to_builtins_round_trips_through_from_map() -> None:
    requested = ApprovalRequested(
        approval_id="a", pending=ApprovalPending(id="p", tool="bash", action={"k": [1, 2]})
    )
    assert ApprovalRequested.from_map(to_builtins(requested)) == requested


# -- envelope -----------------------------------------------------------------------------------


def test_event_new_stamps_wall_clock_time_and_keeps_meta() -> None:
    before = now_ms()
    event = Event.new("custom", {"a": 1}, {"run_id": "r"})
    after = now_ms()
    assert before <= event.ts_ms <= after
    assert event.meta["run_id"] == "r"
    assert Event.new("custom").meta == {}
    assert Event.new("historic", ts_ms=1_234_567_890).ts_ms == 1_234_567_890


def test_event_new_rejects_an_empty_type() -> None:
    with pytest.raises(TypeError, match="non-empty string"):
        Event.new("")


def test_event_is_immutable() -> None:
    event = Event.new("custom")
    with pytest.raises(AttributeError):
        event.type = "other"  # type: ignore[misc]  # proving it is frozen
