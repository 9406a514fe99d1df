"""The error hierarchy of lemon_core.

``LemonCoreError`` is the base of every error lemon_core raises on purpose. Misuse (a bad
argument, a payload that does not fit its record) is kept apart from runtime failures (a closed
bus or handle).
"""

from __future__ import annotations

__all__ = [
    "BusClosedError",
    "BusError",
    "DeliveryClosedError",
    "EventPayloadError",
    "LemonCoreError",
    "UnencodableItemError",
]


class LemonCoreError(Exception):
    """Base of every error lemon_core raises on purpose."""


class EventPayloadError(LemonCoreError, ValueError):
    """A payload does not fit its registered record (unknown, missing or mistyped fields)."""


class BusError(LemonCoreError):
    """Base of the Bus and delivery errors."""


class BusClosedError(BusError, RuntimeError):
    """The bus was closed: it accepts no more publications or subscriptions."""


class DeliveryClosedError(BusError, RuntimeError):
    """The delivery handle was closed (or replaced) and has nothing more to give."""


class UnencodableItemError(BusError, TypeError):
    """A published item cannot be measured because it is not JSON-encodable."""
