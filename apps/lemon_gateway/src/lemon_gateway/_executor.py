"""Finding and validating the one executor (``lemon.executor`` entry point group)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from lemon_core.execution import EXECUTOR_ENTRY_POINT_GROUP, Executor

__all__ = ["ExecutorStatus", "check_executor", "load_executor", "validate_executor"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutorStatus:
    """Whether an executor is ready, and if not, why (``reason``) in plain words."""

    ready: bool
    reason: str | None = None
    name: str | None = None
    executor: Executor | None = None


def check_executor(candidate: object, *, name: str = "executor") -> ExecutorStatus:
    """Validate an executor object: it must have an ``async def prepare(job)``."""
    prepare = getattr(candidate, "prepare", None)
    if prepare is None or not callable(prepare):
        return ExecutorStatus(
            ready=False,
            name=name,
            reason=f"{name} ({type(candidate).__name__}) has no prepare(job) method; "
            "implement lemon_core.execution.Executor",
        )
    if not inspect.iscoroutinefunction(prepare):
        return ExecutorStatus(
            ready=False,
            name=name,
            reason=f"{name}.prepare must be 'async def prepare(self, job)'",
        )
    return ExecutorStatus(ready=True, name=name, executor=candidate)  # type: ignore[arg-type]  # structurally checked above


def _load(ep: EntryPoint) -> ExecutorStatus:
    label = f"entry point {ep.name!r} ({ep.value})"
    try:
        factory = ep.load()
    except Exception as exc:  # translated into a status: any import error means "not loadable"
        return ExecutorStatus(
            ready=False, name=ep.name, reason=f"{label} cannot be loaded: {exc!r}"
        )
    if not callable(factory):
        return ExecutorStatus(
            ready=False,
            name=ep.name,
            reason=f"{label} must name a zero-argument callable returning an Executor",
        )
    try:
        candidate = factory()
    except Exception as exc:  # a failing factory is a not-ready executor, reported
        return ExecutorStatus(
            ready=False, name=ep.name, reason=f"{label} failed to build the executor: {exc!r}"
        )
    return check_executor(candidate, name=label)


def validate_executor(group: str = EXECUTOR_ENTRY_POINT_GROUP) -> ExecutorStatus:
    """Find exactly one executor in the entry point ``group`` and check it.

    Not ready when none is installed, when several are (no selection: exactly one),
    when it cannot be loaded or built, or when it lacks ``async def prepare``.
    """
    eps = sorted(entry_points(group=group), key=lambda e: e.name)
    if not eps:
        return ExecutorStatus(
            ready=False,
            reason=f"no executor installed: no package provides an entry point in the "
            f"{group!r} group (install coding_agent, or pass executor= explicitly)",
        )
    if len(eps) > 1:
        names = ", ".join(f"{e.name} ({e.value})" for e in eps)
        return ExecutorStatus(
            ready=False,
            reason=f"{len(eps)} executors installed in the {group!r} group ({names}); "
            "exactly one is allowed, uninstall the others",
        )
    return _load(eps[0])


def load_executor(group: str = EXECUTOR_ENTRY_POINT_GROUP) -> Executor:
    """The validated executor, or raise ExecutorNotReadyError with the reason."""
    from lemon_gateway.errors import ExecutorNotReadyError

    status = validate_executor(group)
    if status.executor is None:
        raise ExecutorNotReadyError(status.reason or "unknown reason")
    return status.executor
