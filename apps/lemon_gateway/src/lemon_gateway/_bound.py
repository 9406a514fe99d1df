"""A time bound that costs nothing when the bounded await does not wait.

Most awaits of a run's hot path (a no-op ``prepare``, an in-memory store write) complete in
their first step. ``bounded`` runs that first step directly; only a coroutine that really
suspends is continued under ``asyncio.timeout`` (a timer per wait, not per call). The
continuation forwards every send and throw exactly as ``await`` would, so cancellation and
exceptions behave the same.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

from lemon_gateway.errors import GatewayError

__all__ = ["BoundExpiredError", "bounded"]

T = TypeVar("T")


class BoundExpiredError(GatewayError, TimeoutError):
    """The bound passed (as opposed to a TimeoutError raised by the awaited code)."""


@types.coroutine
def _continue(coro: Coroutine[Any, Any, T], yielded: Any) -> Generator[Any, Any, T]:
    # ``yield from coro`` for a coroutine whose first step has already run.
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]  # the coroutine's T
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]  # the coroutine's T


async def bounded(coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
    """Await ``coro`` for at most ``timeout_s`` seconds of waiting; raise
    :class:`BoundExpiredError` when the bound passes (the coroutine is then cancelled)."""
    if type(coro) is not types.CoroutineType:  # another awaitable: the plain way
        bound = asyncio.timeout(timeout_s)
        try:
            async with bound:
                return await coro
        except TimeoutError as exc:
            if bound.expired():
                raise BoundExpiredError(f"no answer within {timeout_s} s") from exc
            raise
    try:
        yielded = coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]  # the coroutine's T
    bound = asyncio.timeout(timeout_s)  # only now: the coroutine really waits
    try:
        async with bound:
            return await _continue(coro, yielded)
    except TimeoutError as exc:
        if bound.expired():
            raise BoundExpiredError(f"no answer within {timeout_s} s") from exc
        raise
