"""The one task primitive: a :class:`Supervisor` owns the tasks it spawns.

Every long-lived task of an app (a router's run processes, approval writes, a client's pumps)
is spawned through its owner's supervisor, with a name. Unlike an ``asyncio.TaskGroup``, a
crash of one task is *isolated*: it is logged with its traceback and counted, and its siblings
go on (a failure in one session never cancels another session's runs). :meth:`Supervisor.close`
stops new spawns, gives the running tasks a grace period to finish, then cancels the rest and
waits for them: nothing is left running, nothing is fire-and-forget.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

import msgspec

from lemon_core.errors import LemonCoreError

__all__ = ["Supervisor", "SupervisorClosedError", "SupervisorStatistics", "TaskCrash"]

T = TypeVar("T")
_CRASHES_KEPT: Final = 32


class SupervisorClosedError(LemonCoreError, RuntimeError):
    """The supervisor is closing or closed: it spawns nothing more."""


class TaskCrash(msgspec.Struct, frozen=True, kw_only=True):
    """A task that ended with an exception (its name and what it raised)."""

    name: str
    error: str


class SupervisorStatistics(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    running: int
    spawned: int
    crashed: int
    cancelled: int
    closed: bool
    last_crashes: tuple[TaskCrash, ...] = ()


class Supervisor:
    """See the module docstring. ``on_crash`` is called (on the loop) with the task's name and
    exception after it is logged; it must not raise."""

    def __init__(
        self,
        name: str,
        *,
        logger: logging.Logger | None = None,
        on_crash: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        self.name = name
        self._log = logger or logging.getLogger(f"lemon.tasks.{name}")
        self._on_crash = on_crash
        self._tasks: dict[asyncio.Task[Any], str] = {}
        self._spawned = 0
        self._crashed = 0
        self._cancelled = 0
        self._crashes: deque[TaskCrash] = deque(maxlen=_CRASHES_KEPT)
        self._closing = False

    @property
    def closed(self) -> bool:
        """True once :meth:`close` began: nothing more is spawned."""
        return self._closing

    def __len__(self) -> int:
        return len(self._tasks)

    def tasks(self) -> tuple[asyncio.Task[Any], ...]:
        return tuple(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, T], *, name: str) -> asyncio.Task[T]:
        """Run ``coro`` as a task owned by this supervisor (loop-only)."""
        if self._closing:
            coro.close()
            raise SupervisorClosedError(
                f"supervisor {self.name!r} is closed; {name!r} was not started"
            )
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.name}:{name}")
        self._tasks[task] = name
        self._spawned += 1
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        name = self._tasks.pop(task, task.get_name())
        if task.cancelled():
            self._cancelled += 1
            return
        error = task.exception()
        if error is None:
            return
        self._crashed += 1
        self._crashes.append(TaskCrash(name=name, error=f"{type(error).__name__}: {error}"))
        self._log.error(
            "task %s of %s crashed; its siblings go on", name, self.name, exc_info=error
        )
        if self._on_crash is not None:
            try:
                self._on_crash(name, error)
            except Exception:  # a crash handler that fails is logged, never propagated
                self._log.exception("crash handler of %s failed", self.name)

    async def close(self, grace_s: float | None = 0.0) -> None:
        """Stop spawning; wait up to ``grace_s`` seconds (``None``: no limit) for the running
        tasks, then cancel what is left and wait for it to end. Idempotent."""
        self._closing = True
        if self._tasks and (grace_s is None or grace_s > 0):
            await asyncio.wait(set(self._tasks), timeout=grace_s)
        while self._tasks:
            left = set(self._tasks)
            for task in left:
                task.cancel()
            await asyncio.wait(left)

    def statistics(self) -> SupervisorStatistics:
        return SupervisorStatistics(
            name=self.name,
            running=len(self._tasks),
            spawned=self._spawned,
            crashed=self._crashed,
            cancelled=self._cancelled,
            closed=self._closing,
            last_crashes=tuple(self._crashes),
        )
