"""Capability keys the runtime knows besides the execution ones.

``ENGINE_RUNTIME`` and ``ROUTER_BRIDGE`` live in :mod:`lemon_core.execution` (the gateway and
the router register them). ``AGENT_RUNTIME``
is the native agent: the executor the gateway runs, and whether it is ready; ``APPROVALS`` is
the runtime's one :class:`~lemon_core.approvals.ExecApprovals` (clients resolve through it).
"""

from __future__ import annotations

from typing import Final, Protocol, runtime_checkable

from lemon_core.approvals import ExecApprovals
from lemon_core.execution import Capability, Executor

__all__ = ["AGENT_RUNTIME", "APPROVALS", "AgentRuntime"]


@runtime_checkable
class AgentRuntime(Protocol):
    """The native agent as the runtime sees it."""

    def executor(self) -> Executor:
        """The executor the gateway runs (raises when :meth:`not_ready_reason` is not None)."""
        ...

    def not_ready_reason(self) -> str | None:
        """``None`` when the executor is ready, else why not, in plain words."""
        ...


#: The capability the agent app (coding_agent) registers.
AGENT_RUNTIME: Final[Capability[AgentRuntime]] = Capability("AgentRuntime", AgentRuntime)

#: The runtime's approval channel (registered by the agent app).
APPROVALS: Final[Capability[ExecApprovals]] = Capability("ExecApprovals", ExecApprovals)
