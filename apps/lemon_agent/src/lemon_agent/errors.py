"""The error hierarchy of lemon_agent.

:class:`AgentUsageError` (and its subclasses) is misuse to fix in code: an invalid tool schema, a
duplicate tool name, starting a second run on a busy agent, a full steering queue.
:class:`ToolError` is what a tool raises to hand an error message back to the model; it never
escapes the loop. :class:`AbortedError` is raised inside tools (via ``AbortSignal``) when the run
was aborted::

    LemonAgentError
    ├── AgentUsageError                 misuse to fix in code (schema, duplicate tool name...)
    │   ├── AgentBusyError              a second run on a busy agent
    │   └── QueueFullError              a full steering or follow-up queue; nothing queued
    ├── ToolError                       raised by a tool: its message goes back to the model
    ├── AbortedError                    raised inside tools when the run was aborted
    └── TruncatedToolCallError          the model kept cutting its tool call at the output limit

A test (``test_agent_error_tree.py``) keeps this drawing equal to the classes.
"""

from __future__ import annotations

__all__ = [
    "AbortedError",
    "AgentBusyError",
    "AgentUsageError",
    "LemonAgentError",
    "QueueFullError",
    "ToolError",
    "TruncatedToolCallError",
]


class LemonAgentError(Exception):
    """Base class of every error raised by lemon_agent."""


class AgentUsageError(LemonAgentError):
    """lemon_agent was used wrongly; the message says how to fix it."""


class AgentBusyError(AgentUsageError):
    """A run was started while another run of the same agent is active."""


class QueueFullError(AgentUsageError):
    """The steering or follow-up queue is at its bound; the message was not queued."""


class ToolError(LemonAgentError):
    """Raised by a tool: the message goes back to the model as an error result."""


class AbortedError(LemonAgentError):
    """The run was aborted (``reason`` says why)."""

    def __init__(self, reason: str = "aborted") -> None:
        super().__init__(reason)
        self.reason = reason


class TruncatedToolCallError(LemonAgentError):
    """The model's responses were cut by the output-token limit inside a tool call, again and
    again (``attempts`` in a row, the last with ``max_tokens``); the run stopped instead of
    asking once more.
    """

    kind = "truncated_tool_call"

    def __init__(self, *, tool_name: str, max_tokens: int, attempts: int) -> None:
        super().__init__(
            f"the model's call to tool {tool_name!r} was cut off by the output limit "
            f"({max_tokens} tokens) {attempts} times in a row, even after a larger budget and a "
            "request to work in smaller pieces; the run was stopped. Raise the model's max_tokens "
            "or ask for smaller steps"
        )
        self.tool_name = tool_name
        self.max_tokens = max_tokens
        self.attempts = attempts
