"""``bus_backend_changed`` on ``system``: the bus's networked backend went down or came back."""

from __future__ import annotations

from typing import ClassVar

from lemon_core.events._payload import Payload

__all__ = ["BusBackendChanged"]


class BusBackendChanged(Payload, frozen=True, kw_only=True):
    """The bus backend (``backend``: ``"redis"``) stopped or resumed carrying publications
    between processes. Published by each process to its own subscribers only (it never
    travels over the backend it reports on). ``resync`` is true when publications may have been
    lost (a reconnection, a gap in another process's sequence): every subscription of the bus
    was then fenced with an ``Overflow`` marker (reason ``resync``) and recovers from authority.
    ``reason`` is a short text (never an address or a credential)."""

    event_type: ClassVar[str] = "bus_backend_changed"

    backend: str
    running: bool
    resync: bool = False
    reason: str = ""
