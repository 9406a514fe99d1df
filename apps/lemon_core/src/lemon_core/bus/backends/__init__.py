"""Bus backends: how a published item travels to the bus's local fan-out.

A backend moves ``(topic, item)`` from :meth:`~lemon_core.bus.Bus.broadcast` to the local
fan-out callback it was opened with (the bus has already measured the item, so an unencodable
one never reaches a backend). The local backend's fan-out is the bus's own, in the publisher's
thread. The loopback backend carries each item through the wire format first (encode, decode,
rebuild typed payloads), in process. A networked backend (Redis, later) would publish to its
server and call the fan-out from its reader for the topics the bus told it about through
``topic_added``/``topic_removed``; the fan-out measures what arrived.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from lemon_core.bus.backends.local import LocalBackend
from lemon_core.bus.backends.loopback import LoopbackBackend
from lemon_core.errors import UsageError

__all__ = ["BACKENDS", "BusBackend", "Fanout", "LocalBackend", "LoopbackBackend", "create_backend"]

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


#: Backend factories by name; the contract kit runs against each of them.
BACKENDS: Mapping[str, Callable[[], BusBackend]] = {
    "local": LocalBackend,
    "loopback": LoopbackBackend,
}


def create_backend(name: str) -> BusBackend:
    """A new backend of the named kind."""
    try:
        factory = BACKENDS[name]
    except KeyError:
        raise UsageError(
            f"unknown bus backend {name!r}; available: {', '.join(sorted(BACKENDS))}"
        ) from None
    return factory()
