"""Server state changes as bus events: the hub's changes published on the ``mcp`` topic.

``mcp`` is an app-internal topic (lemon_mcp publishes, its readers subscribe), so the event type
``mcp_server_status`` is not registered in ``lemon_core.events`` and its payload is a plain,
versioned mapping documented here and in the README (the rule for untyped app events):

``{"version": 1, "name": NAME, "state": STATE, "change": CHANGE, "transport": "stdio" |
"http", "detail": "streamable-http" | "sse (legacy)" | "stdio" | "", "tools": N, "error":
REASON | null}``, with ``meta = {"server": NAME}``.

``state`` is one of ``starting``, ``connected`` (ready, and after a tools refresh),
``disconnected`` (stopped, or a ready server's connection ended), ``failed`` and
``needs_login`` (failed for want of an OAuth login); ``change`` is the hub's own word
(``starting``, ``ready``, ``tools_changed``, ``lost``, ``stopped``, ``failed``,
``needs_login``). A closed bus (shutdown) drops the event.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from lemon_core.bus import Bus
from lemon_core.errors import BusClosedError

if TYPE_CHECKING:
    from lemon_mcp._hub import McpHubImpl

__all__ = ["MCP_TOPIC", "STATUS_EVENT", "status_publisher"]

MCP_TOPIC: Final = "mcp"
STATUS_EVENT: Final = "mcp_server_status"

_STATE_OF_CHANGE: Final = {
    "starting": "starting",
    "ready": "connected",
    "tools_changed": "connected",
    "lost": "disconnected",
    "stopped": "disconnected",
    "failed": "failed",
    "needs_login": "needs_login",
}


def status_publisher(bus: Bus, hub: McpHubImpl) -> Callable[[str, str], None]:
    """A hub listener that publishes each change of a server as an ``mcp_server_status``."""

    def publish(name: str, change: str) -> None:
        status = next((s for s in hub.status() if s.name == name), None)
        payload: dict[str, Any] = {
            "version": 1,
            "name": name,
            "state": _STATE_OF_CHANGE.get(change, change),
            "change": change,
            "transport": status.transport if status is not None else "",
            "detail": status.detail if status is not None else "",
            "tools": status.tools if status is not None else 0,
            "error": status.last_error if status is not None else None,
        }
        with contextlib.suppress(BusClosedError):  # the runtime is stopping: nobody to tell
            bus.broadcast_event(MCP_TOPIC, STATUS_EVENT, payload, {"server": name})

    return publish
