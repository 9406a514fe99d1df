"""lemon_router's ``lemon.apps`` hook: the router on a booted runtime.

Requires ``lemon_gateway``; profile ``full``; owns the ``[router]`` section
(:class:`RouterSection`). Its lifespan enters a :class:`Router` with the chat state in the
runtime's store (:class:`~lemon_core.store.ChatStateStore`), which registers
``ROUTER_BRIDGE``, and registers the in-process session port
(:class:`~lemon_router.RouterSessionPort`) as ``SESSION_PORT``: the one API clients use; the
handle is the port. Leaving it unregisters the port and exits the router (queued messages
reported cancelled, active runs cancelled).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Final

from lemon_core.sessions import SESSION_PORT
from lemon_core.store import ChatStateStore
from lemon_router._config import RouterConfig
from lemon_router._port import RouterSessionPort
from lemon_router._router import Router
from lemon_router._section import SECTIONS, RouterSection
from lemon_runtime import AppSpec, DaemonWorkspace, Runtime

__all__ = ["lemon_router_app"]


@contextlib.asynccontextmanager
async def _lifespan(runtime: Runtime) -> AsyncIterator[RouterSessionPort]:
    section = runtime.section(RouterSection)
    async with Router(
        bus=runtime.bus,
        context=runtime.context,
        chat_state=ChatStateStore(runtime.store),
        config=RouterConfig(lease_ttl_ms=max(1, int(section.lease_ttl_s * 1000))),
        # Sessions shared across daemons when the store is (their leases); else None.
        leases=runtime.leases,
        store=runtime.store if runtime.leases is not None else None,
    ) as router:
        # The daemon's workspace (`lemon serve --cwd`): sessions without their own start there.
        workspace = runtime.option(DaemonWorkspace)
        port = RouterSessionPort(
            router,
            store=runtime.store,
            default_workspace=None if workspace is None else workspace.path,
        )
        runtime.context.capabilities.register(SESSION_PORT, port)
        try:
            yield port
        finally:
            runtime.context.capabilities.unregister(SESSION_PORT, port)


lemon_router_app: Final = AppSpec(
    name="lemon_router",
    lifespan=_lifespan,
    requires=("lemon_gateway",),
    profiles=frozenset({"full"}),
    description="sessions and queue modes (RouterBridge, SessionPort)",
    sections=SECTIONS,
)
