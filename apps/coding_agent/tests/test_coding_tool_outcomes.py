"""The transcript reader tells how each tool call ended (for the clients' history cards)."""

from __future__ import annotations

import pytest

from coding_agent._transcripts import tool_outcome
from lemon_ai import ToolResultMessage


@pytest.mark.parametrize(
    ("content", "is_error", "outcome"),
    [
        ("hi\n[exit code 0]", False, "ok"),
        ("[exit code 3]", True, "failed"),
        (
            "Tool 'bash' was not approved (deny: the approval was denied); it did not run.",
            True,
            "denied",
        ),
        (
            "Tool 'bash' was not approved (timeout: no decision came in time); it did not run.",
            True,
            "expired",
        ),
        (
            "Tool 'bash' was not approved (expired: the run that asked ended); it did not run.",
            True,
            "expired",
        ),
        (
            "Tool 'bash' was not approved (cancelled: the request was withdrawn); it did not run.",
            True,
            "cancelled",
        ),
        (
            "Tool 'bash' is denied by this run's tool policy; it did not run. Do the task",
            True,
            "denied",
        ),
        ("Tool 'read' did not run: .env is refused: a secret file.", True, "denied"),
        ("Tool call was not completed: the run was aborted (cancelled).", True, "cancelled"),
        ("The run ended before this tool call finished; it has no result.", True, "cancelled"),
        ("Tool 'bash' failed: OSError: boom", True, "failed"),
    ],
)
def test_each_ending_of_a_tool_call_is_named(content: str, is_error: bool, outcome: str) -> None:
    message = ToolResultMessage(
        tool_call_id="c1", tool_name="bash", content=content, is_error=is_error
    )
    assert tool_outcome(message) == outcome
