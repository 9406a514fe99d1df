"""``lemon runs tree RUN_ID``: the tasks a run delegated (its children, their children...) on
this home's running daemon, from the run graph (coding_agent registers ``runs.tree`` on the
control plane).

Each task is one line, under its parent and indented by its depth: its id, status, agent
definition, description, tokens and, when it did not complete, why; a task waiting for its
parent shows the question on the next line. With no daemon, or a daemon without the run
graph, it says what to do.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lemon_cli._wire_call import daemon_call

__all__ = ["runs_app"]

runs_app = typer.Typer(
    help="Runs on the running daemon: the tree of tasks a run delegated.",
    no_args_is_help=True,
)


def _line(task: dict[str, Any]) -> str:
    indent = "  " * max(0, int(task.get("depth", 1)) - 1)
    text = f"{indent}- {task.get('task_id')} [{task.get('status')}] {task.get('agent')}"
    if task.get("description"):
        text += f": {task['description']}"
    usage = task.get("usage")
    if isinstance(usage, dict):
        tokens = sum(int(usage.get(k) or 0) for k in ("input_tokens", "output_tokens"))
        text += f" ({tokens} tokens, {usage.get('turns', 0)} turns)"
    if task.get("reason"):
        text += f" - {task['reason']}"
    question = task.get("question")
    if isinstance(question, dict):
        text += f"\n{indent}    asks: {question.get('question')} ({question.get('question_id')})"
    return text


@runs_app.command("tree")
def tree(
    run_id: Annotated[str, typer.Argument(help="The run whose delegated tasks to show.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the tree as JSON.")] = False,
) -> None:
    """Show the tasks a run delegated, parents first ("no tasks" when it delegated none)."""
    import json

    payload = daemon_call(
        "lemon runs tree", "runs.tree", {"runId": run_id}, feature="run graph",
        app="coding_agent",
    )  # fmt: skip
    tasks = payload.get("tasks", []) if isinstance(payload, dict) else []
    if as_json:
        typer.echo(json.dumps({"runId": run_id, "tasks": tasks}))
        return
    typer.echo(run_id)
    if not tasks:
        typer.echo("no tasks")
    for task in _depth_first(run_id, tasks):
        typer.echo(_line(task))


def _depth_first(run_id: str, tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each task followed by its own children (the wire lists them level by level)."""
    by_parent: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        by_parent.setdefault(str(task.get("parent_run_id")), []).append(task)
    ordered: list[dict[str, Any]] = []
    stack = list(reversed(by_parent.get(run_id, [])))
    while stack:
        task = stack.pop()
        ordered.append(task)
        stack.extend(reversed(by_parent.get(str(task.get("child_run_id")), [])))
    return ordered
