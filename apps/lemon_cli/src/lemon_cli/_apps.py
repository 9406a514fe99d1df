"""The ``lemon.apps`` start/stop hooks of coding_agent, lemon_gateway and lemon_router.

They live here (the terminal owns the in-process runtime) so the owning apps need no change:

* ``coding_agent`` (profiles ``execution-only``, ``full``): registers ``APPROVALS`` (one
  :class:`ExecApprovals` on the runtime's bus) and ``AGENT_RUNTIME``. When the
  ``lemon.executor`` group's executor is coding_agent's :class:`CodingExecutor`, it is built
  here wired to the runtime (its home, the approvals, the environment plus
  ``$LEMON_HOME/secrets.env``); another ready executor is used as the entry point gives it;
  with none ready, the built-in :class:`lemon_cli._executor.AgentExecutor` runs (and the
  reason is kept for ``lemon doctor``).
* ``lemon_gateway`` (requires coding_agent; ``execution-only``, ``full``): a
  :class:`lemon_gateway.Gateway` with the ``[gateway]`` settings, which registers itself as
  ``ENGINE_RUNTIME`` (with its ``steer`` and ``is_live`` extensions for the router).
* ``lemon_router`` (requires lemon_gateway; ``full``): a :class:`lemon_router.Router` with
  the chat state in the runtime's store, registered as ``ROUTER_BRIDGE``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal, cast

from coding_agent import CodingExecutor
from lemon_cli._executor import AgentExecutor
from lemon_cli._models import read_secrets
from lemon_core.approvals import ExecApprovals
from lemon_core.execution import Executor
from lemon_core.runtime import AGENT_RUNTIME, APPROVALS, AppSpec, Runtime
from lemon_core.store import ChatStateStore
from lemon_gateway import Gateway, GatewayConfig, validate_executor
from lemon_router import Router, RouterConfig

__all__ = [
    "AgentApp",
    "build_agent_app",
    "coding_agent_app",
    "lemon_gateway_app",
    "lemon_router_app",
]


@dataclass(kw_only=True, slots=True)
class AgentApp:
    """What the coding_agent hook registers as ``AGENT_RUNTIME``."""

    impl: Executor
    approvals: ExecApprovals
    source: Literal["entry point", "built-in"]
    reason: str | None = None  # why the entry point executor is not used

    def executor(self) -> Executor:
        return self.impl

    def not_ready_reason(self) -> str | None:
        return None


def build_agent_app(runtime: Runtime, *, builtin: bool = False) -> AgentApp:
    """The agent of ``runtime``: the coding executor when ready (or ``builtin=True`` for
    the built-in one)."""
    approvals = ExecApprovals(runtime.bus)
    status = validate_executor()
    if status.ready and not builtin:
        impl = status.executor
        if isinstance(impl, CodingExecutor):
            environ = {**read_secrets(runtime.home), **os.environ}
            impl = CodingExecutor(home=runtime.home, approvals=approvals, environ=environ)
        assert impl is not None
        return AgentApp(impl=impl, approvals=approvals, source="entry point")
    fallback = AgentExecutor(
        config=runtime.config, home=runtime.home, store=runtime.store, approvals=approvals
    )
    reason = "built-in executor asked for" if builtin else status.reason
    return AgentApp(impl=fallback, approvals=approvals, source="built-in", reason=reason)


async def _start_agent(runtime: Runtime) -> AgentApp:
    builtin = runtime.context.settings.get("executor") == "built-in"
    app = build_agent_app(runtime, builtin=builtin)
    runtime.context.capabilities.register(APPROVALS, app.approvals)
    runtime.context.capabilities.register(AGENT_RUNTIME, app)
    return app


async def _stop_agent(runtime: Runtime, handle: object) -> None:
    app = cast(AgentApp, handle)
    runtime.context.capabilities.unregister(AGENT_RUNTIME, app)
    runtime.context.capabilities.unregister(APPROVALS, app.approvals)


async def _start_gateway(runtime: Runtime) -> Gateway:
    agent = runtime.context.capabilities.require(AGENT_RUNTIME)
    settings = runtime.config.gateway
    config = GatewayConfig(max_concurrent_runs=settings.max_concurrent_runs)
    gateway = Gateway(
        bus=runtime.bus,
        executor=agent.executor(),
        store=runtime.store,
        config=config,
        runtime=runtime.context,  # registers ENGINE_RUNTIME on start, unregisters on stop
    )
    await gateway.start()
    return gateway


async def _stop_gateway(runtime: Runtime, handle: object) -> None:
    await cast(Gateway, handle).stop()


async def _start_router(runtime: Runtime) -> Router:
    router = Router(
        bus=runtime.bus,
        context=runtime.context,
        chat_state=ChatStateStore(runtime.store),
        config=RouterConfig(),
    )
    await router.__aenter__()
    return router


async def _stop_router(runtime: Runtime, handle: object) -> None:
    await cast(Router, handle).__aexit__(None, None, None)


_BOTH = frozenset({"execution-only", "full"})

coding_agent_app = AppSpec(
    name="coding_agent",
    start=_start_agent,
    stop=_stop_agent,
    profiles=_BOTH,
    description="the native agent (executor and approvals)",
)
lemon_gateway_app = AppSpec(
    name="lemon_gateway",
    start=_start_gateway,
    stop=_stop_gateway,
    requires=("coding_agent",),
    profiles=_BOTH,
    description="execution slots and the run lifecycle (EngineRuntime)",
)
lemon_router_app = AppSpec(
    name="lemon_router",
    start=_start_router,
    stop=_stop_router,
    requires=("lemon_gateway",),
    profiles=frozenset({"full"}),
    description="sessions and queue modes (RouterBridge)",
)
