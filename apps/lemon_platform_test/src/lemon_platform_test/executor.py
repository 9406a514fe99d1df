"""A scriptable executor for gateway tests (implements lemon_core.execution.Executor).

Each run follows a :class:`Script`: emit deltas and actions, report the native session,
block on a :class:`Gate` until the test opens it, fail, hang (until cancelled), or
complete. Launch (``prepare``) can be told to fail a number of times or to block on a gate.
Scripts are chosen by exact run id, then by prompt, then the default (an echo).

Steering: a script built with ``steering("accept" | "refuse" | "raise")`` launches a prepared
execution that implements :class:`~lemon_core.execution.SteerableExecution` (accepting only
while it executes, recording each text in ``RunRecord.steers``; ``echo_steers()`` streams them
as deltas); without it the prepared execution has no ``steer`` at all.

Everything is observable without sleeping: :class:`Gate` has ``reached`` (the executor is
blocked on it) and the executor records every launch attempt, execution and cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lemon_core.execution import (
    ActionKind,
    ActionPhase,
    ExecutionJob,
    ExecutionResult,
    ExecutionSink,
    PreparedExecution,
    ResumeToken,
    SessionBindingSink,
)
from lemon_platform_test.errors import PlatformTestError

__all__ = ["Gate", "LaunchError", "RunRecord", "Script", "ScriptedExecutor"]


class LaunchError(PlatformTestError, RuntimeError):
    """The scripted launch failure."""


class Gate:
    """A barrier the executor blocks on until the test opens it."""

    def __init__(self, name: str = "gate") -> None:
        self.name = name
        self._open = asyncio.Event()
        self._reached = asyncio.Event()
        self.arrivals = 0

    def open(self) -> None:
        """Let every current and future arrival pass."""
        self._open.set()

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    async def reached(self) -> None:
        """Wait until some execution is blocked on (or passed) this gate."""
        await self._reached.wait()

    async def pass_through(self) -> None:
        self.arrivals += 1
        self._reached.set()
        await self._open.wait()


@dataclass(frozen=True, slots=True)
class _Step:
    op: str
    args: Mapping[str, Any] = field(default_factory=dict)


class Script:
    """What one run does, built fluently: ``Script().delta("a").gate(g).complete()``."""

    def __init__(self) -> None:
        self.steps: list[_Step] = []
        self.launch_failures = 0
        self.launch_gate: Gate | None = None
        self.steer_mode: Literal["accept", "refuse", "raise"] | None = None

    def steering(self, mode: Literal["accept", "refuse", "raise"] = "accept") -> Script:
        """The prepared execution implements ``steer``: it accepts while executing, refuses
        always, or raises (an executor bug the gateway must contain)."""
        self.steer_mode = mode
        return self

    def echo_steers(self) -> Script:
        """Emit one delta ``"steered: <text>"`` for each steer accepted so far."""
        self.steps.append(_Step("echo_steers"))
        return self

    def fail_launch(self, times: int) -> Script:
        """``prepare`` raises LaunchError this many times before succeeding."""
        self.launch_failures = times
        return self

    def block_launch(self, gate: Gate) -> Script:
        """``prepare`` blocks on ``gate``."""
        self.launch_gate = gate
        return self

    def started(self, resume: ResumeToken | None = None) -> Script:
        self.steps.append(_Step("started", {"resume": resume}))
        return self

    def delta(self, *texts: str) -> Script:
        for text in texts:
            self.steps.append(_Step("delta", {"text": text}))
        return self

    def action(
        self,
        *,
        id: str,
        kind: ActionKind = ActionKind.TOOL,
        title: str = "tool",
        phase: ActionPhase = "updated",
        detail: Mapping[str, Any] | None = None,
        ok: bool | None = None,
        message: str | None = None,
        level: str | None = None,
    ) -> Script:
        self.steps.append(
            _Step(
                "action",
                {
                    "id": id,
                    "kind": kind,
                    "title": title,
                    "phase": phase,
                    "detail": detail,
                    "ok": ok,
                    "message": message,
                    "level": level,
                },
            )
        )
        return self

    def gate(self, gate: Gate) -> Script:
        """Block until ``gate`` opens."""
        self.steps.append(_Step("gate", {"gate": gate}))
        return self

    def hang(self) -> Script:
        """Block until cancelled."""
        self.steps.append(_Step("hang"))
        return self

    def raise_error(self, message: str = "executor crashed") -> Script:
        """Raise RuntimeError(message) from ``execute``."""
        self.steps.append(_Step("raise", {"message": message}))
        return self

    def complete(
        self,
        *,
        ok: bool = True,
        answer: str = "",
        error: str | None = None,
        resume: ResumeToken | None = None,
        usage: Mapping[str, Any] | None = None,
    ) -> Script:
        self.steps.append(
            _Step(
                "complete",
                {"ok": ok, "answer": answer, "error": error, "resume": resume, "usage": usage},
            )
        )
        return self

    def fail(self, error: str = "failed") -> Script:
        """Complete with ``ok=False`` and ``error``."""
        return self.complete(ok=False, error=error)


@dataclass(slots=True)
class RunRecord:
    """What the executor saw of one run."""

    job: ExecutionJob
    launch_attempts: int = 0
    executing: bool = False
    finished: bool = False
    cancelled: bool = False
    executed: asyncio.Event = field(default_factory=asyncio.Event)
    steers: list[str] = field(default_factory=list)
    """Texts this run's execution accepted through ``steer``, in order."""
    steer_refusals: int = 0


