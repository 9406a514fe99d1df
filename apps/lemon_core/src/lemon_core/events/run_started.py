"""``run_started`` on ``run:<run_id>``: a top-level run began."""

from __future__ import annotations

from typing import ClassVar

from lemon_core.events._payload import Payload

__all__ = ["RunStarted"]


class RunStarted(Payload, frozen=True, kw_only=True):
    """A run started. ``engine`` is provenance with the fixed value ``"lemon"``."""

    event_type: ClassVar[str] = "run_started"

    run_id: str
    session_key: str | None = None
    engine: str | None = "lemon"
    model: str | None = None
    provider: str | None = None
    thinking_level: str | None = None
