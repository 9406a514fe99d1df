"""``Completion``: the outcome of a run, nested in :class:`RunCompleted` (never published alone)."""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from lemon_core.events._payload import Payload
from lemon_core.events.error_code import ErrorCode
from lemon_core.events.run_usage import RunUsage

__all__ = ["Completion"]


class Completion(Payload, frozen=True, kw_only=True):
    """How a run ended.

    ``error_code`` is set exactly when ``ok`` is false: consumers branch on it, never on the
    ``error`` sentence (which is for people). ``resume`` is ``{"engine": ..., "value": ...}``;
    top-level resumption accepts only ``engine == "lemon"``. ``synthetic`` marks a completion
    the router or gateway wrote because the run could not report one itself (it never bound,
    vanished, or did not confirm a cancel in time). ``retry_of`` names the run this attempt
    retried. ``warning`` tells of a problem that did not fail the run (a store write after the
    answer). ``meta`` is opaque diagnostic context for logs and people: no consumer reads keys
    from it.
    """

    event_type: ClassVar[str] = "completion"

    ok: bool
    answer: str | None = None
    error: str | None = None
    error_code: ErrorCode | None = None
    engine: str | None = "lemon"
    resume: dict[str, Any] | None = None
    usage: RunUsage | None = None
    run_id: str | None = None
    session_key: str | None = None
    synthetic: bool = False
    retry_of: str | None = None
    warning: str | None = None
    meta: dict[str, Any] = msgspec.field(default_factory=dict)

    @classmethod
    def event_version(cls) -> int:
        # 2: typed error_code / usage / synthetic / retry_of (were free meta keys and a dict).
        return 2
