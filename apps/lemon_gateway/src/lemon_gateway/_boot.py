"""lemon_gateway's ``lemon.apps`` hook: the gateway on a booted runtime.

Needs the ``AGENT_RUNTIME`` capability (``AppSpec.needs``: whichever app provides it, today
coding_agent, starts first; the gateway names and imports no agent app) and provides
``ENGINE_RUNTIME``; profiles ``execution-only`` and ``full``. Start builds a :class:`Gateway`
with every ``[gateway]`` setting and the executor of ``AGENT_RUNTIME`` when one is registered
and ready, else none (the gateway then finds its executor in the ``lemon.executor`` entry
point group). On the default SQLite store the gateway records runs in flight under a run-owner
lock in ``$LEMON_HOME/store/run-owners`` and completes a dead process's runs once, as
``vanished``, when it starts. The gateway registers itself as ``ENGINE_RUNTIME`` on start; with
the runtime's ``VANISHED_RUN_LISTENER`` (registered by an app that starts before it, e.g.
lemon_webhooks) it forwards every run it completes as ``vanished`` to that listener. Leaving
the lifespan is :meth:`Gateway.stop` (every accepted run completes once, then it
unregisters). The app owns the ``[gateway]`` section (:class:`GatewayConfig`), which the
gateway takes as it is.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Final

from lemon_core.capabilities import AGENT_RUNTIME
from lemon_core.execution import (
    ENGINE_RUNTIME,
    VANISHED_RUN_LISTENER,
    CapabilityRegistry,
    VanishedRun,
)
from lemon_core.home import Home
from lemon_gateway._gateway import Gateway
from lemon_gateway._section import SECTIONS, GatewayConfig
from lemon_infra import SQLiteStore
from lemon_runtime import AppSpec, Runtime

__all__ = ["lemon_gateway_app", "run_owners_dir", "session_locks_dir"]


def run_owners_dir(home: Path) -> Path:
    """Where the gateways of ``home`` keep their run-owner locks (see ``_recovery``)."""
    return Home(root=home).run_owners


def session_locks_dir(home: Path) -> Path:
    """Where the gateways of ``home`` take their sessions' locks (see ``_session_locks``)."""
    return Home(root=home).store_dir / "session-locks"


def _forward_vanished(capabilities: CapabilityRegistry) -> Callable[[VanishedRun], Awaitable[None]]:
    """A vanished hook telling the listener registered when the run is completed (if any)."""

    async def hook(run: VanishedRun) -> None:
        listener = capabilities.get(VANISHED_RUN_LISTENER)
        if listener is not None:
            await listener.run_vanished(run)

    return hook


@contextlib.asynccontextmanager
async def _lifespan(runtime: Runtime) -> AsyncIterator[Gateway]:
    agent = runtime.context.capabilities.get(AGENT_RUNTIME)
    ready = agent is not None and agent.not_ready_reason() is None
    gateway = Gateway(
        bus=runtime.bus,
        executor=agent.executor() if agent is not None and ready else None,
        store=runtime.store,
        config=runtime.section(GatewayConfig),  # the [gateway] section as it is
        runtime=runtime.context,  # registers ENGINE_RUNTIME on start, unregisters on stop
        leases=runtime.leases,  # shared engine lock / slots when the store is shared
        # The default SQLite store: runs recorded in flight, a dead process's completed once.
        owners_dir=run_owners_dir(runtime.home)
        if runtime.leases is None and isinstance(runtime.store, SQLiteStore)
        else None,
        # ... and the processes of one home run a session one at a time.
        session_locks_dir=session_locks_dir(runtime.home)
        if runtime.leases is None and isinstance(runtime.store, SQLiteStore)
        else None,
    )
    # Before start: the start-up sweep of a dead process's runs reaches the listener too.
    gateway.on_vanished(_forward_vanished(runtime.context.capabilities))
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.stop()


lemon_gateway_app: Final = AppSpec(
    name="lemon_gateway",
    lifespan=_lifespan,
    needs=(AGENT_RUNTIME,),  # whichever app provides it (coding_agent)
    provides=(ENGINE_RUNTIME,),
    profiles=frozenset({"execution-only", "full"}),
    description="execution slots and the run lifecycle (EngineRuntime)",
    sections=SECTIONS,
)
