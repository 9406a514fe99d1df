"""The MCP seam: how the agent reaches tools of MCP servers without importing their client.

lemon_mcp registers one :class:`McpHub` under :data:`MCP_HUB` when it boots; the coding agent
asks it, once per run, for the tools of the servers the run's configuration names
(:meth:`McpHub.discover`), and calls them through it (:meth:`McpHub.call`). The hub starts a
server on first use and keeps it for later runs while its definition is unchanged. A run may
also bring servers of its own session (:class:`McpServerSpec`, given by the submitting client,
e.g. an editor over ACP): the hub starts those keyed by the session, offers them to that
session's runs only, and stops them when idle. Nothing
here starts a process or opens a connection: records and a Protocol only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, Protocol, runtime_checkable

import msgspec

from lemon_core.config import Config
from lemon_core.execution import Capability, McpServerSpec

__all__ = [
    "MCP_HUB",
    "McpApproval",
    "McpDiscovery",
    "McpHub",
    "McpServerSpec",
    "McpToolOutput",
    "McpToolSpec",
]

McpApproval = Literal["ask", "allow", "deny"]
"""Per server or tool: ``ask`` (each call goes through the approval policy), ``allow``
(runs without a question), ``deny`` (never offered to the model)."""


class McpToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One MCP tool as the model sees it (``name``) and as the server knows it."""

    name: str
    """``mcp_<server>_<tool>``: sanitised, at most 64 characters, unique within a run."""
    server: str
    tool: str
    description: str = ""
    parameters: Mapping[str, Any] = msgspec.field(default_factory=dict)
    approval: McpApproval = "ask"
    session_key: str | None = None
    """Set for a tool of a session's own server (:class:`McpServerSpec`): the session it
    belongs to; ``None`` for a configured server's."""


class McpDiscovery(msgspec.Struct, frozen=True, kw_only=True):
    """What one run may use: the tools, and why a configured server offers none."""

    tools: tuple[McpToolSpec, ...] = ()
    unavailable: Mapping[str, str] = msgspec.field(default_factory=dict)
    """Server name -> the reason (not approved, failed to start, timed out, ...)."""


class McpToolOutput(msgspec.Struct, frozen=True, kw_only=True):
    """A call's result as text for the model; ``is_error`` kept from the server."""

    content: str
    is_error: bool = False


@runtime_checkable
class McpHub(Protocol):
    """The MCP servers of a runtime (loop-only)."""

    async def discover(
        self,
        config: Config,
        *,
        cwd: Path,
        session_key: str | None = None,
        servers: Sequence[McpServerSpec] = (),
    ) -> McpDiscovery:
        """The tools of the enabled, approved servers of ``config`` (a run's, loaded for
        ``cwd``): each server is started on first use, bounded by its ``startup_timeout_s``;
        one that fails is reported in ``unavailable`` and never blocks the others. ``servers``
        are the run's session's own (``session_key``'s): started for that session only."""
        ...

    async def call(self, tool: McpToolSpec, arguments: Mapping[str, Any]) -> McpToolOutput:
        """Call ``tool`` (from :meth:`discover`) bounded by its server's ``call_timeout_s``;
        a server that is down or times out answers an error output saying so."""
        ...


#: The runtime's MCP hub (registered by lemon_mcp at boot).
MCP_HUB: Final[Capability[McpHub]] = Capability("McpHub", McpHub)
