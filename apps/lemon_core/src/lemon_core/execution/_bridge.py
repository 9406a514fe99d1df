"""The RouterBridge capability: how other apps submit a RunRequest to the router.

Channels, gateway ingress, cron and the terminal submit a :class:`RunRequest` through the
:class:`RouterBridge` registered under :data:`ROUTER_BRIDGE` (lemon_router implements and
registers it), never through the router's internals. :func:`submit_via_bridge` answers
:class:`Unavailable` instead of raising when no router runs. A bridge is a submission facade:
it holds no Bus.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, Protocol, runtime_checkable

from lemon_core.execution._command import QueueMode, RunRequest
from lemon_core.execution._runtime import Capability, CapabilityRegistry
from lemon_core.execution.errors import RouterUnavailableError

__all__ = [
    "ROUTER_BRIDGE",
    "Receipt",
    "ReceiptStatus",
    "RouterBridge",
    "Unavailable",
    "submit_via_bridge",
]

ReceiptStatus = Literal["started", "queued", "dispatched_to_active", "fallback_queued", "rejected"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Receipt:
    """The router's immediate answer to a submission: what was asked, what was done, and why."""

    run_id: str
    session_key: str
    requested_mode: QueueMode
    actual_mode: QueueMode
    status: ReceiptStatus
    at_ms: int
    position: int | None = None
    """0-based place in the queue when ``queued``/``fallback_queued`` (``None`` otherwise)."""
    merged_into: str | None = None
    """For ``merged``: the run id that now carries this prompt."""
    active_run_id: str | None = None
    """For ``dispatched_to_active``: the run the steer was sent to."""
    conversation_key: str | None = None
    """The conversation that serialises this submission (filled in by the router)."""
    reason: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Unavailable:
    """No router accepted the request; nothing was queued. ``reason`` says why."""

    reason: str
    status: Literal["unavailable"] = "unavailable"


@runtime_checkable
class RouterBridge(Protocol):
    """What a router offers other apps: submission of a RunRequest."""

    async def submit(self, request: RunRequest) -> Receipt:
        """Admit ``request``; the receipt says what happened to it.

        Raises :class:`~lemon_core.execution.errors.RouterUnavailableError` (or a subclass)
        when the router stopped, and a ``ValueError`` for a request it can never take.
        """
        ...

    def running(self) -> bool:
        """True while submissions are accepted."""
        ...


#: The capability key a running router registers itself under.
ROUTER_BRIDGE: Final[Capability[RouterBridge]] = Capability("RouterBridge", RouterBridge)


async def submit_via_bridge(
    capabilities: CapabilityRegistry, request: RunRequest
) -> Receipt | Unavailable:
    """Submit through the registered RouterBridge; :class:`Unavailable` when none runs.

    Bad requests still raise (the router's usage errors): the caller must hear that its
    input is wrong, not that the router is away.
    """
    bridge = capabilities.get(ROUTER_BRIDGE)
    if bridge is None:
        return Unavailable(reason="no router is registered on this runtime")
    if not bridge.running():
        return Unavailable(reason="the router is not running")
    try:
        return await bridge.submit(request)
    except RouterUnavailableError as exc:
        return Unavailable(reason=str(exc))
