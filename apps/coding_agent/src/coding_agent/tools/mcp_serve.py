"""``lemon mcp serve``: the native coding tools as a :class:`lemon_mcp.ToolHost`.

Offered: ``read``, ``ls``, ``find``, ``grep``; with ``allow_write`` also ``write``, ``edit`` and
``bash``. Every call goes through the same gate as an agent run's (:func:`gate_tools` with
:data:`DEFAULT_TOOL_POLICY`): secret files are refused, a path outside the working directory
asks, ``write`` / ``edit`` / ``bash`` ask. An ask is answered by a remembered grant of the
serving home (``always`` / per-agent grants in its store) or by the person through the MCP
client (``elicitation/create``, when the client offers elicitation); a client without
elicitation cannot approve, so such a call is refused and the tool result says why. Arguments
are validated against each tool's schema first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from coding_agent._sections import FileAccessConfig
from coding_agent.access import FileAccess
from coding_agent.environment import tool_environment_for
from coding_agent.policy import DEFAULT_TOOL_POLICY, ApprovalHooks, GateContext, gate_tools
from coding_agent.tools import coding_tools
from coding_agent.workspace import Workspace
from lemon_agent import AbortSignal, ToolContext, ToolError, ToolRegistry, ToolResult
from lemon_core import ExecApprovals
from lemon_core.approvals import UnknownApprovalError
from lemon_core.config import Config
from lemon_core.events import ApprovalDecision, ApprovalPending
from lemon_mcp import ClientPeer, ServedResult, ServedTool

__all__ = ["READ_TOOLS", "WRITE_TOOLS", "CodingToolHost"]

READ_TOOLS: Final = ("read", "ls", "find", "grep")
WRITE_TOOLS: Final = ("write", "edit", "bash")
_APPROVE_SCHEMA: Final = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Allow this call", "default": False}},
    "required": ["approve"],
}


class CodingToolHost:
    """The coding tools of one working directory, gated (loop-only; :meth:`aclose` ends the
    approval questions still open)."""

    def __init__(
        self,
        *,
        cwd: Path,
        home: Path,
        config: Config,
        approvals: ExecApprovals,
        allow_write: bool = False,
        environ: Mapping[str, str] | None = None,
        approval_timeout_s: float = 300.0,
    ) -> None:
        workspace = Workspace(
            cwd=cwd,
            access=FileAccess.from_config(config.section(FileAccessConfig), home=home),
            env=tool_environment_for(config, home=home, environ=environ),
        )
        offered = READ_TOOLS + (WRITE_TOOLS if allow_write else ())
        self._registry = ToolRegistry(t for t in coding_tools(workspace) if t.name in offered)
        self._approvals = approvals
        self._timeout = approval_timeout_s
        self._gate = GateContext(
            policy=DEFAULT_TOOL_POLICY,
            workspace=workspace,
            approvals=approvals,
            session_key="mcp-serve",
            approval_timeout_s=approval_timeout_s,
            hooks=ApprovalHooks(requested=self._requested, resolved=lambda *_: None),
        )
        self._gated = gate_tools(self._registry, self._gate)
        self._peers: dict[str, ClientPeer] = {}
        self._asking: set[asyncio.Task[None]] = set()
        self._unaskable: set[str] = set()
        self._served = tuple(
            ServedTool(name=s.name, description=s.description, input_schema=s.parameters)
            for s in self._registry.specs()
        )

    def tools(self) -> Sequence[ServedTool]:
        return self._served

    async def call(
        self, name: str, arguments: Mapping[str, Any], peer: ClientPeer, call_id: str
    ) -> ServedResult:
        problem = self._registry.validate(name, arguments)
        if problem is not None:
            return ServedResult(text=f"invalid arguments for {name}: {problem}", is_error=True)
        tool = self._gated.get(name)
        assert tool is not None
        self._peers[call_id] = peer

        async def no_updates(_text: str) -> None:
            return None

        ctx = ToolContext(
            tool_call_id=call_id, name=name, arguments=dict(arguments), signal=AbortSignal(),
            update=no_updates,
        )  # fmt: skip
        try:
            result = await tool.execute(ctx)
        except ToolError as exc:
            text = str(exc)
            if call_id in self._unaskable:
                text += (
                    " This MCP client offers no elicitation, so nobody could be asked: a "
                    "remembered grant of the serving home or a client that supports "
                    "elicitation can approve it."
                )
            return ServedResult(text=text, is_error=True)
        finally:
            self._peers.pop(call_id, None)
            self._unaskable.discard(call_id)
        if isinstance(result, ToolResult):
            return ServedResult(text=result.content, is_error=result.is_error)
        return ServedResult(text=str(result))

    def _requested(self, call_id: str, pending: ApprovalPending) -> None:
        peer = self._peers.get(call_id)
        if peer is None or "elicitation" not in peer.capabilities:
            self._unaskable.add(call_id)
        task = asyncio.get_running_loop().create_task(self._ask(peer, pending))
        self._asking.add(task)
        task.add_done_callback(self._asking.discard)

    async def _ask(self, peer: ClientPeer | None, pending: ApprovalPending) -> None:
        answer = None
        if peer is not None:
            answer = await peer.elicit(
                f"Lemon asks: allow {pending.rationale or pending.tool}?",
                _APPROVE_SCHEMA,
                timeout_s=self._timeout,
            )
        decision = (
            ApprovalDecision.APPROVE_ONCE
            if answer is not None and answer.get("approve") is True
            else ApprovalDecision.DENY
        )
        with contextlib.suppress(UnknownApprovalError):
            self._approvals.resolve(pending.id, decision)

    async def aclose(self) -> None:
        for task in list(self._asking):
            task.cancel()
        for task in list(self._asking):
            with contextlib.suppress(asyncio.CancelledError):
                await task
