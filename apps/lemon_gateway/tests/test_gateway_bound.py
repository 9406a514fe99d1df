"""The gateway's time bound: free when nothing waits, exact await semantics when it does."""

from __future__ import annotations

import asyncio

import pytest

from lemon_gateway._bound import BoundExpiredError, bounded


async def _now(value: int) -> int:
    return value


async def _after(gate: asyncio.Event, value: int) -> int:
    await gate.wait()
    await asyncio.sleep(0)
    return value


async def test_gateway_bound_returns_at_once_without_waiting() -> None:
    assert await bounded(_now(7), 0) == 7  # a zero bound: nothing waited, nothing expired


async def test_gateway_bound_lets_a_suspending_await_finish_inside_it() -> None:
    gate = asyncio.Event()
    task = asyncio.ensure_future(bounded(_after(gate, 3), 60))
    await asyncio.sleep(0)
    assert not task.done()
    gate.set()
    assert await task == 3


async def test_gateway_bound_expires_and_cancels_the_awaited_coroutine() -> None:
    cleaned = asyncio.Event()

    async def hangs() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.set()

    with pytest.raises(BoundExpiredError, match=r"no answer within 0\.001 s"):
        await bounded(hangs(), 0.001)
    assert cleaned.is_set()


async def test_gateway_bound_keeps_the_awaited_codes_own_timeout_error_apart() -> None:
    async def raises_timeout() -> None:
        await asyncio.sleep(0)
        raise TimeoutError("the provider's own timeout")

    with pytest.raises(TimeoutError, match="provider's own") as info:
        await bounded(raises_timeout(), 60)
    assert not isinstance(info.value, BoundExpiredError)


async def test_gateway_bound_forwards_cancellation_into_the_awaited_coroutine() -> None:
    seen: list[str] = []
    gate = asyncio.Event()

    async def waits() -> None:
        try:
            await gate.wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    task = asyncio.ensure_future(bounded(waits(), 60))
    await asyncio.sleep(0)
    task.cancel("stop")
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled"]


async def test_gateway_bound_accepts_a_plain_awaitable() -> None:
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    future.set_result(5)
    assert await bounded(future, 1) == 5  # type: ignore[arg-type]  # not a coroutine


async def test_gateway_bound_throws_a_cancellation_into_a_coroutine_between_steps() -> None:
    # Suspended on a bare yield (no future to cancel), a cancellation reaches the coroutine
    # only by being thrown into it: the bound must forward the throw.
    seen: list[str] = []

    async def spins() -> str:
        try:
            for _ in range(1000):
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "never cancelled"

    task = asyncio.ensure_future(bounded(spins(), 60))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    task.cancel("stop")
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled"]
