"""The chat-state readback under a shared session lease belongs to the router: two daemons
(a gateway and a router each) on one PostgreSQL schema; a message accepted by daemon B while a
run of the same session holds the session's lease on daemon A resumes the native session A's
run wrote, because B's gateway asks B's router again once it holds the lease. The router's
answer follows its resume rules (an explicit token is left as asked, auto-resume can be
disabled, an unreadable chat state keeps what was looked up)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import pytest

from lemon_core.bus import Bus
from lemon_core.execution import (
    RESUME_READBACK,
    ExecutionCommand,
    ResumeToken,
    RunRequest,
    RuntimeContext,
)
from lemon_core.store import ChatStateStore, StoreError
from lemon_gateway import Gateway, GatewayConfig
from lemon_infra import MemoryStore, PostgresLeases, PostgresStore, drop_schema
from lemon_platform_test.executor import Gate, Script, ScriptedExecutor
from lemon_router import Router, RouterConfig

DSN = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
SESSION = "agent:default:main"
CONFIG = RouterConfig(idle_timeout_ms=None, liveness_interval_ms=None)


@dataclass
class Daemon:
    gateway: Gateway
    router: Router
    context: RuntimeContext


@dataclass
class World:
    executor: ScriptedExecutor
    make: Callable[..., Any]


@pytest.fixture
async def world() -> AsyncIterator[World]:
    schema = f"rt_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    executor = ScriptedExecutor()
    async with AsyncExitStack() as stack:

        async def make(name: str) -> Daemon:
            store = await PostgresStore.open(DSN, schema=schema)
            stack.push_async_callback(store.close)
            bus = await stack.enter_async_context(Bus())
            context = RuntimeContext()
            gateway = Gateway(
                bus=bus,
                executor=executor,
                store=store,
                config=GatewayConfig(lease_ttl_s=5.0),
                leases=PostgresLeases(store),
                owner=name,
                runtime=context,
            )
            await stack.enter_async_context(gateway)
            router = Router(
                bus=bus, context=context, chat_state=ChatStateStore(store), config=CONFIG
            )
            await stack.enter_async_context(router)
            return Daemon(gateway, router, context)

        try:
            yield World(executor, make)
        finally:
            await stack.aclose()
            await drop_schema(DSN, schema)


def request(prompt: str, run_id: str, **kw: Any) -> RunRequest:
    return RunRequest(origin="test", session_key=SESSION, prompt=prompt, run_id=run_id, **kw)


async def test_a_run_that_waited_for_the_sessions_lease_resumes_what_the_other_daemon_wrote(
    world: World,
) -> None:
    a = await world.make("daemon-a")
    b = await world.make("daemon-b")
    gate = Gate()
    world.executor.script_run(
        "first", Script().gate(gate).complete(answer="first", resume=ResumeToken.native("a-1"))
    )
    world.executor.script_run("second", Script().complete(answer="second"))
    await a.router.submit(request("one", "first"))
    await gate.reached()
    first = a.gateway.completion_future("first")
    assert first is not None
    # B's router looks the session up now (nothing stored yet) and submits; B's run then
    # waits for the session's shared lease, which A's run holds.
    await b.router.submit(request("two", "second"))
    second = None
    for _ in range(1000):  # accepted by B's gateway after a hop through B's router
        second = b.gateway.completion_future("second")
        if second is not None:
            break
        await asyncio.sleep(0.01)
    assert second is not None
    assert "second" not in world.executor.records
    gate.open()
    assert (await first).ok
    done = await second
    assert done.ok, done.error
    job = world.executor.record("second").job
    assert job.resume == ResumeToken.native("a-1")
    assert job.resume_mode == "auto"  # a looked-up token: a lost transcript starts fresh


async def test_the_router_registers_its_readback_while_it_runs() -> None:
    context = RuntimeContext()
    async with Bus() as bus:
        router = Router(bus=bus, context=context, config=CONFIG)
        assert context.capabilities.get(RESUME_READBACK) is None
        async with router:
            assert context.capabilities.get(RESUME_READBACK) is router
        assert context.capabilities.get(RESUME_READBACK) is None


class _Failing:
    async def resume_token(self, session_key: str) -> ResumeToken | None:
        raise StoreError("the store is down")


def _command(**kw: Any) -> ExecutionCommand:
    return ExecutionCommand(
        run_id="r1", session_key=SESSION, prompt="p", conversation_key=("session", SESSION), **kw
    )


async def test_the_readback_follows_the_routers_resume_rules() -> None:
    store = MemoryStore()
    chat = ChatStateStore(store)
    await chat.put(SESSION, ResumeToken.native("latest"))
    async with Bus() as bus:
        router = Router(bus=bus, context=RuntimeContext(), chat_state=chat, config=CONFIG)
        older = ResumeToken.native("older")
        latest = ResumeToken.native("latest")
        # Automatic (looked up, or nothing looked up and auto-resume on): the newer token.
        assert await router.latest_resume(_command(resume=older, resume_mode="auto")) == latest
        assert await router.latest_resume(_command()) == latest
        # Nothing newer: run as submitted.
        assert await router.latest_resume(_command(resume=latest, resume_mode="auto")) is None
        # An explicit token is left as asked; disabled auto-resume reads nothing.
        assert await router.latest_resume(_command(resume=older)) is None
        disabled = _command(meta={"disable_auto_resume": True})
        assert await router.latest_resume(disabled) is None
        # An unreadable chat state keeps what was looked up; no chat state: nothing.
        failing = Router(bus=bus, context=RuntimeContext(), chat_state=_Failing(), config=CONFIG)
        assert await failing.latest_resume(_command()) is None
        bare = Router(bus=bus, context=RuntimeContext(), config=CONFIG)
        assert await bare.latest_resume(_command()) is None
