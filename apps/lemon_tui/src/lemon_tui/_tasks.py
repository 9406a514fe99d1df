"""The subagent tasks of the session shown: what the daemon says of them, kept per task.

Two sources, both of the control plane: the wire events the bridge sends for the parent's
session (``task.started`` / ``task.completed`` / ``task.error`` / ``task.timeout`` /
``task.aborted``, ``task.progress`` (the child's turns, tokens, dollars and last action
after each of its model and tool calls, while it runs) and ``run.graph.changed``, heard
through the port client's ``on_event``),
and the run graph's rows (``tasks.list {sessionKey}``: the tasks not yet ended;
``runs.tree {runId}``: every task under a run, ended ones with their usage), and the child's
own tool calls (heard on the app's ``watch_all`` stream: its last action). A ``task`` tool
card shows its task's :class:`TaskState` (``_widgets.CardEntry.task``); ``/tasks`` lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from lemon_tui._text import clip

__all__ = ["ENDED", "TaskState", "from_event", "from_row", "says"]

#: Statuses a task does not leave (the run graph's terminal ones).
ENDED: Final = frozenset({"completed", "failed", "timeout", "cancelled", "unknown"})
_EVENT_STATUS: Final = {
    "task.started": "running",
    "task.completed": "completed",
    "task.error": "failed",
    "task.timeout": "timeout",
    "task.aborted": "cancelled",
}
_PREVIEW: Final = 200


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def says(status: str) -> str:
    """How a status reads on a card and in ``/tasks``."""
    return {"timeout": "timed out", "waiting_for_parent": "waiting for the parent"}.get(
        status, status
    )


class TaskState:
    """One task as this client last heard of it (mutable: events and rows update it)."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.parent_run_id = ""
        self.session_key = ""  # the child's session (``<parent>:sub:<task_id>``)
        self.agent = ""
        self.description = ""
        self.status = "queued"
        self.duration_ms: int | None = None
        self.preview = ""  # the child's answer, cut
        self.error = ""  # why it failed or stopped
        self.turns: int | None = None
        self.tokens: int | None = None
        self.cost_usd: float | None = None
        self.last_action = ""  # the child's last tool call (heard on its own session)

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    def set_status(self, status: str) -> None:
        """A new status; an ended task stays ended (a late ``running`` changes nothing)."""
        if status and (not self.ended or status in ENDED):
            self.status = status

    def line(self) -> str:
        """The card's status line (plain text): ``task_1 · general · completed in 1.2 s ·
        3 turns · 1.2k tokens · <answer>``."""
        parts = [self.task_id]
        if self.agent:
            parts.append(self.agent)
        state = says(self.status)
        if self.duration_ms is not None and self.ended:
            state += f" in {self.duration_ms / 1000:.1f} s"
        parts.append(state)
        if self.turns is not None:
            parts.append(f"{self.turns} turn{'s' if self.turns != 1 else ''}")
        if self.tokens is not None:
            parts.append(f"{self.tokens:,} tokens")
        if self.cost_usd:
            parts.append(f"${self.cost_usd:.4f}")
        if self.error and self.status != "completed":
            parts.append(self.error)
        elif self.preview:
            parts.append(self.preview)
        elif self.last_action and not self.ended:
            parts.append(f"last: {self.last_action}")
        return " · ".join(parts)

    def row(self) -> str:
        """One line of ``/tasks`` (plain text)."""
        what = self.description or "(no description)"
        return f"{self.task_id}  {says(self.status)}  {self.agent or '?'}  {clip(what, 80)}"


def from_event(
    name: str, payload: Mapping[str, Any], known: Mapping[str, TaskState]
) -> TaskState | None:
    """Apply one wire event to its task (a new :class:`TaskState` when ``known`` lacks it);
    ``None`` when it is not a task event or names no task."""
    task_id = _str(payload.get("taskId"))
    if not task_id or (
        name not in _EVENT_STATUS and name not in ("run.graph.changed", "task.progress")
    ):
        return None
    task = known.get(task_id) or TaskState(task_id)
    task.parent_run_id = _str(payload.get("parentRunId")) or task.parent_run_id
    task.session_key = _str(payload.get("sessionKey")) or task.session_key
    task.agent = _str(payload.get("agentId")) or task.agent
    task.description = _str(payload.get("description")) or task.description
    _usage(task, payload)
    if name == "run.graph.changed":
        task.set_status(_str(payload.get("status")))
        return task
    if name == "task.progress":
        task.set_status(_str(payload.get("status")))
        action = _str(payload.get("lastAction"))
        if action:
            task.last_action = clip(action, _PREVIEW)
        return task
    task.set_status(_EVENT_STATUS[name])
    duration = _int(payload.get("durationMs"))
    if name == "task.timeout":
        duration = _int(payload.get("timeoutMs"))
    if duration is not None:
        task.duration_ms = duration
    preview = _str(payload.get("resultPreview"))
    if preview:
        task.preview = clip(preview, _PREVIEW)
    error = _str(payload.get("error")) or _str(payload.get("reason"))
    if error:
        task.error = clip(error, _PREVIEW)
    return task


def _usage(task: TaskState, payload: Mapping[str, Any]) -> None:
    """An event's ``turns`` / ``tokens`` / ``costUsd`` (live while the task runs)."""
    turns, tokens = _int(payload.get("turns")), _int(payload.get("tokens"))
    cost = payload.get("costUsd")
    if turns is not None:
        task.turns = turns
    if tokens is not None:
        task.tokens = tokens
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        task.cost_usd = float(cost)


def from_row(row: Mapping[str, Any], known: Mapping[str, TaskState]) -> TaskState | None:
    """Apply one run-graph row (``tasks.list`` / ``runs.tree``: a ``TaskNode`` as a dict) to
    its task; ``None`` when the row has no task id."""
    task_id = _str(row.get("task_id"))
    if not task_id:
        return None
    task = known.get(task_id) or TaskState(task_id)
    task.parent_run_id = _str(row.get("parent_run_id")) or task.parent_run_id
    task.session_key = _str(row.get("session_key")) or task.session_key
    task.agent = _str(row.get("agent")) or task.agent
    task.description = _str(row.get("description")) or task.description
    task.set_status(_str(row.get("status")))
    started, finished = _int(row.get("started_at_ms")), _int(row.get("finished_at_ms"))
    if started is not None and finished is not None:
        task.duration_ms = finished - started
    answer = _str(row.get("answer"))
    if answer:
        task.preview = clip(answer, _PREVIEW)
    error = _str(row.get("error")) or _str(row.get("reason"))
    if error and task.status != "completed":
        task.error = clip(error, _PREVIEW)
    usage = row.get("usage")
    if isinstance(usage, Mapping):
        turns = _int(usage.get("turns"))
        task.turns = turns if turns else task.turns
        tokens = sum(
            _int(usage.get(k)) or 0
            for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
        )
        task.tokens = tokens if tokens else task.tokens
        cost = usage.get("cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool) and cost:
            task.cost_usd = float(cost)
    return task
