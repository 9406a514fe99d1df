"""Bus backends: how a published item travels to the bus's local fan-out.

A backend moves ``(topic, item)`` from :meth:`~lemon_core.bus.Bus.broadcast` to the local
fan-out callback it was opened with (the bus has already measured the item, so an
unencodable one never reaches a backend). This package holds the :class:`BusBackend`
Protocol and the in-process :class:`LocalBackend` (the bus's default: the fan-out runs in
the publisher's thread). The loopback backend (the wire format, in process), the Redis
backend and the ``BACKENDS`` table the contract kits run live in lemon_infra; a networked
backend calls the fan-out from its reader for the topics the bus told it about through
``topic_added``/``topic_removed``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from lemon_core.bus.backends.local import LocalBackend

__all__ = [
    "BusBackend",
    "Fanout",
    "LocalBackend",
]

#: The local fan-out of a bus: ``fanout(topic, item) -> number of handles offered the item``.
#: It measures the item and may raise ``UnencodableItemError``.
Fanout = Callable[[str, Any], int]


class BusBackend(Protocol):
    """The interface every bus backend implements."""

    @property
    def name(self) -> str:
        """A short name (``"local"``, ``"redis"``) shown in statistics."""
        ...

    def open(self, fanout: Fanout) -> None:
        """Start delivering published items to ``fanout``; called once by the Bus."""
        ...

    def publish(self, topic: str, item: Any) -> None:
        """Carry ``item`` to every bus subscribed to ``topic``.

        Must not wait on any consumer; may be called from any thread.
        """
        ...

    def topic_added(self, topic: str) -> None:
        """The bus gained its first local subscription to ``topic``."""
        ...

    def topic_removed(self, topic: str) -> None:
        """The bus lost its last local subscription to ``topic``."""
        ...

    def running(self) -> bool:
        """Whether the backend is up and carrying publications."""
        ...

    def close(self) -> None:
        """Stop carrying publications; idempotent."""
        ...
