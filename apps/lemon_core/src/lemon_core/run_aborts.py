"""The run-abort seam: how the control plane's generic abort of a router run id reaches a run
that the app which started it can stop on any daemon, without the plane depending on that app.

The session port's ``cancel`` reaches only this daemon's router. A run another daemon executes
for an app that shares its state through the store (lemon_automation's cron and heartbeat
runs: ``cron.abort`` asks the daemon following the fire through the store) is stopped by that
app's own path. The app registers one :class:`RunAborts` under :data:`RUN_ABORTS` while it
runs; the plane asks it first for a run id and falls back to the port's ``cancel`` when the
answer is ``None`` (not a run of that app). A Protocol only: nothing here cancels anything.
"""

from __future__ import annotations

from typing import Final, Protocol, runtime_checkable

from lemon_core.execution import Capability

__all__ = ["RUN_ABORTS", "RunAborts"]


@runtime_checkable
class RunAborts(Protocol):
    """Aborts of the runs one app started (loop-only)."""

    async def abort(self, run_id: str) -> int | None:
        """Abort the router run ``run_id`` wherever it executes, the app's way: how many runs
        were aborted (0 or 1), or ``None`` when ``run_id`` is not an active run of this app
        (the caller's own cancel applies then). May wait a bounded time for the daemon that
        executes it to confirm."""
        ...


#: The runtime's run aborts beyond the local router (registered by lemon_automation).
RUN_ABORTS: Final[Capability[RunAborts]] = Capability("RunAborts", RunAborts)
