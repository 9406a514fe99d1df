"""The agent's event vocabulary.

A run emits, in order: ``agent_start``; per turn ``turn_start``, the messages of the turn
(``message_start`` / ``message_update``* / ``message_end``), the tool executions
(``tool_execution_start`` / ``_update``* / ``_end``, concurrent tools interleaved) and
``turn_end``; then, if the run failed or was aborted, ``error`` or ``canceled``; and always
``agent_end`` last. A response cut by the output-token limit inside a tool call is followed by
``tool_call_truncated`` (what the loop does about it) instead of tool executions.
``message_update`` wraps a lemon_ai stream event (text, thinking and
tool-call deltas); ``message_end`` carries the complete message, so a consumer that lost updates
(see ``OverflowPolicy.DROP_UPDATES``) still gets every message whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from lemon_ai import (
    AssistantMessage,
    Cost,
    Message,
    StreamEvent,
    ToolResultMessage,
    Usage,
)

__all__ = [
    "AgentEndEvent",
    "AgentErrorEvent",
    "AgentEvent",
    "AgentStartEvent",
    "CanceledEvent",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "RunOutcome",
    "ToolCallTruncatedEvent",
    "ToolExecutionEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "TruncationAction",
    "TurnEndEvent",
    "TurnStartEvent",
]

TruncationAction = Literal["raise_budget", "ask_smaller", "stop"]
"""What the loop does about a truncated tool call: ask again with a larger ``max_tokens``, ask
the model to work in smaller pieces, or stop the run (the bound was reached)."""

RunOutcome = Literal["completed", "aborted", "error", "max_turns"]


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentStartEvent:
    type: ClassVar[str] = "agent_start"
    run_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnStartEvent:
    type: ClassVar[str] = "turn_start"
    turn: int


@dataclass(frozen=True, kw_only=True, slots=True)
class MessageStartEvent:
    """A message begins: a user message (prompt, steering, follow-up) or the model's answer."""

    type: ClassVar[str] = "message_start"
    message: Message


@dataclass(frozen=True, kw_only=True, slots=True)
class MessageUpdateEvent:
    """A streaming delta of the model's answer."""

    type: ClassVar[str] = "message_update"
    turn: int
    event: StreamEvent


@dataclass(frozen=True, kw_only=True, slots=True)
class MessageEndEvent:
    """A message is complete (for the model's answer: with usage, cost and stop reason)."""

    type: ClassVar[str] = "message_end"
    message: Message


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolExecutionStartEvent:
    type: ClassVar[str] = "tool_execution_start"
    tool_call_id: str
    name: str
    arguments: object


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolExecutionUpdateEvent:
    type: ClassVar[str] = "tool_execution_update"
    tool_call_id: str
    name: str
    update: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolExecutionEndEvent:
    type: ClassVar[str] = "tool_execution_end"
    tool_call_id: str
    name: str
    result: ToolResultMessage
    duration_s: float


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnEndEvent:
    type: ClassVar[str] = "turn_end"
    turn: int
    message: AssistantMessage
    tool_results: tuple[ToolResultMessage, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallTruncatedEvent:
    """The model's response hit its output limit inside a tool call; the call was not run.

    ``max_tokens`` is the budget the response had; ``attempt`` counts such responses in a row;
    ``action`` is what happens next (``next_max_tokens`` is the raised budget for
    ``raise_budget``).
    """

    type: ClassVar[str] = "tool_call_truncated"
    turn: int
    tool_call_id: str
    tool_name: str
    max_tokens: int
    attempt: int
    action: TruncationAction
    next_max_tokens: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentErrorEvent:
    """The run failed: a provider error (``kind`` from lemon_ai's ErrorKind), the turn limit
    (``max_turns``) or tool calls cut again and again (``truncated_tool_call``)."""

    type: ClassVar[str] = "error"
    kind: str
    message: str
    error: BaseException | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class CanceledEvent:
    type: ClassVar[str] = "canceled"
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentEndEvent:
    """The run ended; ``messages`` are the messages this run added to the conversation."""

    type: ClassVar[str] = "agent_end"
    run_id: str
    outcome: RunOutcome
    messages: tuple[Message, ...]
    usage: Usage
    cost: Cost


AgentEvent = (
    AgentStartEvent
    | TurnStartEvent
    | MessageStartEvent
    | MessageUpdateEvent
    | MessageEndEvent
    | ToolExecutionStartEvent
    | ToolExecutionUpdateEvent
    | ToolExecutionEndEvent
    | TurnEndEvent
    | ToolCallTruncatedEvent
    | AgentErrorEvent
    | CanceledEvent
    | AgentEndEvent
)
