"""Two gateways on one PostgreSQL schema, as two daemons: the engine lock holds across them
(shared lease), a live owner is renewed and never displaced, a former owner that lost its lease
is fenced (its late writes refused, nothing written) or cancelled when its renewal finds the
loss, and ``shared_slots`` makes the slot limit global. Each test has its own schema."""

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
from lemon_core.events import ErrorCode
from lemon_core.execution import ResumeToken
from lemon_core.store import ChatStateStore, RunStore
from lemon_gateway import Gateway, GatewayConfig, VanishedRun
from lemon_infra import PostgresLeases, PostgresStore, drop_schema
from lemon_platform_test.executor import Gate, Script, ScriptedExecutor
from lemon_platform_test.gateway_kit import RunEvents, command

DSN = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
SESSION = "agent:test:shared"
ENGINE = f"engine:session:{SESSION}"


@dataclass
class Daemons:
    schema: str
    executor: ScriptedExecutor
    make: Callable[..., Any]


@pytest.fixture
async def daemons() -> AsyncIterator[Daemons]:
    schema = f"gw_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    executor = ScriptedExecutor()
    async with AsyncExitStack() as stack:

        async def make(name: str, **config: Any) -> tuple[Gateway, PostgresStore]:
            store = await PostgresStore.open(DSN, schema=schema)
            stack.push_async_callback(store.close)
            gateway = Gateway(
                bus=Bus(),
                executor=executor,
                store=store,
                config=GatewayConfig(**config),
                leases=PostgresLeases(store),
                owner=name,
            )
            await stack.enter_async_context(gateway)
            return gateway, store

        try:
            yield Daemons(schema, executor, make)
        finally:
            await stack.aclose()
            await drop_schema(DSN, schema)


async def eventually(predicate: Callable[[], bool], what: str) -> None:
    # Polls a condition another daemon's database round trips make true; the bound only
    # keeps a broken test from hanging.
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


async def take_over(store: PostgresStore, name: str) -> None:
    """What another daemon does to an expired lease, in one statement (no renewal can slip in)."""

    async def op(conn: Any) -> None:
        await conn.execute(
            f'UPDATE "{store.schema}".lemon_leases SET owner = %s, '
            f"token = nextval('\"{store.schema}\".lemon_fencing_tokens'), "
            "expires_at_ms = expires_at_ms + 600000 WHERE name = %s",
            ("intruder", name),
        )

    await store.run(op)


async def test_the_engine_lock_holds_across_daemons(daemons: Daemons) -> None:
    a, _ = await daemons.make("daemon-a")
    b, _ = await daemons.make("daemon-b")
    gate = Gate()
    daemons.executor.script_run("r1", Script().gate(gate).complete(answer="one"))
    daemons.executor.script_run("r2", Script().complete(answer="two"))
    first = a.submit_execution(command("r1", session=SESSION))
    await gate.reached()
    second = b.submit_execution(command("r2", session=SESSION))
    await eventually(lambda: b.shared is not None and b.shared.waits == 1, "b waits")
    assert "r2" not in daemons.executor.records  # not launched while a runs the session
    assert {r["run_id"]: r["state"] for r in b.debug_snapshot()["runs"]} == {"r2": "waiting_lock"}
    gate.open()
    assert (await first).answer == "one"
    assert (await second).answer == "two"
    assert daemons.executor.order == ["r1", "r2"]


