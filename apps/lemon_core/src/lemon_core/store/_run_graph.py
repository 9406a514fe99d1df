"""The run graph: one durable record per delegated task (a child run and its lineage).

Seed 003 makes the task/run graph one of the reconstruction authorities: a task whose record
is not terminal when the process that owned it is gone is *unknown* (it may or may not have
finished), never running and never an invented success. :meth:`RunGraphStore.recover` applies
that rule after a restart.

Tables: ``run_graph`` (task id -> :class:`TaskNode`), ``run_graph_children`` (parent run,
creation time, task id -> task id: a parent's children in creation order) and
``run_graph_active`` (task id -> task id, for every task not yet terminal). A node and its
index rows are written in one ``put_many``; the active row of a task that became terminal is
deleted after its terminal write (a crash between the two leaves a stale active row that
:meth:`RunGraphStore.recover` drops, never a task wrongly shown as running).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, get_args

import msgspec

from lemon_core.events import RunUsage
from lemon_core.store.errors import IllegalTaskTransitionError
from lemon_core.store.protocol import Store

__all__ = [
    "TERMINAL_TASK_STATUSES",
    "RunGraphStore",
    "TaskNode",
    "TaskStatus",
]

TaskStatus = Literal[
    "queued",
    "running",
    "waiting_for_parent",
    "completed",
    "failed",
    "timeout",
    "cancelled",
    "unknown",
]
_STATUSES: Final = frozenset(get_args(TaskStatus))
#: The statuses a task never leaves.
TERMINAL_TASK_STATUSES: Final[frozenset[str]] = frozenset(
    {"completed", "failed", "timeout", "cancelled", "unknown"}
)
_SEP: Final = "\x1f"


class TaskNode(msgspec.Struct, frozen=True, kw_only=True):
    """One delegated task: who delegated it, the child run and session, and how it stands.

    ``agent`` is the agent definition the child ran as: task-only provenance (seed 002), it
    never selects the executor.
    """

    task_id: str
    parent_run_id: str
    parent_session_key: str
    child_run_id: str
    session_key: str
    """The child's own session (``<parent session>:sub:<task_id>``)."""
    root_run_id: str
    depth: int
    """The child's depth (1: a child of a top-level run)."""
    agent: str = "general"
    description: str = ""
    mode: Literal["sync", "async"] = "sync"
    detached: bool = False
    status: TaskStatus = "queued"
    created_at_ms: int = 0
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    usage: RunUsage | None = None
    answer: str = ""
    """The child's final answer (bounded by the writer)."""
    error: str | None = None
    reason: str | None = None
    """Why a task ended without completing (``timeout``, ``budget_exceeded``, ``cancelled by
    the parent``, ``the daemon restarted``...)."""

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_TASK_STATUSES

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = msgspec.to_builtins(self)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskNode:
        return msgspec.convert(data, cls)


def _children_key(node: TaskNode) -> str:
    return f"{node.parent_run_id}{_SEP}{node.created_at_ms:016d}{_SEP}{node.task_id}"


class RunGraphStore:
    """The run graph over a :class:`~lemon_core.store.Store` (see the module docstring)."""

    NODES: Final = "run_graph"
    CHILDREN: Final = "run_graph_children"
    ACTIVE: Final = "run_graph_active"

    def __init__(self, store: Store) -> None:
        self._store = store

    async def put(self, node: TaskNode) -> TaskNode:
        """Write ``node``; a task already terminal keeps its status
        (:class:`IllegalTaskTransitionError`), and the status must be a :data:`TaskStatus`."""
        if node.status not in _STATUSES:
            raise IllegalTaskTransitionError(
                f"task {node.task_id}: unknown status {node.status!r}; one of {sorted(_STATUSES)}"
            )
        previous = await self.get(node.task_id)
        if previous is not None and previous.terminal and previous.status != node.status:
            raise IllegalTaskTransitionError(
                f"task {node.task_id} is already {previous.status}; it cannot become {node.status}"
            )
        entries: list[tuple[str, str, Any, int | None]] = [
            (self.NODES, node.task_id, node, None),
            (self.CHILDREN, _children_key(node), node.task_id, None),
        ]
        if not node.terminal:
            entries.append((self.ACTIVE, node.task_id, node.task_id, None))
        await self._store.put_many(entries)
        if node.terminal:
            await self._store.delete(self.ACTIVE, node.task_id)
        return node

    async def get(self, task_id: str) -> TaskNode | None:
        data = await self._store.get(self.NODES, task_id)
        return None if data is None else TaskNode.from_dict(data)

    async def children(self, parent_run_id: str, *, limit: int = 1000) -> list[TaskNode]:
        """The tasks ``parent_run_id`` delegated, oldest first."""
        rows = await self._store.scan(self.CHILDREN, prefix=f"{parent_run_id}{_SEP}", limit=limit)
        found: list[TaskNode] = []
        for _key, task_id in rows:
            node = await self.get(task_id) if isinstance(task_id, str) else None
            if node is not None:
                found.append(node)
        return found

    async def by_child_run(self, child_run_id: str) -> TaskNode | None:
        """The task whose child run is ``child_run_id`` (active tasks only)."""
        for node in await self.active():
            if node.child_run_id == child_run_id:
                return node
        return None

    async def tree(self, run_id: str, *, limit: int = 1000) -> list[TaskNode]:
        """Every task under ``run_id`` (children, their children...), parents first."""
        found: list[TaskNode] = []
        frontier = [run_id]
        while frontier and len(found) < limit:
            parent = frontier.pop(0)
            for node in await self.children(parent, limit=limit):
                found.append(node)
                frontier.append(node.child_run_id)
        return found[:limit]

    async def active(self, *, limit: int = 10_000) -> list[TaskNode]:
        """The tasks not yet terminal."""
        rows = await self._store.scan(self.ACTIVE, limit=limit)
        found: list[TaskNode] = []
        for key, _value in rows:
            node = await self.get(key)
            if node is not None and not node.terminal:
                found.append(node)
        return found

    async def recover(self, *, now_ms: int, reason: str) -> list[TaskNode]:
        """After a restart: every task that was not terminal becomes ``unknown`` (its owner
        is gone; whether it finished is not known); returns them. Never re-runs anything."""
        rows = await self._store.scan(self.ACTIVE, limit=10_000)
        marked: list[TaskNode] = []
        for key, _value in rows:
            node = await self.get(key)
            if node is None or node.terminal:
                await self._store.delete(self.ACTIVE, key)  # a stale row: the write was done
                continue
            marked.append(
                await self.put(
                    msgspec.structs.replace(
                        node, status="unknown", finished_at_ms=now_ms, reason=reason
                    )
                )
            )
        return marked
