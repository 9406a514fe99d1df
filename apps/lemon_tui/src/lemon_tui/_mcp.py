"""The daemon's MCP servers, as it tells them: ``mcp.status`` (read by ``/mcp``) and the
``mcp.server`` wire events of the ``mcp`` topic, which ``/mcp`` subscribes to first (so no
change falls between the two: an event heard during the read is newer than its answer). The
web page's sidebar does the same. Both take the admin scope; the payloads are lemon_mcp's
versioned mappings (``mcp.status`` says ``ready`` where the events say ``connected``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["ALARMING", "McpServerState", "from_event", "from_status"]

_STATUS_STATES: Final = {"ready": "connected", "stopped": "not started"}
_LABELS: Final = {"needs_login": "needs login", "stopped": "not started"}
ALARMING: Final = frozenset({"failed", "needs_login"})
"""The states a change to which is said in the transcript (the others are shown by /mcp)."""


@dataclass(kw_only=True, slots=True)
class McpServerState:
    """One server: ``state`` is ``connected``, ``starting``, ``disconnected``, ``failed``,
    ``needs_login`` or ``not started`` (configured, no run needed it yet)."""

    name: str
    state: str
    tools: int = 0
    detail: str = ""
    error: str | None = None

    def line(self) -> str:
        facts = [_LABELS.get(self.state, self.state)]
        if self.state == "connected":
            facts.append(f"{self.tools} tool{'' if self.tools == 1 else 's'}")
        if self.detail:
            facts.append(self.detail)
        if self.error and self.state != "connected":
            facts.append(self.error)
        return f"{self.name}: " + " · ".join(facts)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def from_event(payload: Mapping[str, Any]) -> McpServerState | None:
    """An ``mcp.server`` event's server (``None``: it names none)."""
    name = _str(payload.get("name"))
    if not name:
        return None
    tools = payload.get("tools")
    return McpServerState(
        name=name,
        state=_str(payload.get("state")) or "unknown",
        tools=tools if isinstance(tools, int) else 0,
        detail=_str(payload.get("detail")),
        error=_str(payload.get("error")) or None,
    )


def from_status(payload: object) -> list[McpServerState]:
    """The servers of an ``mcp.status`` answer (rows without a name are skipped)."""
    rows = payload.get("servers") if isinstance(payload, Mapping) else None
    found: list[McpServerState] = []
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, Mapping) or not _str(row.get("name")):
            continue
        state = _str(row.get("state")) or "unknown"
        needs_login = row.get("needs_login") is True
        tools = row.get("tools")
        found.append(
            McpServerState(
                name=row["name"],
                state="needs_login" if needs_login else _STATUS_STATES.get(state, state),
                tools=tools if isinstance(tools, int) else 0,
                detail=_str(row.get("detail")),
                error=_str(row.get("last_error")) or None,
            )
        )
    return found
