"""The local (in-process) bus backend: publication is a direct call of the local fan-out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lemon_core.errors import LifecycleError

__all__ = ["LocalBackend"]


class LocalBackend:
    """Delivers every publication synchronously to the bus's own fan-out, in the caller's
    thread. Fan-out never waits on a consumer (handles admit or refuse without blocking)."""

    def __init__(self) -> None:
        self._fanout: Callable[[str, Any], int] | None = None
        self._closed = False

    @property
    def name(self) -> str:
        return "local"

    def open(self, fanout: Callable[[str, Any], int]) -> None:
        if self._fanout is not None:
            raise LifecycleError("a LocalBackend serves one bus; create one per Bus")
        self._fanout = fanout

    def publish(self, topic: str, item: Any) -> None:
        fanout = self._fanout
        if fanout is not None and not self._closed:
            fanout(topic, item)

    def topic_added(self, topic: str) -> None:
        """Nothing to do locally: the fan-out table is the bus's own."""

    def topic_removed(self, topic: str) -> None:
        """Nothing to do locally: the fan-out table is the bus's own."""

    def running(self) -> bool:
        return self._fanout is not None and not self._closed

    def close(self) -> None:
        self._closed = True
