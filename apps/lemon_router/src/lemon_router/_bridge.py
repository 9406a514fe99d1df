"""The RouterBridge capability: submit a RunRequest to whichever router runs, or hear "unavailable".

lemon_core does not define a RouterBridge protocol yet, so it lives here for now; callers that
must not depend on lemon_router (channels, gateway ingress) should move to the lemon_core one
when it exists. :func:`submit_via_bridge` never raises because no router runs: it answers with
:class:`Unavailable`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from lemon_core.execution import Capability, CapabilityRegistry, RunRequest
from lemon_router._queue import Receipt
from lemon_router.errors import RouterNotRunningError


@dataclass(frozen=True, kw_only=True, slots=True)
class Unavailable:
    """No router accepted the request; nothing was queued. ``reason`` says why."""

    reason: str
    status: str = "unavailable"


@runtime_checkable
class RouterBridge(Protocol):
    """What a router offers other apps: submission of a RunRequest."""

    async def submit(self, request: RunRequest) -> Receipt:
        """Admit ``request``; the receipt says what happened to it."""
        ...

    def running(self) -> bool:
        """True while submissions are accepted."""
        ...


#: The capability key a running Router registers itself under.
ROUTER_BRIDGE: Final[Capability[RouterBridge]] = Capability("RouterBridge", RouterBridge)


async def submit_via_bridge(
    capabilities: CapabilityRegistry, request: RunRequest
) -> Receipt | Unavailable:
    """Submit through the registered RouterBridge; ``Unavailable`` when none runs.

    Bad requests still raise (a :class:`~lemon_router.errors.RouterUsageError`): the caller
    must hear that its input is wrong, not that the router is away.
    """
    bridge = capabilities.get(ROUTER_BRIDGE)
    if bridge is None:
        return Unavailable(reason="no router is registered on this runtime")
    if not bridge.running():
        return Unavailable(reason="the router is not running")
    try:
        return await bridge.submit(request)
    except RouterNotRunningError as exc:
        return Unavailable(reason=str(exc))