async def test_a_late_write_of_a_former_owner_is_refused(daemons: Daemons) -> None:
    a, store_a = await daemons.make("daemon-a", lease_ttl_s=60)
    b, store_b = await daemons.make("daemon-b", lease_ttl_s=60)
    gate = Gate()
    daemons.executor.script_run(
        "late", Script().gate(gate).complete(answer="late", resume=ResumeToken.native("a-1"))
    )
    daemons.executor.script_run(
        "new", Script().complete(answer="new", resume=ResumeToken.native("b-1"))
    )
    late = a.submit_execution(command("late", session=SESSION))
    await gate.reached()

    # Daemon a is paused past its lease (its renewal does not run for 60 s): the lease expires
    # and daemon b takes the session over.
    async def expire(conn: Any) -> None:
        await conn.execute(
            f'UPDATE "{daemons.schema}".lemon_leases SET expires_at_ms = 0 WHERE name = %s',
            (ENGINE,),
        )

    await store_a.run(expire)
    seen_by_b = RunEvents(b.bus).watch("late")
    done = await b.submit_execution(command("new", session=SESSION))
    (vanished,) = seen_by_b.completions("late")  # published by b, the new owner
    assert vanished.error_code is ErrorCode.VANISHED
    assert vanished.synthetic is True
    assert (done.ok, done.warning) == (True, None)

    gate.open()  # a wakes up and finishes: its durable writes carry the old token
    stale = await late
    assert stale.answer == "late"
    assert stale.warning is not None
    assert "fenced: this daemon lost the session's lease" in stale.warning
    resume = await ChatStateStore(store_b).resume_token(SESSION)
    assert resume == ResumeToken.native("b-1")  # b's state, not overwritten
    # Taking the session over, b found a's run still in flight and gave it its one
    # completion (vanished: never executed again); a's own record of it was refused.
    history = {r.run_id: r for r in await RunStore(store_b).history(SESSION)}
    assert set(history) == {"new", "late"}
    assert history["late"].ok is False
    assert history["late"].error_code is ErrorCode.VANISHED
    assert history["new"].ok is True
    assert a.shared is not None
    assert a.shared.fenced_refusals == 2
    assert b.statistics().shared["orphans_completed"] == 1


async def test_a_live_owner_renews_and_a_lost_lease_cancels_its_run(daemons: Daemons) -> None:
    a, store_a = await daemons.make("daemon-a", lease_ttl_s=0.3)
    b, _ = await daemons.make("daemon-b", lease_ttl_s=0.3, engine_lock_timeout_s=60)
    gate = Gate()
    daemons.executor.script_run("long", Script().gate(gate).complete(answer="long"))
    daemons.executor.script_run("next", Script().complete(answer="next"))
    long = a.submit_execution(command("long", session=SESSION))
    await gate.reached()
    waiting = b.submit_execution(command("next", session=SESSION))
    assert a.shared is not None
    # Renewed three times: well past the ttl, and b has not displaced the live owner.
    await eventually(lambda: a.shared is not None and a.shared.renewed >= 3, "renewals")
    assert "next" not in daemons.executor.records

    await take_over(store_a, ENGINE)  # another owner holds it now
    cancelled = await long
    assert (cancelled.ok, cancelled.error) == (False, "lease_lost")
    assert a.shared.lost == 1

    # The intruder never releases: b gets the session once that lease expires (600 s here),
    # so release it as its owner would.
    async def release(conn: Any) -> None:
        await conn.execute(
            f'DELETE FROM "{daemons.schema}".lemon_leases WHERE name = %s', (ENGINE,)
        )

    await store_a.run(release)
    assert (await waiting).answer == "next"
    gate.open()


async def test_shared_slots_make_the_limit_global(daemons: Daemons) -> None:
    a, _ = await daemons.make("daemon-a", max_concurrent_runs=1, shared_slots=True)
    b, _ = await daemons.make("daemon-b", max_concurrent_runs=1, shared_slots=True)
    gate = Gate()
    daemons.executor.script_run("s1", Script().gate(gate).complete(answer="s1"))
    daemons.executor.script_run("s2", Script().complete(answer="s2"))
    first = a.submit_execution(command("s1", session="agent:test:one"))
    await gate.reached()
    second = b.submit_execution(command("s2", session="agent:test:two"))  # another session
    await eventually(lambda: b.shared is not None and b.shared.waits >= 1, "b waits for a slot")
    assert "s2" not in daemons.executor.records
    gate.open()
    assert (await first).answer == "s1"
    assert (await second).answer == "s2"


