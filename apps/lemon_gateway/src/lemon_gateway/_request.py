"""The gateway's private ExecutionRequest and the public RunHandle."""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

from lemon_core.events import Completion
from lemon_core.execution import (
    ConversationKey,
    ExecutionCommand,
    ExecutionContext,
    Lane,
    ResumeToken,
    ToolPolicy,
)

__all__ = ["ExecutionRequest", "RunHandle"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionRequest:
    """What the gateway queues for one accepted command. Private: consumers submit
    ExecutionCommands and never build this."""

    run_id: str
    session_key: str
    prompt: str
    conversation_key: ConversationKey
    images: tuple[Mapping[str, Any], ...]
    cwd: str | None
    resume: ResumeToken | None
    lane: Lane
    tool_policy: ToolPolicy | None
    context: ExecutionContext | None
    meta: Mapping[str, Any]
    accepted_at_ns: int

    @classmethod
    def from_command(
        cls, command: ExecutionCommand, key: ConversationKey, accepted_at_ns: int
    ) -> ExecutionRequest:
        return cls(
            run_id=command.run_id,
            session_key=command.session_key,
            prompt=command.prompt,
            conversation_key=key,
            images=command.images,
            cwd=command.cwd,
            resume=command.resume,
            lane=command.lane,
            tool_policy=command.tool_policy,
            context=command.context,
            meta=command.meta,
            accepted_at_ns=accepted_at_ns,
        )


class RunHandle:
    """An accepted run. ``await handle`` (or ``await handle.completion()``) gives its
    Completion; acceptance is not completion."""

    __slots__ = ("_future", "run_id")

    def __init__(self, run_id: str, future: asyncio.Future[Completion]) -> None:
        self.run_id = run_id
        self._future = future

    def done(self) -> bool:
        """Whether the run has completed."""
        return self._future.done()

    async def completion(self) -> Completion:
        """Wait for the run's Completion (cancelling this wait does not cancel the run)."""
        return await asyncio.shield(self._future)

    def __await__(self) -> Generator[Any, None, Completion]:
        return self.completion().__await__()

    def __repr__(self) -> str:
        return f"RunHandle({self.run_id!r}, done={self.done()})"
