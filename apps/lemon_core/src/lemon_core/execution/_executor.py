"""The executor seam: what the gateway's one native executor implements.

The gateway finds exactly one executor through the ``lemon.executor`` entry point group.
The entry point names a zero-argument callable (usually the class) returning an
:class:`Executor`. A run is two phases:

* :meth:`Executor.prepare` is the *launch*: it may fail and be retried by the gateway, so it
  must not leave anything behind that needs releasing when it raises.
* :meth:`PreparedExecution.execute` streams through the :class:`ExecutionSink` and returns an
  :class:`ExecutionResult`. Cancelling a run cancels the task awaiting ``execute``; an
  executor cleans up on :class:`asyncio.CancelledError` and re-raises it.

Sink methods are loop-only (call them from the event loop running the run), never block,
and never raise for a closed run: late calls after completion are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, Literal, Protocol, runtime_checkable

import msgspec

from lemon_core.events import ActionKind, ErrorCode, RunUsage
from lemon_core.execution._command import Lane, ResumeMode
from lemon_core.execution._context import ExecutionContext
from lemon_core.execution._editor import EditorHandle
from lemon_core.execution._mcp_server import McpServerSpec
from lemon_core.execution._policy import ToolPolicy
from lemon_core.execution._resume import ResumeToken

__all__ = [
    "EXECUTOR_ENTRY_POINT_GROUP",
    "ActionKind",
    "ActionPhase",
    "ExecutionJob",
    "ExecutionResult",
    "ExecutionSink",
    "Executor",
    "PreparedExecution",
    "SessionBindingSink",
    "SteerableExecution",
]

#: The entry point group naming the single native executor.
EXECUTOR_ENTRY_POINT_GROUP: Final = "lemon.executor"

#: The kinds of action an executor reports: the one definition is the event vocabulary
#: (``lemon_core.events.ActionKind``, a ``StrEnum``), re-exported here for executors.
ActionPhase = Literal["started", "updated", "completed"]

_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})


class ExecutionJob(msgspec.Struct, frozen=True, kw_only=True):
    """What the executor is asked to run (built by the gateway from an ExecutionCommand).

    ``resume`` is always native or ``None``: the gateway never hands a foreign token to
    the executor. ``cwd`` is an absolute path.
    """

    run_id: str
    session_key: str
    prompt: str
    cwd: str
    images: tuple[Mapping[str, Any], ...] = ()
    resume: ResumeToken | None = None
    lane: Lane = "main"
    tool_policy: ToolPolicy | None = None
    preapproved: frozenset[str] = frozenset()
    context: ExecutionContext | None = None
    origin: str | None = None
    agent_id: str = "default"
    model: str | None = None
    resume_mode: ResumeMode = "explicit"
    retry_of: str | None = None
    meta: Mapping[str, Any] = _EMPTY
    mcp_servers: tuple[McpServerSpec, ...] = ()
    """MCP servers for this run's session only (the request's): hand them to the MCP hub."""
    editor: EditorHandle | None = None
    """The session's editor file system and terminal (the request's), for the file and shell
    tools."""


class ExecutionResult(msgspec.Struct, frozen=True, kw_only=True):
    """How an execution ended, as told by the executor.

    A failed result names its ``error_code`` (the gateway uses ``executor_failed`` when an
    executor leaves it out); ``error`` is the sentence a person reads.
    """

    ok: bool
    answer: str = ""
    error: str | None = None
    error_code: ErrorCode | None = None
    resume: ResumeToken | None = None
    usage: RunUsage | None = None


@runtime_checkable
class ExecutionSink(Protocol):
    """Where an executor streams a run's output. Loop-only, non-blocking."""

    def started(self, *, resume: ResumeToken | None = None) -> None:
        """The native session is live; ``resume`` resumes it later."""

    def delta(self, text: str) -> None:
        """A piece of answer text, in order."""

    def action(
        self,
        *,
        id: str,
        kind: ActionKind,
        title: str,
        detail: Mapping[str, Any] | None = None,
        phase: ActionPhase = "updated",
        ok: bool | None = None,
        message: str | None = None,
        level: str | None = None,
    ) -> None:
        """A tool call, command, file change... moving through its phases."""


@runtime_checkable
class SessionBindingSink(Protocol):
    """Optional: an :class:`ExecutionSink` that records which native session a run is bound
    to (the session key's mapping) when the run starts, not only when it ends.

    An executor that reports a native session with :meth:`ExecutionSink.started` awaits
    :meth:`session_bound` before it asks a model anything: from then on a crash of the process
    leaves the session key mapped to the session the run's prompt is in. It never raises a
    store failure (the sink logs it; the run goes on); it is cancelled with the run.
    """

    async def session_bound(self) -> None:
        """Return once the session reported by ``started`` is recorded (at once when nothing
        had to be recorded)."""


@runtime_checkable
class PreparedExecution(Protocol):
    """A launched execution, ready to stream."""

    async def execute(self, sink: ExecutionSink) -> ExecutionResult:
        """Run to the end, streaming through ``sink``."""
        ...


@runtime_checkable
class SteerableExecution(Protocol):
    """Optional: a :class:`PreparedExecution` that takes steering text while it executes.

    The gateway calls :meth:`steer` (loop-only, from the loop running ``execute``) only
    while the run is executing; a prepared execution without it refuses every steer.
    """

    def steer(self, text: str) -> bool:
        """True: ``text`` was accepted into the running execution (it will be acted on, or
        reported as lost with the run). False: it cannot take it now (not started, finishing,
        full); nothing was kept. Should not raise (the gateway counts a raise as False)."""
        ...


@runtime_checkable
class Executor(Protocol):
    """The gateway's one native executor."""

    async def prepare(self, job: ExecutionJob) -> PreparedExecution:
        """Launch ``job``; raising counts as a failed launch attempt (the gateway retries)."""
        ...
