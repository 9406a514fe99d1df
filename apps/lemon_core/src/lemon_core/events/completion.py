"""``Completion``: the outcome of a run, nested in :class:`RunCompleted` (never published alone)."""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from lemon_core.events._payload import Payload

__all__ = ["Completion"]


class Completion(Payload, frozen=True, kw_only=True):
    """How a run ended.

    ``resume`` is ``{"engine": ..., "value": ...}``; top-level resumption accepts only
    ``engine == "lemon"``. ``usage`` is a plain mapping owned by lemon_ai.
    """

    event_type: ClassVar[str] = "completion"

    ok: bool
    answer: str | None = None
    error: str | None = None
    engine: str | None = "lemon"
    resume: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    run_id: str | None = None
    session_key: str | None = None
    meta: dict[str, Any] = msgspec.field(default_factory=dict)
