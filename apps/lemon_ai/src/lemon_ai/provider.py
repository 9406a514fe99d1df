"""The provider port: one ``stream`` call per model response, and ``complete`` on top of it."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from lemon_ai.errors import ProtocolError
from lemon_ai.events import DoneEvent, ErrorEvent, StreamEvent
from lemon_ai.messages import AssistantMessage, Context, ThinkingLevel
from lemon_ai.models import Api, Model

__all__ = ["Provider", "StreamOptions", "complete"]


@dataclass(frozen=True, kw_only=True, slots=True)
class StreamOptions:
    """Per-call options. ``max_tokens`` defaults to the model's."""

    max_tokens: int | None = None
    temperature: float | None = None
    thinking: ThinkingLevel = "off"


@runtime_checkable
class Provider(Protocol):
    """Something that streams model responses in the :mod:`lemon_ai.events` vocabulary."""

    @property
    def api(self) -> Api:
        """The wire protocol this provider speaks."""
        ...

    def stream(
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream one response; ends with exactly one ``DoneEvent`` or ``ErrorEvent``."""
        ...

    async def aclose(self) -> None:
        """Release connections (idempotent)."""
        ...


async def complete(
    provider: Provider, model: Model, context: Context, options: StreamOptions | None = None
) -> AssistantMessage:
    """Stream a response to its end and return the message; a failure raises its ProviderError."""
    async with aclosing(provider.stream(model, context, options)) as events:
        async for event in events:
            if isinstance(event, DoneEvent):
                return event.message
            if isinstance(event, ErrorEvent):
                raise event.error
    raise ProtocolError("the provider's stream ended without a done or error event")
