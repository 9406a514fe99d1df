"""The run graph store on a real SQLite file: lineage queries, terminal statuses that never
change, and recovery after a restart (running -> unknown, never re-run)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lemon_core.store import (
    TERMINAL_TASK_STATUSES,
    IllegalTaskTransitionError,
    RunGraphStore,
    TaskNode,
)
from lemon_infra import MemoryStore, SQLiteStore

STATUSES = ["queued", "running", "waiting_for_parent", "completed", "failed", "timeout",
            "cancelled", "unknown"]  # fmt: skip


def node(task_id: str, parent: str, child: str, created: int, **kw: object) -> TaskNode:
    base = TaskNode(task_id=task_id, parent_run_id=parent, parent_session_key="s",
                    child_run_id=child, session_key=f"s:sub:{task_id}", root_run_id="root",
                    depth=1, created_at_ms=created)  # fmt: skip
    return msgspec.structs.replace(base, **kw)


async def test_the_tree_and_recovery_survive_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "lemon.sqlite3"
    async with await SQLiteStore.open(path) as store:
        graph = RunGraphStore(store)
        await graph.put(node("t1", "root", "c1", 1, status="running"))
        await graph.put(node("t2", "root", "c2", 2, status="completed"))
        await graph.put(node("t3", "c1", "c3", 3, status="queued", depth=2))
        assert [n.task_id for n in await graph.tree("root")] == ["t1", "t2", "t3"]
        assert {n.task_id for n in await graph.active()} == {"t1", "t3"}
    async with await SQLiteStore.open(path) as store:  # "the daemon restarted"
        graph = RunGraphStore(store)
        marked = await graph.recover(now_ms=99, reason="restart")
        assert sorted(n.task_id for n in marked) == ["t1", "t3"]
        assert all(n.status == "unknown" and n.reason == "restart" for n in marked)
        assert await graph.active() == []
        done = await graph.get("t2")
        assert done is not None
        assert done.status == "completed"
        assert await graph.recover(now_ms=100, reason="again") == []  # nothing is re-marked


async def test_a_terminal_task_never_changes_status(tmp_path: Path) -> None:
    async with await SQLiteStore.open(tmp_path / "g.sqlite3") as store:
        graph = RunGraphStore(store)
        await graph.put(node("t1", "root", "c1", 1, status="timeout"))
        with pytest.raises(IllegalTaskTransitionError, match="already timeout"):
            await graph.put(node("t1", "root", "c1", 1, status="completed"))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(STATUSES), min_size=1, max_size=8))
async def test_the_first_terminal_status_is_the_last(statuses: list[str]) -> None:
    graph = RunGraphStore(MemoryStore())
    first_terminal = next((s for s in statuses if s in TERMINAL_TASK_STATUSES), None)
    for status in statuses:
        try:
            await graph.put(msgspec.structs.replace(node("t", "r", "c", 1), status=status))
        except IllegalTaskTransitionError:
            assert first_terminal is not None
            assert status != first_terminal
    stored = await graph.get("t")
    assert stored is not None
    assert stored.status == (first_terminal or statuses[-1])
    assert bool(await graph.active()) == (first_terminal is None)
