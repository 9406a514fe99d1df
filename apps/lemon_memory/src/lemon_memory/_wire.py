"""lemon_memory's control-plane methods, registered on ``WIRE_METHODS`` by its lifespan.

``goal.set {sessionKey, objective, budget?}``, ``goal.status {sessionKey}`` (``{goal,
goals[]}``: the TUI reads either), ``goal.pause``, ``goal.resume``, ``goal.clear
{sessionKey}``; and the ``memory.*`` operations of :mod:`lemon_memory.admin` (``status``,
``list`` and ``get`` read; the rest admin: the operator's view over every scope). Bad input
is a ``UsageError`` (the plane's ``INVALID_PARAMS``) saying what to fix; a document's text
is redacted again on the way out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from lemon_core.wire_methods import WireCall, WireHandler, WireMethods
from lemon_memory.admin import OPERATIONS, Operator
from lemon_memory.goals import GoalStore
from lemon_memory.store import MemoryStore

__all__ = ["registered"]

_OWNER = "lemon_memory"


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


def _memory_methods(operator: Operator) -> dict[str, tuple[WireHandler, str]]:
    def handler(name: str) -> WireHandler:
        async def call(wire: WireCall) -> dict[str, Any]:
            return await operator.call(name, wire.params)

        return call

    return {name: (handler(name), scope) for name, scope in OPERATIONS.items()}


@contextmanager
def registered(
    methods: WireMethods,
    goals: GoalStore,
    store: MemoryStore | None,
    *,
    known_secrets: Callable[[], Iterable[str]] = tuple,
    unavailable: str | None = None,
) -> Iterator[tuple[str, ...]]:
    """Register the methods while the block runs (unregistered when it ends)."""
    operator = Operator(store, known_secrets=known_secrets, unavailable=unavailable)
    table = {**_goal_methods(goals), **_memory_methods(operator)}
    done: list[str] = []
    try:
        for name, (handler, scope) in table.items():
            methods.register(name, handler, scope=scope, owner=_OWNER)
            done.append(name)
        yield tuple(done)
    finally:
        for name in done:
            methods.unregister(name)
