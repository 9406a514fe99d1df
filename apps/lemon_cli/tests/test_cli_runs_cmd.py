"""``lemon runs tree`` as a real subprocess against a real daemon (``lemon daemon start``): a
run graph written to the daemon's store before it starts (a child, its grandchild, and one
left running that the restart marks unknown) is printed as a tree, as text and as JSON; no
daemon, or a run with no tasks: one clear line, never a traceback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from lemon_core.events import RunUsage
from lemon_core.store import RunGraphStore, TaskNode, TaskStatus
from lemon_infra import SQLiteStore
from lemon_platform_test.lemon_process import run_lemon
from lemon_runtime import store_path

SESSION = "agent:default:main"


async def _seed(home: Path) -> None:
    path = store_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[str, str, str, int, TaskStatus]] = [
        ("task_a", "run_p", "run_a", 1, "completed"),
        ("task_b", "run_a", "run_b", 2, "completed"),
        ("task_c", "run_p", "run_c", 1, "running"),
    ]
    async with await SQLiteStore.open(path) as store:
        graph = RunGraphStore(store)
        for i, (task_id, parent, child, depth, status) in enumerate(rows):
            await graph.put(TaskNode(
                task_id=task_id, parent_run_id=parent, parent_session_key=SESSION,
                child_run_id=child, session_key=f"{SESSION}:sub:{task_id}", root_run_id="run_p",
                depth=depth, status=status, created_at_ms=i, description=f"job {task_id}",
                usage=RunUsage(input_tokens=12, output_tokens=7, turns=1)
                if status == "completed" else None,
            ))  # fmt: skip


@pytest.fixture
def seeded(env: dict[str, str]) -> dict[str, str]:
    asyncio.run(_seed(Path(env["LEMON_HOME"])))
    return env


def test_runs_tree_without_a_daemon_says_how_to_start_one(env: dict[str, str]) -> None:
    proc = run_lemon(env, "runs", "tree", "run_p")
    assert proc.returncode == 1
    assert "lemon daemon start" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_runs_tree_prints_the_run_graph_of_the_running_daemon(
    seeded: dict[str, str], started: str
) -> None:
    text = run_lemon(seeded, "runs", "tree", "run_p")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == "run_p"
    assert lines[1].startswith("- task_a [completed] general: job task_a (19 tokens, 1 turns)")
    assert lines[2].startswith("  - task_b [completed]")  # the grandchild, under its parent
    assert lines[3].startswith("- task_c [unknown]")  # left running: unknown after the restart
    data = json.loads(run_lemon(seeded, "runs", "tree", "run_p", "--json").stdout)
    assert [t["task_id"] for t in data["tasks"]] == ["task_a", "task_c", "task_b"]  # by level
    assert data["tasks"][2]["parent_run_id"] == "run_a"
    empty = run_lemon(seeded, "runs", "tree", "run_nothing")
    assert (empty.returncode, empty.stdout.splitlines()) == (0, ["run_nothing", "no tasks"])
    blank = run_lemon(seeded, "runs", "tree", " ")
    assert blank.returncode == 2
    assert "runId" in blank.stderr
    for proc in (text, empty, blank):
        assert "Traceback" not in proc.stderr
