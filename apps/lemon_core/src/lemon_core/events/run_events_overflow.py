"""``run_events_overflow`` on ``session:<session_key>``: the router's subscription to
``run:<run_id>`` overflowed, so the session missed some of that run's events."""

from __future__ import annotations

from typing import ClassVar

from lemon_core.events._payload import Payload

__all__ = ["RunEventsOverflow"]


class RunEventsOverflow(Payload, frozen=True, kw_only=True):
    """Events of ``run_id`` were dropped on the way to the session; its completion still comes
    (the bus reserves room for it). Re-read the run's state from its authority to recover."""

    event_type: ClassVar[str] = "run_events_overflow"

    run_id: str
    session_key: str | None = None
