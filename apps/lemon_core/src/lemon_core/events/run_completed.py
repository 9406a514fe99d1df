"""``run_completed`` on ``run:<run_id>`` (and ``session:<key>``): a run's terminal outcome."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from lemon_core.events._payload import Payload
from lemon_core.events.completion import Completion

__all__ = ["RunCompleted"]


class RunCompleted(Payload, frozen=True, kw_only=True):
    """A run completed. A synthetic completion has ``completed.synthetic`` set."""

    event_type: ClassVar[str] = "run_completed"

    completed: Completion
    duration_ms: int | None = None

    @classmethod
    def _lenient_input(cls, value: Mapping[str, Any]) -> Mapping[str, Any]:
        # Legacy flattened shape: the completion's own fields at top level.
        if "completed" in value:
            return value
        return {"completed": dict(value), "duration_ms": value.get("duration_ms")}
