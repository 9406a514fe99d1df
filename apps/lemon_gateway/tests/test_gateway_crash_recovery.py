"""Runs left in flight on a local SQLite store by a process that died (``kill -9`` of a real
child process running a gateway) get exactly one ``vanished`` completion when a gateway starts
on the store: in the run history, on the bus (run and session topics), and through the
gateway's vanished hooks (boot forwards them to the runtime's ``VANISHED_RUN_LISTENER``, where
the webhook ingress turns the key's receipt into ``outcome_unknown``). Never executed again; a
second start adds nothing; two gateways starting at once complete it once; a live owner's runs
are left alone. The session key was mapped to the run's native session when the run started,
so the mapping survives the kill."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lemon_core.bus import Bus, Delivery, session_topic
from lemon_core.errors import DeliveryClosedError
from lemon_core.events import ErrorCode, Event
from lemon_core.execution import ResumeToken
from lemon_core.store import ChatStateStore, RunStore, RunSummary
from lemon_gateway import Gateway, VanishedRun
from lemon_infra import SQLiteStore
from lemon_platform_test.executor import Gate, Script, ScriptedExecutor
from lemon_platform_test.gateway_kit import RunEvents, command

SESSION = "agent:test:main"
NATIVE = ResumeToken.native("native-of-the-killed-run")

CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from lemon_core.bus import Bus
    from lemon_core.execution import ResumeToken
    from lemon_infra import SQLiteStore
    from lemon_gateway import Gateway
    from lemon_platform_test.executor import Gate, Script, ScriptedExecutor
    from lemon_platform_test.gateway_kit import command

    async def main(store_path, owners, run_id, native):
        gate = Gate()
        script = Script().started(ResumeToken.native(native)).delta("half an ans").gate(gate)
        async with await SQLiteStore.open(store_path) as store:
            gateway = Gateway(
                bus=Bus(), executor=ScriptedExecutor(script), store=store,
                owners_dir=Path(owners),
            )
            async with gateway:
                gateway.submit_execution(
                    command(run_id, session="agent:test:main", origin="webhook:ci")
                )
                await gate.reached()
                print("running", run_id, flush=True)
                await asyncio.Event().wait()

    asyncio.run(main(*sys.argv[1:]))
    """
)


class Paths:
    def __init__(self, tmp_path: Path) -> None:
        self.store = tmp_path / "store" / "lemon.sqlite3"
        self.owners = tmp_path / "store" / "run-owners"
        self.script = tmp_path / "child.py"
        self.script.write_text(CHILD)


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    return Paths(tmp_path)


