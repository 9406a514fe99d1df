"""The model-facing ``cron`` tool: the run's agent manages its own cron jobs.

Built over the runtime's :class:`~lemon_core.cron.CronJobs` (lemon_automation's, registered
while its scheduler runs; without it the run has no ``cron`` tool). Every call is scoped to the
run's agent. The gate asks an approval for ``add``, ``update`` and ``remove`` (the default
policy's ``cron`` question, limited to those actions by
:data:`~coding_agent.policy.ACTION_APPROVALS`); cron and heartbeat runs are denied the tool
by their tool policy. Bad input is an error result naming the field (nothing is stored).
"""

from __future__ import annotations

import json

from lemon_agent import Tool, ToolContext, ToolError, ToolResult
from lemon_core.cron import CRON_TOOL, CRON_TOOL_DESCRIPTION, CRON_TOOL_PARAMETERS, CronJobs
from lemon_core.errors import UsageError

__all__ = ["cron_tool"]


def cron_tool(jobs: CronJobs, agent_id: str) -> Tool:
    """The ``cron`` tool of one run of ``agent_id``."""

    async def execute(ctx: ToolContext) -> ToolResult:
        action = ctx.arguments.get("action")
        if not isinstance(action, str):
            raise ToolError("cron: action is required (list, add, update, pause, resume, ...)")
        try:
            out = await jobs.act(agent_id, action, ctx.arguments)
        except UsageError as exc:
            raise ToolError(f"cron {action}: {exc}; nothing was changed") from None
        return ToolResult(
            content=json.dumps(out, ensure_ascii=False, sort_keys=True),
            details={"cron_action": action},
        )

    return Tool(
        name=CRON_TOOL,
        description=CRON_TOOL_DESCRIPTION,
        parameters=CRON_TOOL_PARAMETERS,
        execute=execute,
    )
