"""lemon_cli's ``lemon.apps`` hook: the terminal's built-in fallback agent.

The other apps own their hooks (``coding_agent._boot``, ``lemon_gateway._boot``,
``lemon_router._boot``). This one requires ``coding_agent`` and starts *before*
``lemon_gateway`` (``AppSpec.before``); profiles ``execution-only`` and ``full``. It keeps
coding_agent's ``AGENT_RUNTIME`` when the ``lemon.executor`` group is ready. Otherwise (the
group is not ready, or ``Runtime(settings={"executor": "built-in"})`` asks for it) it puts the
built-in :class:`lemon_cli._executor.AgentExecutor` (with the runtime's ``APPROVALS``) in
``AGENT_RUNTIME`` in its place, keeping the reason; the gateway then runs that one. Stop puts
coding_agent's agent back so its own stop hook unregisters it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from lemon_cli._executor import AgentExecutor
from lemon_core.execution import Executor
from lemon_core.runtime import AGENT_RUNTIME, APPROVALS, AgentRuntime, AppSpec, Runtime
from lemon_gateway import validate_executor

__all__ = ["BuiltinAgent", "lemon_cli_app"]


@dataclass(kw_only=True, slots=True)
class BuiltinAgent:
    """What the hook registers as ``AGENT_RUNTIME`` when the built-in executor runs."""

    impl: AgentExecutor
    reason: str  # why the lemon.executor entry point's executor is not used
    displaced: AgentRuntime | None = None  # coding_agent's agent, put back on stop

    def executor(self) -> Executor:
        return self.impl

    def not_ready_reason(self) -> str | None:
        return None


async def _start(runtime: Runtime) -> BuiltinAgent | None:
    if runtime.context.settings.get("executor") == "built-in":
        reason = "built-in executor asked for"
    else:
        status = validate_executor()
        if status.ready:
            return None  # coding_agent's AGENT_RUNTIME stands
        reason = status.reason or "lemon.executor not ready"
    capabilities = runtime.context.capabilities
    approvals = capabilities.require(APPROVALS)
    impl = AgentExecutor(
        config=runtime.config, home=runtime.home, store=runtime.store, approvals=approvals
    )
    displaced = capabilities.get(AGENT_RUNTIME)
    if displaced is not None:
        capabilities.unregister(AGENT_RUNTIME, displaced)
    agent = BuiltinAgent(impl=impl, reason=reason, displaced=displaced)
    capabilities.register(AGENT_RUNTIME, agent)
    return agent


async def _stop(runtime: Runtime, handle: object) -> None:
    if handle is None:
        return
    agent = cast(BuiltinAgent, handle)
    capabilities = runtime.context.capabilities
    capabilities.unregister(AGENT_RUNTIME, agent)
    if agent.displaced is not None:
        capabilities.register(AGENT_RUNTIME, agent.displaced)


lemon_cli_app = AppSpec(
    name="lemon_cli",
    start=_start,
    stop=_stop,
    requires=("coding_agent",),
    before=("lemon_gateway",),
    profiles=frozenset({"execution-only", "full"}),
    description="the terminal's built-in fallback executor (when lemon.executor is not ready)",
)
