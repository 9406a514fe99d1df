"""The subagent task events reach operators: a run on the daemon profile (the offline model)
delegates with ``task``; the child's ``task.started``, ``task.completed`` and
``run.graph.changed`` arrive once each on the wire for the parent's session, with the child's
ids, its description and a preview of its answer."""

from __future__ import annotations

import json
from typing import Any

from lemon_control_plane._task_events import FOLLOWED_RUNS, TASK_EVENTS, TaskEvents
from lemon_control_plane.server import EVENTS
from lemon_control_plane.testing import ClientFactory
from lemon_core.bus import Bus
from lemon_core.events import Event

SESSION = "agent:default:main"


async def test_a_delegated_task_reaches_the_wire_as_task_events_once_each(
    client: ClientFactory,
) -> None:
    call = {"prompt": "/echo the child says hi", "description": "greet"}
    async with client() as c:
        sent = await c.call(
            "chat.send", {"sessionKey": SESSION, "prompt": f"/tool task {json.dumps(call)}"}
        )
        run_id = sent["runId"]
        started = await c.event("task.started", parentRunId=run_id)
        done = await c.event("task.completed", parentRunId=run_id)
        await c.completed(run_id)
        graph = [
            f for f in c.frames
            if f.get("event") == "run.graph.changed" and f["payload"]["parentRunId"] == run_id
        ]  # fmt: skip
        events = [f for f in c.frames if str(f.get("event", "")).startswith("task.")]
    task_id = started["payload"]["taskId"]
    assert started["payload"]["parentSessionKey"] == SESSION
    assert started["payload"]["sessionKey"] == f"{SESSION}:sub:{task_id}"
    assert started["payload"]["description"] == "greet"
    assert started["payload"]["role"] == "general"
    assert started["payload"]["engine"] == "lemon"
    assert isinstance(started["payload"]["startedAtMs"], int)
    payload = done["payload"]
    assert payload["taskId"] == task_id
    assert payload["ok"] is True
    assert "the child says hi" in payload["resultPreview"]
    assert isinstance(payload["durationMs"], int)
    assert payload["durationMs"] >= 0
    # once each, though published on the parent's and the child's run topic
    ends = [f["event"] for f in events if f["event"] != "task.progress"]
    assert ends == ["task.started", "task.completed"]
    progress = [f["payload"] for f in events if f["event"] == "task.progress"]
    assert progress, "the child's model call is reported while it runs"
    assert progress[0]["turns"] == 1
    assert progress[0]["status"] == "running"
    assert payload["turns"] == 1  # the end carries the recorded usage
    assert graph
    assert {f["payload"]["status"] for f in graph} >= {"completed"}
    statuses = [f["payload"]["status"] for f in graph]
    assert len(statuses) == len(set(statuses))


async def test_a_run_topic_follower_is_bounded_and_maps_every_task_type() -> None:
    sent: list[tuple[str, dict[str, Any], str | None]] = []
    bus = Bus()
    tasks = TaskEvents(bus, lambda name, payload, key: sent.append((name, payload, key)))
    for i in range(FOLLOWED_RUNS + 44):
        tasks.follow(f"run_{i}")
    assert bus.statistics().subscriptions == FOLLOWED_RUNS  # the oldest runs stopped
    base = {"task_id": "t", "run_id": "c", "parent_run_id": "p", "parent_session_key": "s"}
    for kind, extra in [
        ("task_error", {"error": "boom", "started_at_ms": 1, "finished_at_ms": 4}),
        ("task_timeout", {"started_at_ms": 1, "finished_at_ms": 9}),
        ("task_aborted", {"reason": "cancelled by the parent"}),
        ("engine_event", {}),  # not a task event: not for the wire
    ]:
        tasks.project(Event.new(kind, {**base, **extra, "status": kind}))
    tasks.project(Event.new("task_error", "not a mapping"))
    names = [name for name, _payload, _key in sent]
    assert names == ["task.error", "task.timeout", "task.aborted"]
    assert {wire for wire, _fields in TASK_EVENTS.values()} <= set(EVENTS)  # advertised
    assert sent[0][1]["error"] == "boom"
    assert sent[0][1]["durationMs"] == 3
    assert sent[1][1]["timeoutMs"] == 8
    assert sent[2][1]["reason"] == "cancelled by the parent"
    assert {key for _name, _payload, key in sent} == {"s"}
    bus.close()


def test_progress_events_carry_live_usage_and_each_call_is_sent() -> None:
    sent: list[tuple[str, dict[str, Any], str | None]] = []
    bus = Bus()
    tasks = TaskEvents(bus, lambda name, payload, key: sent.append((name, payload, key)))
    base = {"task_id": "t", "run_id": "c", "parent_run_id": "p", "parent_session_key": "s",
            "status": "running", "budget_usd": 0.5}  # fmt: skip
    for turns in (1, 1, 2):  # the second is the same call heard on the other topic
        tasks.project(Event.new("task_progress", {**base, "turns": turns,
                                                  "tokens": 19 * turns,
                                                  "cost_usd": 0.0001 * turns,
                                                  "last_action": "ls"}))  # fmt: skip
    assert [(name, p["turns"]) for name, p, _key in sent] == [
        ("task.progress", 1), ("task.progress", 2)]  # fmt: skip
    wire = sent[1][1]
    assert wire["tokens"] == 38
    assert wire["costUsd"] == 0.0002
    assert wire["budgetUsd"] == 0.5
    assert wire["lastAction"] == "ls"
    assert wire["status"] == "running"
    assert "task.progress" in EVENTS
    tasks.project(
        Event.new(
            "task_notice",
            {**base, "status": "completed", "text": "[notice: task t ended completed]"},
        )
    )
    name, wire, key = sent[-1]
    assert (name, wire["status"], key) == ("task.notice", "completed", "s")
    assert wire["text"].startswith("[notice: task t")
    bus.close()


def test_a_childs_question_is_sent_as_task_question_once_per_change() -> None:
    sent: list[tuple[str, dict[str, Any], str | None]] = []
    bus = Bus()
    tasks = TaskEvents(bus, lambda name, payload, key: sent.append((name, payload, key)))
    record = {"question_id": "pq_1", "task_id": "t", "child_run_id": "c",
              "parent_run_id": "p", "parent_session_key": "s", "session_key": "s:sub:t",
              "question": "red or blue?", "options": ["red", "blue"], "status": "pending",
              "deadline_ms": 99}  # fmt: skip
    for _topic in ("child", "parent"):  # the same change, heard on both run topics
        tasks.project(Event.new("parent_question_requested", record))
    answered = {**record, "status": "answered", "answer": "blue", "answered_by": "parent"}
    tasks.project(Event.new("parent_question_answered", answered))
    tasks.project(Event.new("parent_question_requested", {**record, "question_id": "pq_2"}))
    assert [(n, p["questionId"], p["status"]) for n, p, _k in sent] == [
        ("task.question", "pq_1", "pending"),
        ("task.question", "pq_1", "answered"),
        ("task.question", "pq_2", "pending"),  # another question of the same task
    ]
    wire = sent[1][1]
    assert (wire["taskId"], wire["runId"], wire["parentRunId"]) == ("t", "c", "p")
    assert (wire["answer"], wire["answeredBy"], wire["options"]) == ("blue", "parent",
                                                                     ["red", "blue"])  # fmt: skip
    assert sent[0][1]["deadlineMs"] == 99
    assert {key for _n, _p, key in sent} == {"s"}  # for the parent's session
    assert "task.question" in EVENTS
    bus.close()
