"""lemon_mcp's control-plane methods, registered on ``WIRE_METHODS`` by its lifespan (admin
scope: they show what runs on the daemon's machine).

* ``mcp.status``: ``{"version": 1, "servers": [{name, transport, detail, state, tools,
  last_error, needs_login}]}`` (``needs_login``: failed for want of an OAuth login), every
  server of the daemon's configuration (``stopped`` until a run needs it: servers start
  lazily) and any the hub started for a project's run.
* ``mcp.logs`` ``{"name": NAME}``: the server's stderr ring (the last 64 KiB of a stdio
  server; kept after it ended), never a secret the hub holds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Final

from lemon_core.errors import UsageError
from lemon_core.wire_methods import WireCall, WireMethods
from lemon_mcp._hub import McpHubImpl
from lemon_mcp._section import SERVER_NAME_RE, McpConfig

__all__ = ["registered"]

_OWNER: Final = "lemon_mcp"


def _row(
    name: str,
    transport: str,
    detail: str,
    state: str,
    tools: int,
    last_error: str | None,
    needs_login: bool = False,
) -> dict[str, Any]:
    return {"name": name, "transport": transport, "detail": detail, "state": state,
            "tools": tools, "last_error": last_error, "needs_login": needs_login}  # fmt: skip


def _status(hub: McpHubImpl, config: McpConfig) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {
        name: _row(name, server.transport, "", "stopped" if server.enabled else "disabled", 0, None)
        for name, server in config.servers.items()
    }
    for s in hub.status():
        rows[s.name] = _row(
            s.name, s.transport, s.detail, s.state.value, s.tools, s.last_error, s.needs_login
        )
    return {"version": 1, "servers": [rows[n] for n in sorted(rows)]}


@contextlib.contextmanager
def registered(methods: WireMethods, hub: McpHubImpl, config: McpConfig) -> Iterator[None]:
    """``mcp.status`` and ``mcp.logs`` on ``methods`` while the block runs."""

    async def status(call: WireCall) -> dict[str, Any]:
        return _status(hub, config)

    async def logs(call: WireCall) -> dict[str, Any]:
        name = call.params.get("name")
        if not isinstance(name, str) or not SERVER_NAME_RE.match(name):
            raise UsageError("mcp.logs needs params.name: a server name ([A-Za-z0-9_-]{1,64})")
        state = next((s.state.value for s in hub.status() if s.name == name), "not started")
        if state == "not started" and name not in config.servers:
            raise UsageError(f"no MCP server named {name!r} (see `lemon mcp list`)")
        return {"name": name, "state": state, "stderr": hub.stderr_tail(name)}

    methods.register("mcp.status", status, scope="admin", owner=_OWNER,
                     description="MCP servers and their states")  # fmt: skip
    try:
        methods.register("mcp.logs", logs, scope="admin", owner=_OWNER,
                         description="an MCP server's stderr ring")  # fmt: skip
        try:
            yield
        finally:
            methods.unregister("mcp.logs")
    finally:
        methods.unregister("mcp.status")
