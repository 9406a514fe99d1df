"""``run_phase_changed`` on ``run:<run_id>``, and the :class:`RunPhase` enum."""

from __future__ import annotations

import datetime as dt
import enum
from typing import Any, ClassVar, Self

from lemon_core.events._payload import Payload

__all__ = ["RunPhase", "RunPhaseChanged"]


class RunPhase(enum.StrEnum):
    """The lifecycle phases of a run; ``COMPLETED``, ``FAILED`` and ``ABORTED`` are terminal."""

    ACCEPTED = "accepted"
    QUEUED_IN_SESSION = "queued_in_session"
    WAITING_FOR_SLOT = "waiting_for_slot"
    DISPATCHED_TO_GATEWAY = "dispatched_to_gateway"
    STARTING_ENGINE = "starting_engine"
    STREAMING = "streaming"
    FINALIZING = "finalizing"
    COMPLETED = "completed"
    FAILED = "failed"
    ABORTED = "aborted"

    @property
    def terminal(self) -> bool:
        """Whether the phase ends the run."""
        return self in _TERMINAL


_TERMINAL = frozenset({RunPhase.COMPLETED, RunPhase.FAILED, RunPhase.ABORTED})


class RunPhaseChanged(Payload, frozen=True, kw_only=True):
    """A run moved to ``phase`` (from ``previous_phase``), reported by ``source``."""

    event_type: ClassVar[str] = "run_phase_changed"

    run_id: str
    session_key: str | None = None
    conversation_key: str | None = None
    phase: RunPhase
    previous_phase: RunPhase | None = None
    source: str
    at: dt.datetime | None = None

    @classmethod
    def build(cls, **fields: Any) -> Self:
        """Strict constructor that stamps ``at`` with the current UTC time when it is absent."""
        fields.setdefault("at", dt.datetime.now(dt.UTC))
        return cls.new(**fields)
