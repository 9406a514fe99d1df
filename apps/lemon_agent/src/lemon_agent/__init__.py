"""The agent loop, tool registry and event stream.

An :class:`Agent` alternates model calls (through a lemon_ai provider) and parallel tool batches
until the model stops calling tools, emitting typed events on a bounded :class:`EventStream`.
"""

from __future__ import annotations

from lemon_agent.abort import AbortSignal
from lemon_agent.agent import Agent, AgentRun, AgentStatistics
from lemon_agent.config import AgentConfig, AgentResult
from lemon_agent.errors import (
    AbortedError,
    AgentBusyError,
    AgentUsageError,
    LemonAgentError,
    QueueFullError,
    ToolError,
    TruncatedToolCallError,
)
from lemon_agent.events import (
    AgentEndEvent,
    AgentErrorEvent,
    AgentEvent,
    AgentStartEvent,
    CanceledEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    RunOutcome,
    ToolCallTruncatedEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TruncationAction,
    TurnEndEvent,
    TurnStartEvent,
)
from lemon_agent.stream import EventStream, EventStreamStatistics, OverflowPolicy
from lemon_agent.tools import Tool, ToolContext, ToolExecute, ToolRegistry, ToolResult

__all__ = [
    "AbortSignal",
    "AbortedError",
    "Agent",
    "AgentBusyError",
    "AgentConfig",
    "AgentEndEvent",
    "AgentErrorEvent",
    "AgentEvent",
    "AgentResult",
    "AgentRun",
    "AgentStartEvent",
    "AgentStatistics",
    "AgentUsageError",
    "CanceledEvent",
    "EventStream",
    "EventStreamStatistics",
    "LemonAgentError",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "OverflowPolicy",
    "QueueFullError",
    "RunOutcome",
    "Tool",
    "ToolCallTruncatedEvent",
    "ToolContext",
    "ToolError",
    "ToolExecute",
    "ToolExecutionEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "ToolRegistry",
    "ToolResult",
    "TruncatedToolCallError",
    "TruncationAction",
    "TurnEndEvent",
    "TurnStartEvent",
]
