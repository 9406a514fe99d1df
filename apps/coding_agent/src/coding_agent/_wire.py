"""coding_agent's control-plane methods, registered on ``WIRE_METHODS`` by its lifespan.

``runs.tree {runId, limit?}`` (read): every task under a run (its children, their
children...), parents first, each node as the run graph holds it plus the question it is
waiting on, if any: ``{runId, tasks: [...]}``. ``tasks.answer {questionId, answer}``
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
        tasks = []
        for node in nodes:
            view = node.to_dict()
            question = subagents.pending_question(node.task_id)
            view["question"] = None if question is None else question.to_dict()
            tasks.append(view)
        return {"runId": run_id, "tasks": tasks}

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

    return {"runs.tree": (tree, "read"), "tasks.answer": (answer, "approvals")}


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
