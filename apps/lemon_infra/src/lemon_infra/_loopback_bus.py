"""The loopback bus backend: in process, but every publication crosses the wire format.

Each publication is encoded to JSON with the explicit codec (private payload fields are left
out), decoded, and rebuilt as a networked backend's reader would rebuild it: an :class:`Event`
envelope whose registered payload is coerced back into its record with ``from_map``. The result
is handed to the bus's fan-out, which measures and offers what arrived.

It exists so that backend parity is tested against a backend that really serialises (the
contract kit runs every backend of :data:`lemon_infra.BACKENDS`), before a networked backend
exists; it is also a cheap way to check that a publisher's payloads survive the wire.

What differs from the local backend, on purpose: subscribers receive copies, never the
publisher's object; private fields are gone; an unregistered type's payload arrives as plain
JSON values (mappings, lists, scalars); and items that are not Events arrive as plain JSON
values too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from lemon_core.errors import LifecycleError
from lemon_core.events.codec import to_builtins
from lemon_core.events.envelope import Event
from lemon_core.events.registry import payload_class

__all__ = ["LoopbackBackend", "decode_frame", "encode_frame"]


class _Frame(msgspec.Struct, frozen=True, kw_only=True):
    """One publication on the wire: an envelope's fields, or a plain item."""

    event: bool
    type: str = ""
    ts_ms: int = 0
    meta: dict[str, Any] = msgspec.field(default_factory=dict)
    payload: Any = None


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(_Frame)


def encode_frame(item: Any) -> bytes:
    """The wire bytes of a publication (private payload fields left out)."""
    if type(item) is Event:
        frame = _Frame(
            event=True,
            type=item.type,
            ts_ms=item.ts_ms,
            meta=to_builtins(item.meta),
            payload=to_builtins(item.payload),
        )
    else:
        frame = _Frame(event=False, payload=to_builtins(item))
    return _ENCODER.encode(frame)


def decode_frame(data: bytes) -> Any:
    """The publication rebuilt from its wire bytes (registered payloads as their records)."""
    frame = _DECODER.decode(data)
    if not frame.event:
        return frame.payload
    payload = frame.payload
    cls = payload_class(frame.type)
    if cls is not None and isinstance(payload, dict):
        payload = cls.from_map(payload)
    return Event(type=frame.type, ts_ms=frame.ts_ms, meta=frame.meta, payload=payload)


class LoopbackBackend:
    """Carries every publication through :func:`encode_frame` / :func:`decode_frame` to the
    bus's own fan-out, in the caller's thread; only topics the bus subscribed to are carried
    (as a networked backend only receives those)."""

    def __init__(self) -> None:
        self._fanout: Callable[[str, Any], int] | None = None
        self._topics: frozenset[str] = frozenset()
        self._closed = False
        self.carried = 0

    @property
    def name(self) -> str:
        return "loopback"

    def open(self, fanout: Callable[[str, Any], int]) -> None:
        if self._fanout is not None:
            raise LifecycleError("a LoopbackBackend serves one bus; create one per Bus")
        self._fanout = fanout

    def publish(self, topic: str, item: Any) -> None:
        fanout = self._fanout
        if fanout is None or self._closed or topic not in self._topics:
            return
        arrived = decode_frame(encode_frame(item))
        self.carried += 1
        fanout(topic, arrived)

    def topic_added(self, topic: str) -> None:
        self._topics = self._topics | {topic}

    def topic_removed(self, topic: str) -> None:
        self._topics = self._topics - {topic}

    def running(self) -> bool:
        return self._fanout is not None and not self._closed

    def close(self) -> None:
        self._closed = True
