"""lemon_mcp's ``lemon.apps`` hook: registers the runtime's :data:`~lemon_core.mcp.MCP_HUB`.

Profiles ``daemon``, ``execution-only`` and ``full`` (wherever the agent runs). Start starts
no server: the hub starts each one on the first run that needs it. It registers ``mcp.status``
and ``mcp.logs`` on the runtime's wire methods (:mod:`lemon_mcp._wire_methods`). Leaving the
hub's server state changes are published on the runtime's bus (``mcp`` topic,
``mcp_server_status`` events: :mod:`lemon_mcp._status_events`). Leaving the
lifespan unregisters them and the hub, and ends every server it started (their process
groups: TERM, then KILL after 2 s).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Final

from lemon_core.config import read_secrets
from lemon_core.mcp import MCP_HUB
from lemon_core.wire_methods import WIRE_METHODS
from lemon_mcp._hub import McpHubImpl
from lemon_mcp._section import SECTIONS, McpConfig
from lemon_mcp._status_events import status_publisher
from lemon_mcp._wire_methods import registered
from lemon_runtime import AppSpec, Runtime

__all__ = ["lemon_mcp_app"]


@contextlib.asynccontextmanager
async def _lifespan(runtime: Runtime) -> AsyncIterator[McpHubImpl]:
    environ = {**read_secrets(runtime.home), **os.environ}
    hub = McpHubImpl(home=runtime.home, environ=environ)
    capabilities = runtime.context.capabilities
    capabilities.register(MCP_HUB, hub)
    unsubscribe = hub.subscribe(status_publisher(runtime.bus, hub))
    try:
        methods = capabilities.get(WIRE_METHODS)
        if methods is None:
            yield hub
        else:
            with registered(methods, hub, runtime.section(McpConfig)):
                yield hub
    finally:
        capabilities.unregister(MCP_HUB, hub)
        await hub.aclose()  # its servers' "disconnected" events go out while the bus is up
        unsubscribe()


lemon_mcp_app: Final = AppSpec(
    name="lemon_mcp",
    lifespan=_lifespan,
    # The daemon too: it runs the agent (lemon daemon / serve), so its runs reach the servers.
    profiles=frozenset({"daemon", "execution-only", "full"}),
    description="MCP servers' tools for the agent (started lazily)",
    sections=SECTIONS,
    provides=(MCP_HUB,),
)
