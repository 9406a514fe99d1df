"""``delta`` on ``run:<run_id>``: a chunk of streamed answer text."""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from lemon_core.events._payload import Payload

__all__ = ["Delta"]


class Delta(Payload, frozen=True, kw_only=True):
    """One streamed text chunk; ``seq`` orders the chunks of a run."""

    event_type: ClassVar[str] = "delta"

    run_id: str
    seq: int
    text: str
    ts_ms: int | None = None
    meta: dict[str, Any] = msgspec.field(default_factory=dict)
