"""Fake apps for runtime tests: a lifespan made of a start and an optional stop coroutine.

``AppSpec(name="m", lifespan=hooks(start, stop))``: ``start(runtime)`` returns the handle the
lifespan yields; ``stop(runtime, handle)`` runs when it is left (also when the block raised).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

__all__ = ["hooks"]

H = TypeVar("H")


def hooks(
    start: Callable[[Any], Awaitable[H]],
    stop: Callable[[Any, H], Awaitable[None]] | None = None,
) -> Callable[[Any], AbstractAsyncContextManager[H]]:
    """A lifespan entering with ``start`` and leaving with ``stop``."""

    @contextlib.asynccontextmanager
    async def lifespan(runtime: Any) -> AsyncIterator[H]:
        handle = await start(runtime)
        try:
            yield handle
        finally:
            if stop is not None:
                await stop(runtime, handle)

    return lifespan
