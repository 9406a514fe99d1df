"""The EventBridge's bus rows: the registered events of the ``channels``, ``cron`` and ``goals``
topics reach operators on the wire (``channel.delivery``, ``cron``, ``heartbeat``, ``tick``,
``goal``), over a real control plane and a WebSocket subscriber."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from lemon_control_plane import ControlPlane
from lemon_control_plane.bridge import BUS_EVENTS
from lemon_control_plane.server import EVENTS
from lemon_control_plane.testing import plane_client
from lemon_core.bus import CHANNELS, CRON, GOALS
from lemon_core.events import (
    TOPIC_OF_TYPE,
    CronJobAction,
    CronJobChanged,
    CronLifecycleAction,
    HeartbeatSuppressed,
    registry,
)
from lemon_platform_test import events_fixtures
from lemon_runtime import Runtime

#: What seed 003 maps to the wire (§6): channel delivery, cron, heartbeat, tick and goals.
SEED_MAPPED = {CHANNELS, CRON, GOALS}


def plane_of(runtime: Runtime) -> ControlPlane:
    plane = runtime.handle("lemon_control_plane")
    assert isinstance(plane, ControlPlane)
    return plane


async def test_a_channel_delivery_reaches_a_websocket_subscriber_as_channel_delivery(
    boot: Callable[..., Runtime],
) -> None:
    async with boot() as runtime, plane_client(plane_of(runtime))() as c:
        hello = await c.call("health")
        assert hello is not None
        delivery = events_fixtures.channel_delivery(
            intent_id="int_1",
            run_id="run_1",
            session_key="agent:default:telegram:1:dm:42",
            channel_id="telegram",
            account_id="1",
            peer_kind="dm",
            peer_id="42",
            kind="final_text",
            text_preview="hello",
            ok=True,
            duration_ms=12,
            ts_ms=1_000,
        )
        runtime.bus.broadcast_event(CHANNELS, "channel_delivery", delivery)
        frame = await c.event("channel.delivery", intentId="int_1")
    assert frame["payload"] == {
        "intentId": "int_1",
        "runId": "run_1",
        "sessionKey": "agent:default:telegram:1:dm:42",
        "channelId": "telegram",
        "accountId": "1",
        "peerKind": "dm",
        "peerId": "42",
        "threadId": None,
        "kind": "final_text",
        "textPreview": "hello",
        "ok": True,
        "error": None,
        "durationMs": 12,
        "tsMs": 1_000,
    }


EXAMPLES: list[tuple[str, Any, str, dict[str, Any]]] = [
    ("cron_tick", events_fixtures.cron_tick(timestamp_ms=5), "tick", {"timestampMs": 5}),
    (
        "cron_run_started",
        events_fixtures.cron_run_started(cron_run_id="cr_1", job_id="job_1"),
        "cron",
        {"type": "run_started", "cronRunId": "cr_1", "jobId": "job_1"},
    ),
    (
        "cron_run_completed",
        events_fixtures.cron_run_completed(cron_run_id="cr_2", job_id="job_1"),
        "cron",
        {"type": "run_completed", "cronRunId": "cr_2", "jobId": "job_1"},
    ),
    (
        "cron_job_created",
        events_fixtures.cron_job_changed(
            job_id="job_3",
            job={"id": "job_3", "name": "n", "schedule": "every 1s", "next_run_at_ms": 7},
        ),
        "cron.job",
        {"type": "created", "jobId": "job_3", "schedule": "every 1s", "nextRunAtMs": 7},
    ),
    (
        "cron_job_deleted",
        CronJobChanged(action=CronJobAction.DELETED, job_id="job_3", name="n"),
        "cron.job",
        {"type": "deleted", "jobId": "job_3"},
    ),
    (
        "cron_lifecycle_action",
        CronLifecycleAction(
            audit={"action": "run_skipped", "id": "a1", "job_id": "job_3", "reason": "busy"}
        ),
        "cron.audit",
        {"type": "run_skipped", "auditId": "a1", "jobId": "job_3", "changedFields": []},
    ),
    (
        "heartbeat_alert",
        events_fixtures.heartbeat_alert(agent_id="default", response="disk full"),
        "heartbeat",
        {"type": "alert", "status": "alert", "agentId": "default", "response": "disk full"},
    ),
    (
        "heartbeat_suppressed",
        HeartbeatSuppressed(agent_id="default", job_id="job_4"),
        "heartbeat",
        {"type": "suppressed", "agentId": "default", "jobId": "job_4"},
    ),
    (
        "goal_set",
        events_fixtures.goal_changed(goal_id="goal_1"),
        "goal",
        {"type": "set", "goalId": "goal_1"},
    ),
]


@pytest.mark.parametrize(("event_type", "payload", "wire", "fields"), EXAMPLES)
async def test_cron_heartbeat_tick_and_goal_events_reach_the_wire(
    boot: Callable[..., Runtime], event_type: str, payload: Any, wire: str, fields: dict[str, Any]
) -> None:
    async with boot() as runtime, plane_client(plane_of(runtime))() as c:
        await c.call("health")
        runtime.bus.broadcast_event(TOPIC_OF_TYPE[event_type], event_type, payload)
        frame = await c.event(wire, **fields)
    assert frame["event"] == wire
    state = frame["stateVersion"]
    assert set(state) == {"presence", "health", "cron"}
    if event_type.startswith("cron_"):  # (the daemon's own scheduler may have ticked too)
        assert state["cron"] >= 1


def test_every_registered_type_of_the_seed_mapped_topics_has_one_row_and_is_advertised() -> None:
    mapped = {t for t in registry() if TOPIC_OF_TYPE[t] in SEED_MAPPED}
    assert set(BUS_EVENTS) == mapped
    for row in BUS_EVENTS.values():
        assert row.wire in EVENTS
