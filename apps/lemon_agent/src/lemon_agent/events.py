"""The agent's event vocabulary.

A run emits, in order: ``agent_start``; per turn ``turn_start``, the messages of the turn
(``message_start`` / ``message_update``* / ``message_end``), the tool executions
(``tool_execution_start`` / ``_update``* / ``_end``, concurrent tools interleaved) and
``turn_end``; then, if the run failed or was aborted, ``error`` or ``canceled``; and always
``agent_end`` last. ``message_update`` wraps a lemon_ai stream event (text, thinking and
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
    "ToolExecutionEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "TurnEndEvent",
    "TurnStartEvent",
]

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
class AgentErrorEvent:
    """The run failed: a provider error (``kind`` from lemon_ai's ErrorKind) or the turn limit."""

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
    | AgentErrorEvent
    | CanceledEvent
    | AgentEndEvent
)
