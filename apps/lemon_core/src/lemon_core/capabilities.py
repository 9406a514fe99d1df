"""Capability keys the runtime knows besides the execution ones.

``ENGINE_RUNTIME`` and ``ROUTER_BRIDGE`` live in :mod:`lemon_core.execution` (the gateway and
the router register them). ``AGENT_RUNTIME``
is the native agent: the executor the gateway runs, and whether it is ready; ``APPROVALS`` is
the runtime's one :class:`~lemon_core.approvals.ExecApprovals` (clients resolve through it).
"""

from __future__ import annotations

from typing import Final, Protocol, runtime_checkable

import msgspec

from lemon_core.approvals import ExecApprovals
from lemon_core.execution import Capability, Executor

__all__ = [
    "AGENT_RUNTIME",
    "APPROVALS",
    "MODEL_CATALOG",
    "AgentRuntime",
    "ModelCatalog",
    "ModelInfo",
]


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


class ModelInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One model a run can use, as a client's model picker shows it."""

    ref: str
    """``provider:model``: what ``RunRequest.model`` takes."""
    provider: str
    id: str
    name: str = ""
    context_window: int = 0
    max_output: int = 0
    reasoning: bool = False
    default: bool = False
    """The configured default model."""
    unavailable: str = ""
    """Why a run on it cannot start as configured (e.g. ``OPENAI_API_KEY is not set``);
    empty when it can."""


@runtime_checkable
class ModelCatalog(Protocol):
    """The models this runtime's agent can run (registered by the agent app)."""

    def models(self) -> list[ModelInfo]:
        """Every known model: the configured providers' and the built-in catalogue's."""
        ...


#: The capability the agent app (coding_agent) registers its model catalogue under.
MODEL_CATALOG: Final[Capability[ModelCatalog]] = Capability("ModelCatalog", ModelCatalog)
