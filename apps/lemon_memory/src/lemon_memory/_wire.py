"""lemon_memory's control-plane methods, registered on ``WIRE_METHODS`` by its lifespan.

``goal.set {sessionKey, objective, budget?}``, ``goal.status {sessionKey}`` (``{goal,
goals[]}``: the TUI reads either), ``goal.pause``, ``goal.resume``, ``goal.clear
{sessionKey}``; ``memory.status`` (read), ``memory.list`` (read), ``memory.search`` and
``memory.forget`` (admin: the operator's view over every scope). Bad input is a
``UsageError`` (the plane's ``INVALID_PARAMS``) saying what to fix; a document's text is
redacted again on the way out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import msgspec

from lemon_core.errors import UsageError
from lemon_core.wire_methods import WireCall, WireHandler, WireMethods
from lemon_memory.documents import MemoryDocument
from lemon_memory.errors import MemoryUnavailableError
from lemon_memory.goals import GoalStore
from lemon_memory.screen import redact
from lemon_memory.store import MemoryStore

__all__ = ["registered"]

_OWNER = "lemon_memory"


def _doc(doc: MemoryDocument) -> dict[str, Any]:
    data: dict[str, Any] = msgspec.to_builtins(doc)
    data["body"] = redact(doc.body)[0]
    data["title"] = redact(doc.title)[0]
    return data


def _goal_methods(goals: GoalStore) -> dict[str, tuple[WireHandler, str]]:
    async def set_goal(call: WireCall) -> dict[str, Any]:
        p = call.params
        goal = await goals.set(p.get("sessionKey"), p.get("objective"), budget=p.get("budget"))  # type: ignore[arg-type]  # checked by set
        return {"goal": goal.wire()}

    async def status(call: WireCall) -> dict[str, Any]:
        goal = await goals.get(call.params.get("sessionKey"))  # type: ignore[arg-type]  # checked by get
        view = None if goal is None else goal.wire()
        return {"goal": view, "goals": [] if view is None else [view]}

    def transition(name: str) -> WireHandler:
        async def handler(call: WireCall) -> dict[str, Any]:
            op: Callable[[str], Any] = getattr(goals, name)
            goal = await op(call.params.get("sessionKey"))  # type: ignore[arg-type]
            return {"goal": goal.wire() if name != "clear" else None, "ok": True}

        return handler

    return {
        "goal.set": (set_goal, "write"),
        "goal.status": (status, "read"),
        "goal.pause": (transition("pause"), "write"),
        "goal.resume": (transition("resume"), "write"),
        "goal.clear": (transition("clear"), "write"),
    }


def _memory_methods(store: MemoryStore | None) -> dict[str, tuple[WireHandler, str]]:
    def need() -> MemoryStore:
        if store is None:
            raise UsageError("memory is unavailable on this daemon ([memory] or its store)")
        return store

    def limit_of(call: WireCall, default: int, top: int) -> int:
        value = call.params.get("limit", default)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
            raise UsageError(f"limit is a number from 1 to {top}")
        return value

    async def status(call: WireCall) -> dict[str, Any]:
        if store is None:
            return {"available": False}
        try:
            stats = await store.statistics()
        except MemoryUnavailableError as exc:
            return {"available": False, "reason": str(exc)}
        return {"available": True, **msgspec.to_builtins(stats)}

    async def search(call: WireCall) -> dict[str, Any]:
        query = call.params.get("query")
        if not isinstance(query, str):
            raise UsageError("query is required (the words to search for)")
        result = await need().search_all(query, limit=limit_of(call, 10, 10))
        return {
            "emptyQuery": result.empty_query,
            "hits": [{"score": h.score, "document": _doc(h.document)} for h in result.hits],
        }

    async def list_docs(call: WireCall) -> dict[str, Any]:
        agent = call.params.get("agentId")
        docs = await need().list_documents(
            agent_id=agent if isinstance(agent, str) else None, limit=limit_of(call, 50, 500)
        )
        return {"documents": [_doc(d) for d in docs]}

    async def forget(call: WireCall) -> dict[str, Any]:
        doc_id = call.params.get("docId")
        if not isinstance(doc_id, str) or not doc_id:
            raise UsageError("docId is required (see memory.list)")
        return {"forgotten": await need().forget_any(doc_id)}

    return {
        "memory.status": (status, "read"),
        "memory.list": (list_docs, "read"),
        "memory.search": (search, "admin"),
        "memory.forget": (forget, "admin"),
    }


@contextmanager
def registered(
    methods: WireMethods, goals: GoalStore, store: MemoryStore | None
) -> Iterator[tuple[str, ...]]:
    """Register the methods while the block runs (unregistered when it ends)."""
    table = {**_goal_methods(goals), **_memory_methods(store)}
    done: list[str] = []
    try:
        for name, (handler, scope) in table.items():
            methods.register(name, handler, scope=scope, owner=_OWNER)
            done.append(name)
        yield tuple(done)
    finally:
        for name in done:
            methods.unregister(name)
