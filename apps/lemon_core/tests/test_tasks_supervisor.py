"""lemon_core.tasks.Supervisor: the one task primitive (named spawns, isolated crashes,
close with a grace period)."""

from __future__ import annotations

import asyncio

import pytest

from lemon_core.tasks import Supervisor, SupervisorClosedError


async def test_a_crash_is_counted_and_its_siblings_go_on() -> None:
    supervisor = Supervisor("test")
    gate = asyncio.Event()
    seen: list[str] = []

    async def sibling() -> str:
        await gate.wait()
        return "done"

    async def crash() -> None:
        raise ValueError("boom")

    survivor = supervisor.spawn(sibling(), name="sibling")
    broken = supervisor.spawn(crash(), name="crash")
    with pytest.raises(ValueError, match="boom"):
        await broken
    await asyncio.sleep(0)  # one loop turn: done callbacks run
    stats = supervisor.statistics()
    assert (stats.crashed, stats.running) == (1, 1)
    assert stats.last_crashes[0].name == "crash"
    assert "ValueError: boom" in stats.last_crashes[0].error
    assert not survivor.done()
    gate.set()
    assert await survivor == "done"
    seen.append("ok")
    await supervisor.close()
    assert supervisor.statistics().running == 0


async def test_on_crash_hears_each_crash_and_a_failing_handler_is_contained() -> None:
    heard: list[str] = []

    def handler(name: str, error: BaseException) -> None:
        heard.append(f"{name}:{error}")
        raise RuntimeError("handler bug")

    supervisor = Supervisor("test", on_crash=handler)

    async def crash() -> None:
        raise KeyError("k")

    task = supervisor.spawn(crash(), name="c")
    with pytest.raises(KeyError):
        await task
    await asyncio.sleep(0)
    assert heard == ["c:'k'"]


async def test_close_waits_the_grace_then_cancels_the_rest() -> None:
    supervisor = Supervisor("test")
    finishing = asyncio.Event()
    cancelled = asyncio.Event()

    async def quick() -> None:
        await finishing.wait()

    async def stubborn() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    supervisor.spawn(quick(), name="quick")
    supervisor.spawn(stubborn(), name="stubborn")
    finishing.set()
    await supervisor.close(grace_s=0.5)
    assert cancelled.is_set()
    stats = supervisor.statistics()
    assert (stats.running, stats.cancelled, stats.crashed, stats.closed) == (0, 1, 0, True)


async def test_close_without_grace_cancels_at_once_and_nothing_spawns_after() -> None:
    supervisor = Supervisor("test")

    async def forever() -> None:
        await asyncio.Event().wait()

    task = supervisor.spawn(forever(), name="forever")
    await supervisor.close(grace_s=0)
    assert task.cancelled()

    async def late() -> None:
        return None

    coro = late()
    with pytest.raises(SupervisorClosedError, match="closed"):
        supervisor.spawn(coro, name="late")
    assert coro.cr_frame is None  # closed, not left un-awaited
