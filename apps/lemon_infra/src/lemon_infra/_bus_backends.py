"""BACKENDS, create_backend: the implementations cut from ``lemon_core.bus.backends``.

lemon_core.bus.backends: Bus backends: how a published item travels to the bus's local fan-out.
See that module for the contract.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from lemon_core.bus.backends import BusBackend
from lemon_core.bus.backends.local import LocalBackend
from lemon_core.errors import UsageError
from lemon_infra._loopback_bus import LoopbackBackend

__all__ = ["BACKENDS", "create_backend"]


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
