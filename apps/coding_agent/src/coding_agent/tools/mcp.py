"""The tools of MCP servers, as lemon_agent tools of one run.

:func:`mcp_tools` asks the runtime's :class:`~lemon_core.mcp.McpHub` for the tools the run's
configuration allows (``mcp_<server>_<tool>``) and wraps each as a :class:`~lemon_agent.Tool`
whose body calls the hub. :func:`mcp_policy` puts them under the run's approval policy: a tool
whose ``approval`` is ``ask`` needs an approval like ``bash`` (unless the run preapproved it by
name or with ``"*"``), ``allow`` runs without one, and a tool the run's policy denies or does
not allow stays refused (the policy is never widened). The gate then handles them as any other
tool (once / session / always / deny; refused without an approval channel).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from lemon_agent import Tool, ToolContext, ToolResult
from lemon_core.config import Config
from lemon_core.execution import ALL_TOOLS, ToolPolicy
from lemon_core.mcp import McpDiscovery, McpHub, McpServerSpec, McpToolSpec

__all__ = ["mcp_policy", "mcp_tools"]

_MAX_NOTE: Final = 400


async def mcp_tools(
    hub: McpHub | None,
    config: Config,
    cwd: Path,
    *,
    session_key: str | None = None,
    servers: Sequence[McpServerSpec] = (),
) -> tuple[list[Tool], dict[str, str], str, dict[str, dict[str, str]]]:
    """The run's MCP tools, each one's configured approval by name, a note for the run's
    log naming the servers that offer none (empty when every configured server is up, or when
    MCP is not configured), and each tool's origin by name (``{"server": S, "tool": T}``: the
    tool card names the server). ``servers`` are the run's session's own (``session_key``'s, from
    the request): the hub starts them for that session only."""
    if hub is None:
        if servers:
            return [], {}, "the runtime has no MCP hub (lemon_mcp did not boot)", {}
        return [], {}, "", {}
    if servers:
        found: McpDiscovery = await hub.discover(
            config, cwd=cwd, session_key=session_key, servers=servers
        )
    else:
        found = await hub.discover(config, cwd=cwd)
    note = "; ".join(f"{name}: {why}" for name, why in sorted(found.unavailable.items()))
    approvals: dict[str, str] = {spec.name: spec.approval for spec in found.tools}
    origins = {spec.name: {"server": spec.server, "tool": spec.tool} for spec in found.tools}
    return [_tool(hub, spec) for spec in found.tools], approvals, note[:_MAX_NOTE], origins


def _tool(hub: McpHub, spec: McpToolSpec) -> Tool:
    async def execute(ctx: ToolContext) -> ToolResult:
        out = await hub.call(spec, ctx.arguments)
        return ToolResult(
            content=out.content,
            is_error=out.is_error,
            details={"mcp_server": spec.server, "mcp_tool": spec.tool},
        )

    return Tool(
        name=spec.name, description=spec.description, parameters=spec.parameters, execute=execute
    )


def mcp_policy(
    policy: ToolPolicy, specs: Mapping[str, str], preapproved: frozenset[str]
) -> ToolPolicy:
    """``policy`` with the MCP tools' questions added: ``specs`` maps each tool to its
    configured approval (``ask`` or ``allow``). ``preapproved`` names tools or globs over
    them (``mcp_fs_*``) whose question is skipped."""
    if ALL_TOOLS in preapproved:
        return policy
    asked = {
        name
        for name, approval in specs.items()
        if approval == "ask" and not any(fnmatch.fnmatchcase(name, p) for p in preapproved)
    }
    if not asked:
        return policy
    return ToolPolicy(
        allow=policy.allow,
        deny=policy.deny,
        require_approval=policy.require_approval | asked,
    )
