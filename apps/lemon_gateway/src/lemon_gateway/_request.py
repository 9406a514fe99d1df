"""The gateway's private ExecutionRequest and the public RunHandle."""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Mapping
from typing import Any

from lemon_core.events import Completion
from lemon_core.execution import ExecutionCommand

__all__ = ["ExecutionRequest", "RunHandle"]


class ExecutionRequest:
    """What the gateway queues for one accepted command. Private: consumers submit
    ExecutionCommands and never build this.

    It wraps the (immutable) command with what the gateway adds at acceptance: the
    validated conversation key, the acceptance time and the event meta of the run.
    """

    __slots__ = (
        "accepted_at_ns",
        "command",
        "conversation_key",
        "event_meta",
        "resume",
        "run_id",
        "session_key",
    )

    def __init__(
        self, command: ExecutionCommand, key: tuple[str, ...], accepted_at_ns: int
    ) -> None:
        self.command = command
        self.run_id = command.run_id
        self.session_key = command.session_key
        self.resume = command.resume
        self.conversation_key = key
        self.accepted_at_ns = accepted_at_ns
        meta: dict[str, Any] = {"run_id": command.run_id, "session_key": command.session_key}
        if command.origin is not None:
            meta["origin"] = command.origin
        if command.model is not None:
            meta["model"] = command.model
        self.event_meta = meta

    @property
    def meta(self) -> Mapping[str, Any]:
        return self.command.meta


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
        if self._future.done():
            return self._future.result()
        return await asyncio.shield(self._future)

    def __await__(self) -> Generator[Any, None, Completion]:
        return self.completion().__await__()

    def __repr__(self) -> str:
        return f"RunHandle({self.run_id!r}, done={self.done()})"
