"""Runs that vanished with their process, and the seam that hears about them.

A process that dies (``kill -9``, a crash) with a run in flight cannot complete it. The next
engine to start or sweep on the store completes it once, as ``vanished``, and never executes
it again (lemon_gateway's run-owner recovery). An app that promised something about such a
run (the webhook ingress stored an ``accepted`` receipt for it) registers a
:class:`VanishedRunListener` as :data:`VANISHED_RUN_LISTENER`; the engine awaits it for each
vanished run, before the run's record is forgotten. It registers *before* the engine starts
(its ``AppSpec`` names the engine in ``before``), so the engine's start-up sweep reaches it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from lemon_core.execution._runtime import Capability

__all__ = ["VANISHED_RUN_LISTENER", "VanishedRun", "VanishedRunListener"]


@dataclass(frozen=True, kw_only=True, slots=True)
class VanishedRun:
    """A run whose process died with it in flight: it was completed as ``vanished`` and never
    executed again. ``retry_of`` is the run as submitted when this was a retry attempt."""

    run_id: str
    session_key: str
    origin: str | None = None
    retry_of: str | None = None


@runtime_checkable
class VanishedRunListener(Protocol):
    """Told about each run the engine completes as ``vanished``. Must be idempotent: a
    listener that raises leaves the run to the next sweep, which tells it again."""

    async def run_vanished(self, run: VanishedRun) -> None: ...


#: The one listener of a runtime (the webhook ingress, when it is enabled).
VANISHED_RUN_LISTENER: Final[Capability[VanishedRunListener]] = Capability(
    "VanishedRunListener", VanishedRunListener
)
