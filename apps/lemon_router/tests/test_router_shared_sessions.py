"""Sessions shared by two routers (two daemons' stand-ins on one bus, one store, one lease
keeper): a message for a session the other router owns is queued by the owner's rules, and a
message handed to an owner that died is recorded and run by whoever takes the session."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from lemon_core.bus import Bus
from lemon_core.execution import ENGINE_RUNTIME, RunRequest, RuntimeContext
from lemon_infra import MemoryLeases, MemoryStore
from lemon_platform_test import ManualClock
from lemon_router import Router, RouterConfig
from lemon_router._inbox import INBOX, encode_request, owner_lease
from lemon_router.testing import FakeEngineRuntime

SESSION = "agent:default:main"
TTL_MS = 60
CONFIG = RouterConfig(
    idle_timeout_ms=None,
    liveness_interval_ms=None,
    lease_ttl_ms=TTL_MS,
    handoff_timeout_ms=10_000,
    inbox_sweep=False,  # swept by hand, so which router takes a session is the test's choice
)


@dataclass
class Daemon:
    router: Router
    engine: FakeEngineRuntime


@dataclass
class World:
    bus: Bus
    store: MemoryStore
    leases: MemoryLeases
    clock: ManualClock
    a: Daemon
    b: Daemon


@pytest.fixture
async def world() -> AsyncIterator[World]:
    async with Bus() as bus:
        store = MemoryStore()
        clock = ManualClock(1_000_000)
        leases = MemoryLeases(store, clock=clock)
        daemons = []
        for _ in range(2):
            context = RuntimeContext()
            engine = FakeEngineRuntime(bus)
            context.capabilities.register(ENGINE_RUNTIME, engine)
            router = Router(bus=bus, context=context, config=CONFIG, leases=leases, store=store)
            daemons.append(Daemon(router, engine))
        async with daemons[0].router, daemons[1].router:
            yield World(bus, store, leases, clock, daemons[0], daemons[1])


def request(prompt: str, mode: str = "collect", run_id: str | None = None) -> RunRequest:
    return RunRequest(
        origin="test",
        session_key=SESSION,
        prompt=prompt,
        queue_mode=mode,  # type: ignore[arg-type]  # the modes are literals
        run_id=run_id,
    )


async def records(store: MemoryStore) -> list[tuple[str, object]]:
    return await store.scan(INBOX)


async def test_followups_through_b_are_merged_by_the_owner_queue_and_run_after_its_run(
    world: World,
) -> None:
    a, b = world.a, world.b
    held = await a.router.submit(request("first"))
    assert held.status == "started"
    command = await a.engine.next_command()
    x = await b.router.submit(request("x", "followup"))
    y = await b.router.submit(request("y", "followup"))
    assert x.status == "queued"
    assert y.status == "queued"
    assert x.run_id in (y.reason or "")  # merged
    assert a.router.queued(SESSION) == (y.run_id,)  # in the owner's queue
    assert not b.router.is_busy(SESSION)
    assert b.engine.commands == []
    assert len(await records(world.store)) == 2  # recorded until they run
    a.engine.complete(command.run_id)
    merged = await a.engine.next_command()
    assert merged.run_id == y.run_id
    assert merged.prompt == "x\ny"
    assert await records(world.store) == []  # left the inbox before it was executed
    a.engine.complete(merged.run_id)
    assert b.engine.commands == []


async def test_a_message_handed_to_an_owner_that_died_is_run_by_the_sender_after_expiry(
    world: World,
) -> None:
    b = world.b
    # A daemon took the session and died (it never renews, never answers).
    ghost = await world.leases.acquire(owner_lease(SESSION), "ghost", ttl_ms=TTL_MS)
    assert ghost is not None
    with world.bus.subscribe("router:inbox:ghost") as asked:
        sent = asyncio.create_task(b.router.submit(request("hello", run_id="run-1")))
        command_event = await asked.get()  # B asks the owner ...
    assert command_event.payload["run_id"] == "run-1"
    (row,) = await records(world.store)  # ... after recording the message durably
    assert row[0] == command_event.payload["record"]
    assert not sent.done()
    world.clock.now += TTL_MS + 1  # the dead owner's lease expires
    receipt = await sent
    assert receipt.run_id == "run-1"
    assert receipt.status == "started"
    command = await b.engine.next_command()
    assert command.prompt == "hello"
    assert await records(world.store) == []
    b.engine.complete(command.run_id)


async def test_the_sweep_admits_what_a_dead_owner_left_queued(world: World) -> None:
    b = world.b
    ghost = await world.leases.acquire(owner_lease(SESSION), "ghost", ttl_ms=TTL_MS)
    assert ghost is not None
    for i in range(2):  # two messages were handed to it and were still queued when it died
        key = f"{SESSION}\x1f{1000 + i:015d}\x1frun-{i}"
        await world.store.put(INBOX, key, encode_request(request(f"m{i}", run_id=f"run-{i}")))
    assert await b.router.shared.sweep() == 0  # type: ignore[union-attr]  # live owner: left alone
    world.clock.now += TTL_MS + 1
    assert await b.router.shared.sweep() == 1  # type: ignore[union-attr]  # shared is set
    first = await b.engine.next_command()
    assert (first.run_id, first.prompt) == ("run-0", "m0")
    assert b.router.queued(SESSION) == ("run-1",)  # in their order, by the session's rules
    b.engine.complete(first.run_id)
    second = await b.engine.next_command()
    assert (second.run_id, second.prompt) == ("run-1", "m1")
    b.engine.complete(second.run_id)
    assert await records(world.store) == []


async def test_an_owner_that_stops_reports_handed_off_messages_cancelled_and_forgets_them(
    world: World,
) -> None:
    a, b = world.a, world.b
    await a.router.submit(request("first"))
    await a.engine.next_command()
    queued = await b.router.submit(request("x"))
    assert queued.status == "queued"
    assert len(await records(world.store)) == 1
    await a.router.__aexit__(None, None, None)
    assert await records(world.store) == []  # reported cancelled: no other daemon runs it
    assert await world.leases.holder(owner_lease(SESSION)) is None  # released


SECRET_ENV = "env-secret-5f1c"
SECRET_HEADER = "Bearer header-secret-9a2e"
SECRET_TOKEN = "editor-token-77d0"


def secret_request(prompt: str = "hi", run_id: str | None = None) -> RunRequest:
    from lemon_core.execution import EditorHandle, McpServerSpec

    return RunRequest(
        origin="acp",
        session_key=SESSION,
        prompt=prompt,
        run_id=run_id,
        mcp_servers=(
            McpServerSpec(name="editor", command="python", args=("s.py",), env={"K": SECRET_ENV}),
            McpServerSpec(
                name="web",
                transport="http",
                url="http://127.0.0.1:9/mcp",
                headers={"Authorization": SECRET_HEADER},
            ),
            McpServerSpec(name="plain", command="python", args=("p.py",)),
        ),
        editor=EditorHandle(host="127.0.0.1", port=4242, token=SECRET_TOKEN, read=True),
    )


def test_an_inbox_record_holds_no_secret_and_the_withheld_part_restores_it() -> None:
    """Session MCP servers' env and header values and the editor's token are an editor's
    credentials: the durable record (the shared store, at rest) never holds them."""
    import json

    from lemon_router._inbox import decode_request, withheld_of

    original = secret_request()
    record = encode_request(original)
    text = json.dumps(record)
    for secret in (SECRET_ENV, SECRET_HEADER, SECRET_TOKEN):
        assert secret not in text
    assert "Authorization" in text
    assert '"K"' in text
    restored = decode_request(record, withheld=withheld_of(original))
    assert restored.mcp_servers == original.mcp_servers
    assert restored.editor == original.editor


def test_a_record_admitted_without_its_secrets_leaves_out_what_needs_them() -> None:
    from lemon_router._inbox import decode_request

    admitted = decode_request(encode_request(secret_request()))
    assert [s.name for s in admitted.mcp_servers] == ["plain"]  # needs no value: kept
    assert admitted.editor is None  # no token: the local tools
    assert admitted.prompt == "hi"  # the message itself is kept


async def test_a_message_handed_to_the_owner_keeps_its_secrets_off_the_store(
    world: World,
) -> None:
    a, b = world.a, world.b
    first = await a.router.submit(request("first"))
    assert first.status == "started"
    running = await a.engine.next_command()
    queued = await b.router.submit(secret_request("second", run_id="run-s"))
    assert queued.status == "queued"
    ((_, data),) = await records(world.store)
    import json

    for secret in (SECRET_ENV, SECRET_HEADER, SECRET_TOKEN):
        assert secret not in json.dumps(data)
    a.engine.complete(running.run_id)
    command = await a.engine.next_command()
    assert command.run_id == "run-s"
    assert {s.name: (dict(s.env), dict(s.headers)) for s in command.mcp_servers} == {
        "editor": ({"K": SECRET_ENV}, {}),
        "web": ({}, {"Authorization": SECRET_HEADER}),
        "plain": ({}, {}),
    }
    assert command.editor is not None
    assert command.editor.token == SECRET_TOKEN
    a.engine.complete(command.run_id)


async def test_the_sender_restores_the_secrets_of_its_own_record_when_it_takes_the_session(
    world: World,
) -> None:
    b = world.b
    ghost = await world.leases.acquire(owner_lease(SESSION), "ghost", ttl_ms=TTL_MS)
    assert ghost is not None
    with world.bus.subscribe("router:inbox:ghost") as asked:
        sent = asyncio.create_task(b.router.submit(secret_request("hello", run_id="run-1")))
        await asked.get()
    world.clock.now += TTL_MS + 1  # the owner died before it admitted the message
    assert (await sent).status == "started"
    command = await b.engine.next_command()
    assert [s.name for s in command.mcp_servers] == ["editor", "web", "plain"]
    assert command.editor is not None
    assert command.editor.token == SECRET_TOKEN
    b.engine.complete(command.run_id)


def test_a_handed_off_request_keeps_its_editor_handle() -> None:
    from lemon_core.execution import EditorHandle, RunRequest
    from lemon_router._inbox import decode_request, withheld_of

    editor = EditorHandle(host="127.0.0.1", port=4242, token="tok", read=True, terminal=True)
    request = RunRequest(origin="acp", session_key="acp:a", prompt="hi", editor=editor)
    assert decode_request(encode_request(request), withheld=withheld_of(request)).editor == editor
    assert decode_request(encode_request(RunRequest(origin="acp", session_key="acp:a",
                                                    prompt="hi"))).editor is None  # fmt: skip


def test_a_handed_off_editor_handle_is_dropped_on_another_machine() -> None:
    """The editor's bridge is the sending machine's loopback: a daemon on another machine that
    admits the record must not send the editor's token to whatever listens on its own."""
    from lemon_core.execution import EditorHandle, RunRequest
    from lemon_router._inbox import decode_request, withheld_of

    editor = EditorHandle(host="127.0.0.1", port=4242, token="tok", read=True)
    original = RunRequest(origin="acp", session_key="acp:a", prompt="hi", editor=editor)
    record, secrets = encode_request(original), withheld_of(original)
    elsewhere = decode_request(record, node="another-machine", withheld=secrets)
    assert elsewhere.editor is None
    assert elsewhere.prompt == "hi"  # the message itself is kept
    unknown = decode_request({**record, "editor_node": None}, withheld=secrets)
    assert unknown.editor is None  # unknown machine
