"""The subagent task events on the wire: ``task.*`` and ``run.graph.changed``.

The coding agent publishes ``task_started`` / ``task_completed`` / ``task_error`` /
``task_timeout`` / ``task_aborted`` and ``run_graph_changed`` (untyped on purpose, seed 003)
on the child's and the parent's run topics (``run:<id>``), which have no static topic to
subscribe to. So the bridge follows the run topic of every run it sees start, with one bounded
delivery read by one pump task, and keeps following the last :data:`FOLLOWED_RUNS` of them
after they end (an async child may finish after its parent's run). An event published on both
topics it follows is sent once (the same transition, by task, type, status and child run).

Each becomes one wire event for the parent's session (the person watching the parent sees
their tasks), written field by field as the reference names them: the ids ``taskId``,
``parentRunId``, ``runId`` (the child's), ``sessionKey`` (the child's), ``parentSessionKey`` and
``agentId`` (the agent definition), then per type:

=====================  =======================  ===========================================
bus event              wire event               fields
=====================  =======================  ===========================================
task_started           ``task.started``         startedAtMs, description, engine, role
task_completed         ``task.completed``       ok, durationMs, resultPreview, description,
                                                completedAtMs
task_error             ``task.error``           error, durationMs, description
task_timeout           ``task.timeout``         timeoutMs (how long it ran), description
task_aborted           ``task.aborted``         reason, description
run_graph_changed      ``run.graph.changed``    runId, parentRunId, sessionKey, status,
                                                event, timestampMs
task_progress          ``task.progress``        status, turns, tokens, costUsd, budgetUsd,
                                                lastAction, description (after each of the
                                                child's model calls and tool calls: live)
task_notice            ``task.notice``          status, reason, text (a detached child that
                                                ended after its parent's run, or a task a
                                                restart left unknown; its result as data)
parent_question_*      ``task.question``        questionId, status (pending, answered,
                                                timeout, cancelled), question, options,
                                                answer, answeredBy, deadlineMs (a child's
                                                ``ask_parent``, as the record stands)
=====================  =======================  ===========================================

Every event also carries ``turns``, ``tokens`` and ``costUsd`` when the payload has them (the
recorded usage of an ended task, the charged one of a running task).

After an overflow the delivery is replaced and re-subscribed to the followed runs; the lost
events are counted (``resyncs``), as the bridge's other bus events are: ``tasks.list`` and
``runs.tree`` read the run graph itself.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Final

from lemon_core.bus import Bus, ConsumerClass, Delivery, Overflow, Subscription, Tagged, run_topic
from lemon_core.errors import DeliveryClosedError
from lemon_core.events import Event

__all__ = ["FOLLOWED_RUNS", "TASK_EVENTS", "TaskEvents"]

_log = logging.getLogger("lemon_control_plane.bridge")

#: Runs whose topic stays followed (the active ones and the most recent ended ones).
FOLLOWED_RUNS: Final = 256
_SEEN: Final = 2048
_PREVIEW_CHARS: Final = 200

Emit = Callable[[str, dict[str, Any], str | None], None]


def _ids(p: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
    def pick(key: str) -> Any:
        value = p.get(key)
        return value if value is not None else meta.get(key)

    return {
        "taskId": pick("task_id"),
        "parentRunId": pick("parent_run_id"),
        "runId": pick("run_id"),
        "sessionKey": pick("session_key"),
        "parentSessionKey": p.get("parent_session_key"),
        "agentId": p.get("agent_id"),
    }


def _ms(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _duration(p: Mapping[str, Any]) -> int | None:
    started, finished = _ms(p.get("started_at_ms")), _ms(p.get("finished_at_ms"))
    return finished - started if started is not None and finished is not None else None


def _text(value: Any, limit: int) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def _started(p: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "startedAtMs": _ms(p.get("started_at_ms")) or int(time.time() * 1000),
        "description": _text(p.get("description"), 200),
        "engine": "lemon",
        "role": p.get("agent_id"),
    }


def _completed(p: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "ok": True,
        "durationMs": _duration(p),
        "resultPreview": _text(p.get("answer_preview"), _PREVIEW_CHARS),
        "description": _text(p.get("description"), 200),
        "completedAtMs": _ms(p.get("finished_at_ms")) or int(time.time() * 1000),
    }


def _error(p: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "error": _text(p.get("error") or p.get("reason"), 1000),
        "durationMs": _duration(p),
        "description": _text(p.get("description"), 200),
    }


def _timeout(p: Mapping[str, Any]) -> dict[str, Any]:
    return {"timeoutMs": _duration(p), "description": _text(p.get("description"), 200)}


def _aborted(p: Mapping[str, Any]) -> dict[str, Any]:
    return {"reason": _text(p.get("reason"), 1000), "description": _text(p.get("description"), 200)}


def _graph(p: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "status": str(p.get("status")) if p.get("status") is not None else None,
        "event": "state_changed",
        "timestampMs": int(time.time() * 1000),
    }


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _usage(p: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if (turns := _ms(p.get("turns"))) is not None:
        out["turns"] = turns
    if (tokens := _ms(p.get("tokens"))) is not None:
        out["tokens"] = tokens
    if (cost := _number(p.get("cost_usd"))) is not None:
        out["costUsd"] = cost
    return out


def _progress(p: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "status": str(p.get("status")) if p.get("status") is not None else None,
        "budgetUsd": _number(p.get("budget_usd")),
        "lastAction": _text(p.get("last_action"), 200),
        "description": _text(p.get("description"), 200),
    }


def _question(p: Mapping[str, Any]) -> dict[str, Any]:
    options = p.get("options")
    return {
        "runId": p.get("child_run_id"),
        "questionId": p.get("question_id"),
        "status": str(p.get("status")) if p.get("status") is not None else None,
        "question": _text(p.get("question"), 4000),
        "options": [o for o in options if isinstance(o, str)][:10]
        if isinstance(options, list | tuple)
        else [],
        "answer": _text(p.get("answer"), 4000),
        "answeredBy": p.get("answered_by"),
        "deadlineMs": _ms(p.get("deadline_ms")),
    }


def _notice(p: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "status": str(p.get("status")) if p.get("status") is not None else None,
        "reason": _text(p.get("reason"), 1000),
        "text": _text(p.get("text"), 8000),
    }


#: Bus event type -> (wire event name, its fields beyond the ids).
TASK_EVENTS: Final[Mapping[str, tuple[str, Callable[[Mapping[str, Any]], dict[str, Any]]]]] = {
    "task_started": ("task.started", _started),
    "task_completed": ("task.completed", _completed),
    "task_error": ("task.error", _error),
    "task_timeout": ("task.timeout", _timeout),
    "task_aborted": ("task.aborted", _aborted),
    "run_graph_changed": ("run.graph.changed", _graph),
    "task_progress": ("task.progress", _progress),
    "task_notice": ("task.notice", _notice),
    "parent_question_requested": ("task.question", _question),
    "parent_question_answered": ("task.question", _question),
    "parent_question_timeout": ("task.question", _question),
    "parent_question_cancelled": ("task.question", _question),
}


class TaskEvents:
    """The run-topic follower of one bridge (see the module docstring). Loop-only."""

    def __init__(self, bus: Bus, emit: Emit) -> None:
        self._bus = bus
        self._emit = emit
        self._delivery = Delivery.for_consumer(ConsumerClass.EVENT_BRIDGE)
        self._followed: OrderedDict[str, Subscription] = OrderedDict()
        self._seen: OrderedDict[tuple[Any, ...], None] = OrderedDict()
        self.resyncs = 0
        self.sent = 0

    def follow(self, run_id: str) -> None:
        """Follow ``run_id``'s topic (its tasks' events); the oldest beyond the bound stop."""
        if run_id in self._followed:
            self._followed.move_to_end(run_id)
            return
        self._followed[run_id] = self._bus.subscribe(run_topic(run_id), delivery=self._delivery)
        while len(self._followed) > FOLLOWED_RUNS:
            _old, subscription = self._followed.popitem(last=False)
            subscription.cancel()

    def close(self) -> None:
        self._delivery.close()

    async def pump(self, closing: Callable[[], bool]) -> None:
        while True:
            try:
                item = await self._delivery.get()
            except DeliveryClosedError:
                if closing():
                    return
                self._resubscribe()
                continue
            if isinstance(item, Overflow):
                _log.warning("the bridge's task-event subscription overflowed; events were lost")
                self.resyncs += 1
                self._delivery.close()
                self._resubscribe()
                continue
            if isinstance(item, Tagged):
                if item.epoch != self._delivery.epoch:
                    continue
                item = item.item
            if isinstance(item, Event):
                self.project(item)

    def _resubscribe(self) -> None:
        self._delivery = Delivery.for_consumer(ConsumerClass.EVENT_BRIDGE)
        runs = list(self._followed)
        self._followed.clear()
        for run_id in runs:
            self.follow(run_id)

    def project(self, event: Event) -> None:
        row = TASK_EVENTS.get(event.type)
        payload = event.payload
        if row is None or not isinstance(payload, Mapping):
            return  # the run topic's other events (engine events...) are not for the wire
        key: tuple[Any, ...] = (
            event.type, payload.get("task_id"), payload.get("status"), payload.get("run_id"),
        )  # fmt: skip
        if event.type == "task_progress":  # each call and tool call is news
            key += (payload.get("turns"), payload.get("last_action"))
        elif event.type.startswith("parent_question_"):  # one task may ask several
            key += (payload.get("question_id"),)
        if key in self._seen:
            return  # the same transition, published on the parent's and the child's topic
        self._seen[key] = None
        while len(self._seen) > _SEEN:
            self._seen.popitem(last=False)
        name, fields = row
        wire = _ids(payload, event.meta) | _usage(payload) | fields(payload)
        parent_session = payload.get("parent_session_key")
        self.sent += 1
        self._emit(name, wire, parent_session if isinstance(parent_session, str) else None)
