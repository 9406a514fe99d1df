"""Agent configuration and run results."""

from __future__ import annotations

from dataclasses import dataclass, field

from lemon_agent.errors import AgentUsageError
from lemon_agent.events import RunOutcome
from lemon_agent.stream import OverflowPolicy
from lemon_agent.tools import ToolRegistry
from lemon_ai import AssistantMessage, Cost, Message, Model, Provider, StreamOptions, Usage

__all__ = ["AgentConfig", "AgentResult"]


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentConfig:
    """What an agent runs with, and its bounds.

    ``max_turns`` bounds model calls per run (a run that reaches it ends with outcome
    ``max_turns``); ``max_tool_concurrency`` bounds tools running at once within a batch;
    ``max_tool_result_chars`` truncates a tool result (head kept, with a marker);
    ``abort_grace`` is how long running tools get to honour an abort before they are cancelled;
    ``event_capacity`` and ``overflow`` bound each run's event stream; ``steering_capacity`` and
    ``follow_up_capacity`` bound the queues (a full queue refuses with ``QueueFullError``).
    ``max_truncated_retries`` bounds how many responses in a row cut by the output limit inside
    a tool call are answered (first with a doubled ``max_tokens``, up to the model's catalogue
    maximum, then by asking for smaller pieces) before the run stops with
    ``TruncatedToolCallError``.
    """

    model: Model
    provider: Provider
    system_prompt: str = ""
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    options: StreamOptions = field(default_factory=StreamOptions)
    max_turns: int = 50
    max_tool_concurrency: int = 8
    max_tool_result_chars: int = 100_000
    abort_grace: float = 5.0
    event_capacity: int = 1024
    overflow: OverflowPolicy = OverflowPolicy.BLOCK
    steering_capacity: int = 64
    follow_up_capacity: int = 64
    max_truncated_retries: int = 2

    def __post_init__(self) -> None:
        for name in (
            "max_turns",
            "max_tool_concurrency",
            "max_tool_result_chars",
            "event_capacity",
            "steering_capacity",
            "follow_up_capacity",
        ):
            value = getattr(self, name)
            if value < 1:
                raise AgentUsageError(f"AgentConfig.{name} must be >= 1, got {value}")
        if self.max_truncated_retries < 0:
            raise AgentUsageError(
                f"AgentConfig.max_truncated_retries must be >= 0, got {self.max_truncated_retries}"
            )
        if self.abort_grace < 0:
            raise AgentUsageError(f"AgentConfig.abort_grace must be >= 0, got {self.abort_grace}")


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentResult:
    """How a run ended and what it added to the conversation."""

    run_id: str
    outcome: RunOutcome
    messages: tuple[Message, ...]
    usage: Usage
    cost: Cost
    turns: int
    error: BaseException | None = None
    abort_reason: str | None = None

    @property
    def final(self) -> AssistantMessage | None:
        """The last assistant message of the run."""
        for message in reversed(self.messages):
            if isinstance(message, AssistantMessage):
                return message
        return None

    @property
    def text(self) -> str:
        """The text of the last assistant message ('' if none)."""
        final = self.final
        return final.text if final is not None else ""
