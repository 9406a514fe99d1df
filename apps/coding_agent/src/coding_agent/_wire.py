"""coding_agent's control-plane methods, registered on ``WIRE_METHODS`` by its lifespan.

``runs.tree {runId, limit?}`` (read): every task under a run (its children, their
children...), parents first, each node as the run graph holds it plus the question it is
waiting on, if any: ``{runId, tasks: [...]}``. ``tasks.list {sessionKey}`` (read): the tasks
not yet ended in a session's tree (its runs' tasks and theirs; a child's session key lists
its root session's tree). ``tasks.cancel {taskId}``
(write): cancel one, answered once its end is recorded. ``tasks.answer {questionId, answer}``
(approvals): a person answers a child's pending question from any surface (first answer
wins). Bad input is a ``UsageError`` (the plane's ``INVALID_PARAMS``) saying what to fix.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from coding_agent.subagents import Subagents
from lemon_agent import ToolError
from lemon_core.errors import UsageError
from lemon_core.store import TaskNode
from lemon_core.wire_methods import WireCall, WireHandler, WireMethods

__all__ = ["registered"]

_OWNER: Final = "coding_agent"
_MAX_TREE: Final = 1000


def _methods(subagents: Subagents) -> dict[str, tuple[WireHandler, str]]:
    async def tree(call: WireCall) -> dict[str, Any]:
        run_id = call.params.get("runId")
        if not isinstance(run_id, str) or not run_id.strip():
            raise UsageError("runs.tree takes runId: the run whose tasks to show")
        limit = call.params.get("limit", _MAX_TREE)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= _MAX_TREE:
            raise UsageError(f"limit is a number from 1 to {_MAX_TREE}")
        nodes = await subagents.graph.tree(run_id, limit=limit)
        return {"runId": run_id, "tasks": [_view(subagents, n) for n in nodes]}

    async def answer(call: WireCall) -> dict[str, Any]:
        question_id = call.params.get("questionId")
        text = call.params.get("answer")
        if not isinstance(question_id, str) or not isinstance(text, str):
            raise UsageError("tasks.answer takes questionId and answer (strings)")
        try:
            final = await subagents.answer_as_person(question_id, text)
        except ToolError as exc:
            raise UsageError(str(exc)) from None
        return {"question": final.to_dict()}

    async def listed(call: WireCall) -> dict[str, Any]:
        key = call.params.get("sessionKey")
        if not isinstance(key, str) or not key.strip():
            raise UsageError("tasks.list takes sessionKey: the session whose tasks to list")
        root = key.partition(":sub:")[0]  # a grandchild's parent session hangs off the root
        nodes = [
            n
            for n in await subagents.graph.active()
            if n.parent_session_key == root or n.parent_session_key.startswith(f"{root}:sub:")
        ]
        return {"sessionKey": key, "tasks": [_view(subagents, n) for n in nodes]}

    async def cancel(call: WireCall) -> dict[str, Any]:
        task_id = call.params.get("taskId")
        if not isinstance(task_id, str) or not task_id.strip():
            raise UsageError("tasks.cancel takes taskId: the task to cancel")
        node = await subagents.cancel_task(task_id, "cancelled by an operator")
        if node is None:
            raise UsageError(f"no task {task_id}")
        return {"task": node.to_dict()}

    return {
        "runs.tree": (tree, "read"),
        "tasks.list": (listed, "read"),
        "tasks.cancel": (cancel, "write"),
        "tasks.answer": (answer, "approvals"),
    }


def _view(subagents: Subagents, node: TaskNode) -> dict[str, Any]:
    view = node.to_dict()
    question = subagents.pending_question(node.task_id)
    view["question"] = None if question is None else question.to_dict()
    return view


@contextmanager
def registered(methods: WireMethods | None, subagents: Subagents) -> Iterator[tuple[str, ...]]:
    """Register the methods while the block runs (none without a registry)."""
    done: list[str] = []
    try:
        for name, (handler, scope) in (_methods(subagents) if methods else {}).items():
            assert methods is not None
            methods.register(name, handler, scope=scope, owner=_OWNER)
            done.append(name)
        yield tuple(done)
    finally:
        for name in done:
            assert methods is not None
            methods.unregister(name)
