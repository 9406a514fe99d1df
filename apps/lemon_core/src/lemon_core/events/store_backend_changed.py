"""``store_backend_changed`` on ``system``: the shared store's server went away or came back."""

from __future__ import annotations

from typing import ClassVar

from lemon_core.events._payload import Payload

__all__ = ["StoreBackendChanged"]


class StoreBackendChanged(Payload, frozen=True, kw_only=True):
    """The store backend (``backend``: ``"postgres"``) stopped answering (``running`` false:
    a call waited the store's whole timeout; until a probe call succeeds, every store call fails
    at once with ``store_failed`` instead of waiting again) or answers again (``running`` true).
    Published once per change, by the process whose store it is, to its own subscribers.
    ``reason`` is a short text (never an address or a credential)."""

    event_type: ClassVar[str] = "store_backend_changed"

    backend: str
    running: bool
    reason: str = ""
