"""An agent app for the daemon profile whose executor is a given scripted one (the kit's
``ScriptedExecutor``), with the runtime's ExecApprovals: the tests that replace the real agent
boot it as ``coding_agent``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lemon_core.approvals import ExecApprovals
from lemon_core.capabilities import AGENT_RUNTIME, APPROVALS
from lemon_core.execution import Executor
from lemon_platform_test.lifespans import hooks
from lemon_runtime import AppSpec, Runtime


@dataclass
class ScriptedAgent:
    scripted: Any
    approvals: ExecApprovals

    def executor(self) -> Executor:
        executor: Executor = self.scripted
        return executor

    def not_ready_reason(self) -> str | None:
        return None


def scripted_agent_app(scripted: Any) -> AppSpec:
    """The ``coding_agent`` app (profile ``full``) whose agent runs ``scripted``."""

    async def start(runtime: Runtime) -> ScriptedAgent:
        agent = ScriptedAgent(scripted=scripted, approvals=ExecApprovals(runtime.bus))
        runtime.context.capabilities.register(APPROVALS, agent.approvals)
        runtime.context.capabilities.register(AGENT_RUNTIME, agent)
        return agent

    async def stop(runtime: Runtime, handle: object) -> None:
        assert isinstance(handle, ScriptedAgent)
        runtime.context.capabilities.unregister(AGENT_RUNTIME, handle)
        runtime.context.capabilities.unregister(APPROVALS, handle.approvals)

    return AppSpec(
        name="coding_agent",
        lifespan=hooks(start, stop),
        profiles=frozenset({"full"}),
        provides=(AGENT_RUNTIME, APPROVALS),
    )
