"""Bus topics: exact-match strings. Contract topics and the functions that build per-id ones."""

from __future__ import annotations

from lemon_core.errors import UsageError

__all__ = [
    "CHANNELS",
    "CONTRACT_TOPICS",
    "CRON",
    "EXEC_APPROVALS",
    "GOALS",
    "ROUTING_FEEDBACK",
    "SYSTEM",
    "check_topic",
    "run_topic",
    "session_topic",
]

EXEC_APPROVALS = "exec_approvals"
CRON = "cron"
SYSTEM = "system"
GOALS = "goals"
ROUTING_FEEDBACK = "routing_feedback"
CHANNELS = "channels"

#: The static contract topics (``run:<id>`` and ``session:<key>`` are per id).
CONTRACT_TOPICS: frozenset[str] = frozenset(
    {EXEC_APPROVALS, CRON, SYSTEM, GOALS, ROUTING_FEEDBACK, CHANNELS}
)


def run_topic(run_id: str) -> str:
    """``"run:<run_id>"``."""
    if not _non_empty(run_id):
        raise UsageError(f"run_id must be a non-empty string, got {run_id!r}")
    return "run:" + run_id


def session_topic(session_key: str) -> str:
    """``"session:<session_key>"``."""
    if not _non_empty(session_key):
        raise UsageError(f"session_key must be a non-empty string, got {session_key!r}")
    return "session:" + session_key


def check_topic(topic: object) -> str:
    """``topic`` if it is a non-empty string; otherwise a ``ValueError`` saying so."""
    if not isinstance(topic, str) or not _non_empty(topic):
        raise UsageError(
            f"bus topics are non-empty strings (e.g. 'run:<id>', 'system'), got {topic!r}"
        )
    return topic


def _non_empty(value: object) -> bool:
    return isinstance(value, str) and bool(value)