class _Prepared:
    def __init__(self, owner: ScriptedExecutor, record: RunRecord, script: Script) -> None:
        self._owner = owner
        self._record = record
        self._script = script

    async def execute(self, sink: ExecutionSink) -> ExecutionResult:
        record = self._record
        record.executing = True
        record.executed.set()
        self._owner.order.append(record.job.run_id)
        try:
            result = await self._run(sink)
        except asyncio.CancelledError:
            record.cancelled = True
            raise
        finally:
            record.executing = False
            record.finished = True
        return result

    async def _run(self, sink: ExecutionSink) -> ExecutionResult:
        for step in self._script.steps:
            a = step.args
            if step.op == "started":
                sink.started(resume=a["resume"])
                if isinstance(sink, SessionBindingSink):
                    await sink.session_bound()  # as the native executor does
            elif step.op == "delta":
                sink.delta(a["text"])
            elif step.op == "action":
                sink.action(**a)
            elif step.op == "gate":
                await a["gate"].pass_through()
            elif step.op == "hang":
                await asyncio.Event().wait()
            elif step.op == "raise":
                raise RuntimeError(a["message"])
            elif step.op == "echo_steers":
                for text in self._record.steers:
                    sink.delta(f"steered: {text}")
            elif step.op == "complete":
                return ExecutionResult(**a)
        return ExecutionResult(ok=True)


class _SteerablePrepared(_Prepared):
    """A prepared execution that also implements SteerableExecution."""

    def steer(self, text: str) -> bool:
        record = self._record
        mode = self._script.steer_mode
        if mode == "raise":
            raise RuntimeError("scripted steer failure")
        if mode != "accept" or not record.executing or record.finished:
            record.steer_refusals += 1
            return False
        record.steers.append(text)
        return True


class ScriptedExecutor:
    """The scriptable test executor. See the module docstring."""

    def __init__(self, default: Script | None = None) -> None:
        self._default = default
        self._by_run: dict[str, Script] = {}
        self._by_prompt: dict[str, Script] = {}
        self.records: dict[str, RunRecord] = {}
        self.order: list[str] = []
        self.concurrent = 0
        self.max_concurrent = 0

    def script_run(self, run_id: str, script: Script) -> ScriptedExecutor:
        self._by_run[run_id] = script
        return self

    def script_prompt(self, prompt: str, script: Script) -> ScriptedExecutor:
        self._by_prompt[prompt] = script
        return self

    def _script_for(self, job: ExecutionJob) -> Script:
        script = self._by_run.get(job.run_id) or self._by_prompt.get(job.prompt)
        if script is not None:
            return script
        if self._default is not None:
            return self._default
        return (
            Script()
            .delta(f"Echo: {job.prompt}")
            .complete(answer=f"Echo: {job.prompt}", resume=ResumeToken.native(job.run_id))
        )

    async def prepare(self, job: ExecutionJob) -> PreparedExecution:
        record = self.records.get(job.run_id)
        if record is None:
            record = self.records[job.run_id] = RunRecord(job=job)
        record.launch_attempts += 1
        script = self._script_for(job)
        if script.launch_gate is not None:
            await script.launch_gate.pass_through()
        if record.launch_attempts <= script.launch_failures:
            raise LaunchError(f"scripted launch failure {record.launch_attempts} of {job.run_id}")
        if script.steer_mode is not None:
            return _SteerablePrepared(self, record, script)
        return _Prepared(self, record, script)

    def record(self, run_id: str) -> RunRecord:
        """The record of ``run_id``; KeyError if it was never launched."""
        return self.records[run_id]
