"""lemon_router's ``lemon.apps`` hook: the router on a booted runtime.

Requires ``lemon_gateway``; profile ``full``. Start enters a :class:`Router` with the chat
state in the runtime's store (:class:`~lemon_core.store.ChatStateStore`), which registers
``ROUTER_BRIDGE``. Stop exits it (queued messages reported cancelled, active runs cancelled).
"""

from __future__ import annotations

from typing import cast

from lemon_core.runtime import AppSpec, Runtime
from lemon_core.store import ChatStateStore
from lemon_router._config import RouterConfig
from lemon_router._router import Router

__all__ = ["lemon_router_app"]


async def _start(runtime: Runtime) -> Router:
    router = Router(
        bus=runtime.bus,
        context=runtime.context,
        chat_state=ChatStateStore(runtime.store),
        config=RouterConfig(),
    )
    await router.__aenter__()
    return router


async def _stop(runtime: Runtime, handle: object) -> None:
    await cast(Router, handle).__aexit__(None, None, None)


lemon_router_app = AppSpec(
    name="lemon_router",
    start=_start,
    stop=_stop,
    requires=("lemon_gateway",),
    profiles=frozenset({"full"}),
    description="sessions and queue modes (RouterBridge)",
)
