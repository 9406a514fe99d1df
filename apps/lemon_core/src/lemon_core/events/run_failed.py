"""``run_failed`` on ``run:<run_id>``: a run's owner terminated abnormally before completion."""

from __future__ import annotations

from typing import ClassVar

from lemon_core.events._payload import Payload

__all__ = ["RunFailed"]


class RunFailed(Payload, frozen=True, kw_only=True):
    """A run failed without a completion; ``reason`` is a short, bounded description."""

    event_type: ClassVar[str] = "run_failed"

    run_id: str
    session_key: str | None = None
    reason: str
