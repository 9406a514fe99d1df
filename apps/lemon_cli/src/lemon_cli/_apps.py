"""The ``lemon.apps`` start/stop hooks of coding_agent, lemon_gateway and lemon_router.

They live here (the terminal owns the in-process runtime) so the owning apps need no change:

* ``coding_agent`` (profiles ``execution-only``, ``full``): registers ``AGENT_RUNTIME``. Its
  executor is the one of the ``lemon.executor`` entry point group when that is ready, else
  the interim :class:`lemon_cli._executor.AgentExecutor`; an :class:`ApprovalBroker` is
  registered as ``APPROVALS``.
* ``lemon_gateway`` (requires coding_agent; ``execution-only``, ``full``): a
  :class:`lemon_gateway.Gateway` with the ``[gateway]`` settings, registered as
  ``ENGINE_RUNTIME`` through :class:`SteerableEngine` (adds steering into the live agent
  run and run liveness, which the router uses when present).
* ``lemon_router`` (requires lemon_gateway; ``full``): a :class:`lemon_router.Router` with
  the chat state in the runtime's store, registered as ``ROUTER_BRIDGE``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

from lemon_cli._approvals import APPROVALS, ApprovalBroker
from lemon_cli._executor import AgentExecutor
from lemon_core.execution import ENGINE_RUNTIME, ExecutionCommand, Executor
from lemon_core.runtime import AGENT_RUNTIME, AppSpec, Runtime
from lemon_core.store import ChatStateStore
from lemon_gateway import Gateway, GatewayConfig, load_executor, validate_executor
from lemon_router import Router, RouterConfig

__all__ = [
    "AgentApp",
    "SteerableEngine",
    "coding_agent_app",
    "lemon_gateway_app",
    "lemon_router_app",
]


@dataclass(kw_only=True, slots=True)
class AgentApp:
    """What the coding_agent hook registers as ``AGENT_RUNTIME``."""

    impl: Executor
    source: str  # "entry point" or "interim"
    reason: str | None = None  # why the entry point executor is not used

    def executor(self) -> Executor:
        return self.impl

    def not_ready_reason(self) -> str | None:
        return None


async def _start_agent(runtime: Runtime) -> AgentApp:
    approvals = ApprovalBroker(bus=runtime.bus, store=runtime.store)
    runtime.context.capabilities.register(APPROVALS, approvals)
    status = validate_executor()
    if status.ready:
        app = AgentApp(impl=load_executor(), source="entry point")
    else:
        interim = AgentExecutor(
            config=runtime.config, home=runtime.home, store=runtime.store, approvals=approvals
        )
        app = AgentApp(impl=interim, source="interim", reason=status.reason)
    runtime.context.capabilities.register(AGENT_RUNTIME, app)
    return app


async def _stop_agent(runtime: Runtime, handle: object) -> None:
    app = cast(AgentApp, handle)
    runtime.context.capabilities.unregister(AGENT_RUNTIME, app)
    broker = runtime.context.capabilities.get(APPROVALS)
    if broker is not None:
        runtime.context.capabilities.unregister(APPROVALS, broker)


class SteerableEngine:
    """The gateway as ``EngineRuntime``, plus steering and liveness for the router."""

    def __init__(self, gateway: Gateway, executor: Executor) -> None:
        self.gateway = gateway
        self._executor = executor

    def submit(self, command: ExecutionCommand) -> None:
        self.gateway.submit(command)

    def cancel(self, run_id: str, reason: str = "user_requested") -> bool:
        return self.gateway.cancel(run_id, reason)

    def available(self) -> bool:
        return self.gateway.available()

    def is_live(self, run_id: str) -> bool:
        return self.gateway.handle(run_id) is not None

    async def steer(self, run_id: str, text: str, *, mode: Literal["steer", "redirect"]) -> bool:
        steer = getattr(self._executor, "steer", None)
        if mode != "steer" or steer is None:
            return False
        return bool(await steer(run_id, text))


async def _start_gateway(runtime: Runtime) -> SteerableEngine:
    agent = runtime.context.capabilities.require(AGENT_RUNTIME)
    executor = agent.executor()
    settings = runtime.config.gateway
    config = GatewayConfig(max_concurrent_runs=settings.max_concurrent_runs)
    gateway = Gateway(bus=runtime.bus, executor=executor, store=runtime.store, config=config)
    await gateway.start()
    engine = SteerableEngine(gateway, executor)
    runtime.context.capabilities.register(ENGINE_RUNTIME, engine)
    return engine


async def _stop_gateway(runtime: Runtime, handle: object) -> None:
    engine = cast(SteerableEngine, handle)
    runtime.context.capabilities.unregister(ENGINE_RUNTIME, engine)
    await engine.gateway.stop()


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