async def test_a_run_waits_for_a_live_run_of_its_session_past_the_lock_timeout(
    daemons: Daemons,
) -> None:
    a, _ = await daemons.make("daemon-a", lease_ttl_s=0.3)
    b, _ = await daemons.make("daemon-b", engine_lock_timeout_s=0.1)
    gate = Gate()
    daemons.executor.script_run("first", Script().gate(gate).complete(answer="first"))
    daemons.executor.script_run("second", Script().complete(answer="second"))
    first = a.submit_execution(command("first", session=SESSION))
    await gate.reached()
    second = b.submit_execution(command("second", session=SESSION))
    # Well past b's engine_lock_timeout_s: the session's messages wait for each other across
    # daemons as in one daemon's queue, while a's run is alive (renewed).
    await eventually(lambda: a.shared is not None and a.shared.renewed >= 3, "renewals")
    assert not second.done()
    assert "second" not in daemons.executor.records
    gate.open()
    assert (await first).answer == "first"
    assert (await second).answer == "second"


async def test_the_orphan_sweep_completes_a_dead_owners_run_once(daemons: Daemons) -> None:
    a, store_a = await daemons.make("daemon-a", lease_ttl_s=60)
    b, store_b = await daemons.make("daemon-b", lease_ttl_s=60)
    gate = Gate()
    daemons.executor.script_run("orphan", Script().gate(gate).complete(answer="too late"))
    orphan = a.submit_execution(command("orphan", session=SESSION, origin="webhook:ci"))
    await gate.reached()
    hooked: list[VanishedRun] = []

    async def hook(run: VanishedRun) -> None:  # what boot registers (to VANISHED_RUN_LISTENER)
        hooked.append(run)

    b.on_vanished(hook)
    seen_by_b = RunEvents(b.bus).watch("orphan")
    seen_by_a = RunEvents(a.bus).watch("orphan")  # a's own bus (no Redis between them here)
    assert await b.sweep_orphans() == 0  # a live owner holds the session: left alone

    async def expire(conn: Any) -> None:  # a dies: its lease runs out
        await conn.execute(
            f'UPDATE "{daemons.schema}".lemon_leases SET expires_at_ms = 0 WHERE name = %s',
            (ENGINE,),
        )

    await store_a.run(expire)
    assert await b.sweep_orphans() == 1  # no further message needed
    (vanished,) = seen_by_b.completions("orphan")
    assert vanished.error_code is ErrorCode.VANISHED
    assert await store_b.scan("gateway_in_flight") == []
    assert await b.sweep_orphans() == 0  # once
    assert [(h.run_id, h.origin) for h in hooked] == [("orphan", "webhook:ci")]
    history = await RunStore(store_b).history(SESSION)
    assert [(r.run_id, r.error_code) for r in history] == [("orphan", ErrorCode.VANISHED)]

    gate.open()  # the "dead" owner was only paused: it publishes no second completion
    late = await orphan
    assert late.answer == "too late"
    assert seen_by_a.types("orphan") == []  # a published no run_completed of its own
    assert [(r.run_id, r.error_code) for r in await RunStore(store_b).history(SESSION)] == [
        ("orphan", ErrorCode.VANISHED)
    ]


async def test_a_shared_slot_wait_on_a_lost_store_ends_with_store_failed() -> None:
    from lemon_platform_test.proxy import TcpProxy

    schema = f"gw_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    executor = ScriptedExecutor()
    executor.script_run("lost", Script().complete(answer="never"))
    try:
        with TcpProxy("127.0.0.1", 5432) as proxy:
            store = await PostgresStore.open(
                f"postgresql://postgres@127.0.0.1:{proxy.port}/test",
                schema=schema,
                timeout_s=0.3,
                max_connections=1,
            )
            gateway = Gateway(
                bus=Bus(),
                executor=executor,
                store=store,
                config=GatewayConfig(
                    max_concurrent_runs=1,
                    shared_slots=True,
                    engine_lock_timeout_s=0.5,
                    store_timeout_s=0.5,
                ),
                leases=PostgresLeases(store),
                owner="daemon-lost",
            )
            try:
                async with gateway:
                    proxy.cut()
                    completion = await gateway.submit_execution(command("lost", session=SESSION))
            finally:
                await store.close()
        assert not completion.ok
        assert completion.error_code == ErrorCode.STORE_FAILED
        assert "no shared run slot" in (completion.error or "")
        assert "lost" not in executor.records  # nothing was executed
    finally:
        await drop_schema(DSN, schema)
