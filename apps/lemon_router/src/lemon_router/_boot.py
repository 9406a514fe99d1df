"""lemon_router's ``lemon.apps`` hook: the router on a booted runtime.

Requires ``lemon_gateway``; profile ``full``. Start enters a :class:`Router` with the chat
state in the runtime's store (:class:`~lemon_core.store.ChatStateStore`), which registers
``ROUTER_BRIDGE``, and registers the in-process session port
(:class:`~lemon_router.RouterSessionPort`) as ``SESSION_PORT``: the one API clients use. Stop
unregisters the port and exits the router (queued messages reported cancelled, active runs
cancelled).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from lemon_core.runtime import AppSpec, Runtime
from lemon_core.sessions import SESSION_PORT
from lemon_core.store import ChatStateStore
from lemon_router._config import RouterConfig
from lemon_router._port import RouterSessionPort
from lemon_router._router import Router

__all__ = ["lemon_router_app"]


@dataclass(frozen=True, slots=True)
class _Started:
    router: Router
    port: RouterSessionPort


async def _start(runtime: Runtime) -> _Started:
    router = Router(
        bus=runtime.bus,
        context=runtime.context,
        chat_state=ChatStateStore(runtime.store),
        config=RouterConfig(lease_ttl_ms=max(1, int(runtime.config.gateway.lease_ttl_s * 1000))),
        # Sessions shared across daemons when the store is (their leases); else None.
        leases=runtime.leases,
        store=runtime.store if runtime.leases is not None else None,
    )
    await router.__aenter__()
    port = RouterSessionPort(router, store=runtime.store)
    runtime.context.capabilities.register(SESSION_PORT, port)
    return _Started(router, port)


async def _stop(runtime: Runtime, handle: object) -> None:
    started = cast(_Started, handle)
    runtime.context.capabilities.unregister(SESSION_PORT, started.port)
    await started.router.__aexit__(None, None, None)


lemon_router_app = AppSpec(
    name="lemon_router",
    start=_start,
    stop=_stop,
    requires=("lemon_gateway",),
    profiles=frozenset({"full"}),
    description="sessions and queue modes (RouterBridge, SessionPort)",
)