def killed_mid_run(paths: Paths, run_id: str) -> None:
    """A child process runs a gateway on the store, its run blocked mid-answer; SIGKILL."""
    child = subprocess.Popen(
        [sys.executable, str(paths.script), str(paths.store), str(paths.owners), run_id,
         NATIVE.value],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        if line.split() != ["running", run_id]:
            child.kill()
            raise AssertionError((line, child.stderr.read() if child.stderr else ""))
        child.kill()
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
        for pipe in (child.stdout, child.stderr):
            if pipe is not None:
                pipe.close()


class SessionEvents:
    def __init__(self, bus: Bus, key: str = SESSION) -> None:
        self.sub = bus.subscribe(
            session_topic(key), delivery=Delivery(max_entries=1000, bind_current_task=False)
        )

    def completions(self) -> list[Event]:
        found: list[Event] = []
        while True:
            try:
                item = self.sub.delivery.get_nowait()
            except (asyncio.QueueEmpty, DeliveryClosedError):
                return found
            if isinstance(item, Event) and item.type == "run_completed":
                found.append(item)


def watching(bus: Bus, run_id: str) -> tuple[RunEvents, SessionEvents]:
    return RunEvents(bus).watch(run_id), SessionEvents(bus)


def gateway_on(store: SQLiteStore, paths: Paths, bus: Bus, hooks: list[VanishedRun]) -> Gateway:
    gateway = Gateway(bus=bus, executor=ScriptedExecutor(), store=store, owners_dir=paths.owners)

    async def hook(run: VanishedRun) -> None:
        hooks.append(run)

    gateway.on_vanished(hook)
    return gateway


def completed_of(events: RunEvents, run_id: str) -> list[Any]:
    """Every completion of ``run_id`` published so far."""
    return [e.payload.completed for e in events.events(run_id) if e.type == "run_completed"]


async def test_a_run_left_by_a_killed_process_completes_once_as_vanished(paths: Paths) -> None:
    await asyncio.to_thread(killed_mid_run, paths, "run-killed")
    bus = Bus()
    run_events, session_events = watching(bus, "run-killed")
    hooks: list[VanishedRun] = []
    async with await SQLiteStore.open(paths.store) as store:
        # The mapping was written when the run started: the kill did not lose it.
        assert await ChatStateStore(store).resume_token(SESSION) == NATIVE
        async with gateway_on(store, paths, bus, hooks):
            pass
        [completed] = completed_of(run_events, "run-killed")
        assert completed.ok is False
        assert completed.error_code is ErrorCode.VANISHED
        assert completed.synthetic is True
        assert "was not executed again" in (completed.error or "")
        assert len(session_events.completions()) == 1  # the router that ran it is gone too
        assert [(h.run_id, h.session_key, h.origin) for h in hooks] == [
            ("run-killed", SESSION, "webhook:ci")
        ]
        [summary] = await RunStore(store).history(SESSION)
        assert (summary.run_id, summary.error_code) == ("run-killed", ErrorCode.VANISHED)
        assert summary.resume == NATIVE  # the session index knows the native session too
        assert await store.scan("gateway_in_flight") == []
        # Started again: nothing more.
        async with gateway_on(store, paths, bus, hooks):
            pass
        assert len(completed_of(run_events, "run-killed")) == 1  # still the one
        assert session_events.completions() == []  # nothing new
        assert len(hooks) == 1
        assert len(await RunStore(store).history(SESSION)) == 1
    assert list(paths.owners.iterdir()) == []  # the dead owner's lock file is gone, and ours


async def test_two_gateways_starting_at_once_complete_a_dead_run_once(paths: Paths) -> None:
    await asyncio.to_thread(killed_mid_run, paths, "run-raced")
    bus = Bus()
    run_events, _ = watching(bus, "run-raced")
    hooks: list[VanishedRun] = []
    first = await SQLiteStore.open(paths.store)
    second = await SQLiteStore.open(paths.store)
    try:
        a = gateway_on(first, paths, bus, hooks)
        b = gateway_on(second, paths, bus, hooks)
        await asyncio.gather(a.start(), b.start())
        await asyncio.gather(a.stop(), b.stop())
        assert len(completed_of(run_events, "run-raced")) == 1
        assert len(hooks) == 1
        assert len(await RunStore(first).history(SESSION)) == 1
    finally:
        await first.close()
        await second.close()


@pytest.fixture
def gate() -> Iterator[Gate]:
    gate = Gate()
    yield gate
    gate.open()


async def test_a_live_owners_run_is_left_alone_and_completes_once_itself(
    paths: Paths, gate: Gate
) -> None:
    bus = Bus()
    run_events, _ = watching(bus, "run-live")
    hooks: list[VanishedRun] = []
    executor = ScriptedExecutor(Script().started(NATIVE).gate(gate).complete(answer="done"))
    async with await SQLiteStore.open(paths.store) as store:
        live = Gateway(bus=bus, executor=executor, store=store, owners_dir=paths.owners)
        async with live:
            handle = live.submit_execution(command("run-live", session=SESSION))
            await gate.reached()
            other = await SQLiteStore.open(paths.store)
            try:
                async with gateway_on(other, paths, bus, hooks) as late:
                    assert await late.sweep_orphans() == 0
            finally:
                await other.close()
            assert hooks == []
            gate.open()
            done = await handle
        assert done.ok is True
        assert [c.ok for c in completed_of(run_events, "run-live")] == [True]
        assert await store.scan("gateway_in_flight") == []


async def test_a_run_recorded_as_finished_is_not_completed_again(paths: Paths) -> None:
    """A process killed after its run's history was written but before its in-flight record
    was cleared: the history is the run's one completion; the record is just forgotten."""
    await asyncio.to_thread(killed_mid_run, paths, "run-finished")
    async with await SQLiteStore.open(paths.store) as store:
        await RunStore(store).finalize(
            RunSummary(run_id="run-finished", session_key=SESSION, ok=True, answer="done")
        )
        bus = Bus()
        run_events, _ = watching(bus, "run-finished")
        hooks: list[VanishedRun] = []
        async with gateway_on(store, paths, bus, hooks):
            pass
        assert completed_of(run_events, "run-finished") == []
        assert hooks == []
        [summary] = await RunStore(store).history(SESSION)
        assert summary.ok is True
        assert await store.scan("gateway_in_flight") == []
