"""The event envelope: ``Event(type, ts_ms, meta, payload)``.

The envelope is stable; ``payload`` is a typed record for registered types (see
:mod:`lemon_core.events.registry`) and anything JSON-encodable otherwise. ``meta`` deliberately
stays a free mapping of routing identity (``run_id``, ``session_key``, ``origin``, ``synthetic``,
``request_id``, ``task_id``, ``parent_run_id``, ...), read with item access; different publishers
supply different subsets.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import msgspec

from lemon_core.errors import UsageTypeError

__all__ = ["Event", "now_ms"]


def now_ms() -> int:
    """Wall-clock time in milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


class Event(msgspec.Struct, frozen=True, kw_only=True):
    """An immutable event envelope. Build it with :meth:`new` to stamp the current time."""

    type: str
    ts_ms: int
    meta: dict[str, Any] = msgspec.field(default_factory=dict)
    payload: Any = None

    @classmethod
    def new(
        cls,
        type: str,
        payload: Any = None,
        meta: Mapping[str, Any] | None = None,
        *,
        ts_ms: int | None = None,
    ) -> Event:
        """An event of ``type`` stamped with ``ts_ms`` (default: now, wall clock)."""
        if not _is_event_type(type):
            raise UsageTypeError(f"event type must be a non-empty string, got {type!r}")
        return cls(
            type=type,
            ts_ms=now_ms() if ts_ms is None else ts_ms,
            meta={} if meta is None else dict(meta),
            payload=payload,
        )


def _is_event_type(value: object) -> bool:
    return isinstance(value, str) and bool(value)
