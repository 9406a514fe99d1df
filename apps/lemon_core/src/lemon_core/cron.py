"""The cron seam: how the agent manages its own agent's cron jobs without importing automation.

lemon_automation registers one :class:`CronJobs` under :data:`CRON_JOBS` while its scheduler
runs; the coding agent offers each run the model-facing ``cron`` tool (:data:`CRON_TOOL`) over
it, scoped to the run's agent: ``list``, ``add``, ``update``, ``pause``, ``resume``, ``remove``
and ``run`` (:data:`CRON_ACTIONS`). The actions in :data:`CRON_CHANGING_ACTIONS` create,
change or delete a job and need an approval like any other effectful tool; the others run as
the policy says. Cron and heartbeat runs are denied the tool by their tool policy (a reminder
never schedules more reminders). Records and a Protocol only: nothing here schedules anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol, runtime_checkable

from lemon_core.execution import Capability

__all__ = [
    "CRON_ACTIONS",
    "CRON_CHANGING_ACTIONS",
    "CRON_JOBS",
    "CRON_TOOL",
    "CRON_TOOL_DESCRIPTION",
    "CRON_TOOL_PARAMETERS",
    "CronJobs",
]

CRON_TOOL: Final = "cron"
"""The model-facing tool's name (also what cron runs' tool policy denies)."""

CRON_ACTIONS: Final = ("list", "add", "update", "pause", "resume", "remove", "run")
CRON_CHANGING_ACTIONS: Final = frozenset({"add", "update", "remove"})
"""The actions that need an approval (they create, change or delete a job)."""

CRON_TOOL_DESCRIPTION: Final = (
    "Manage this agent's scheduled jobs (cron). action=list shows them; add creates one "
    "(name, schedule, prompt; schedule is 'every 30m', 'daily at 9am', 'weekdays at 09:30', "
    "five cron fields, "
    "'@daily' or 'at <ISO 8601 instant with offset>'); update changes name, prompt, "
    "enabled, jitter_sec, catch_up, timeout_sec, max_retries, model or skills of job id; "
    "pause, resume, "
    "remove and run (fire now) take the job id. add, update and remove ask the user first. "
    "Each fire runs the prompt in its own sub-session and its summary comes back to the "
    "main session."
)

CRON_TOOL_PARAMETERS: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": list(CRON_ACTIONS)},
        "id": {"type": "string", "description": "the job's id (see action=list)"},
        "name": {"type": "string", "description": "add/update: unique per agent"},
        "schedule": {"type": "string", "description": "add: when it fires"},
        "prompt": {"type": "string", "description": "add/update: what the run is asked"},
        "timezone": {"type": "string", "description": "add: an IANA zone for cron schedules"},
        "enabled": {"type": "boolean"},
        "jitter_sec": {"type": "number", "minimum": 0},
        "catch_up": {"type": "string", "enum": ["latest", "all", "skip"]},
        "timeout_sec": {"type": "number", "minimum": 1},
        "max_retries": {"type": "integer", "minimum": 0, "maximum": 10},
        "channel": {
            "type": "string",
            "description": "add: also deliver each summary to CHANNEL:PEER_ID (telegram:123)",
        },
        "model": {
            "type": "string",
            "description": "add/update: pin the model (provider:model); update: '' unpins",
        },
        "skills": {
            "type": "array",
            "items": {"type": "string"},
            "description": "add/update: the skills the prompt needs (update: [] for none)",
        },
    },
    "required": ["action"],
    "additionalProperties": False,
}
"""The tool's JSON Schema (the agent's registry validates arguments against it)."""


@runtime_checkable
class CronJobs(Protocol):
    """One agent's view of the runtime's cron jobs (loop-only)."""

    async def act(
        self, agent_id: str, action: str, arguments: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """Do ``action`` (one of :data:`CRON_ACTIONS`) on ``agent_id``'s jobs with the tool's
        ``arguments`` (``action`` itself may be among them) and return a JSON-able result.
        Bad input (an unknown action or field, a bad schedule, a job of another agent) raises
        :class:`~lemon_core.errors.UsageError` with a one-line message naming the field;
        nothing is stored then."""
        ...


#: The runtime's cron jobs (registered by lemon_automation while its scheduler runs).
CRON_JOBS: Final[Capability[CronJobs]] = Capability("CronJobs", CronJobs)
