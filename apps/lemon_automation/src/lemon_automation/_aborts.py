"""The control plane's generic abort of a cron or heartbeat run: :class:`CronRunAborts`, the
service as :class:`lemon_core.run_aborts.RunAborts` (registered under ``RUN_ABORTS`` while the
scheduler runs). A router run id derived from a fire (``run_<cron_run_id>``) of an active fire
is aborted the way ``cron.abort`` aborts it, on whichever daemon follows the fire (this one:
cancelled through its session port; another: asked through ``automation_aborts``) and
recorded ``aborted``; any other run id is not automation's (the plane's own cancel applies)."""

from __future__ import annotations

from lemon_automation.jobs import JobError
from lemon_automation.service import AutomationService

__all__ = ["CronRunAborts"]

_PREFIX = "run_cron_"


class CronRunAborts:
    """See the module docstring."""

    def __init__(self, service: AutomationService) -> None:
        self._service = service

    async def abort(self, run_id: str) -> int | None:
        if not run_id.startswith(_PREFIX):
            return None
        try:
            record = await self._service.abort(run_id.removeprefix("run_"))
        except JobError:  # no such fire, or it ended: nothing of automation's to abort
            return None
        return 1 if record.status == "aborted" else 0
