"""``SessionPort.submit`` is idempotent by ``run_id``: re-submitting an accepted run id answers
the first receipt and never starts a second run: after the run finished, from another port on
the same store (a restart, or another daemon), and when two submissions of one run id race
(the first held at a gate inside its admission). Real Router, Gateway, scripted executor and
SQLite store."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lemon_core.bus import Bus, Delivery, session_topic
from lemon_core.events import Event
from lemon_core.execution import RunRequest, RuntimeContext
from lemon_core.store import ChatStateStore, Store
from lemon_gateway import Gateway
from lemon_infra import SQLiteStore
from lemon_platform_test.executor import Gate, ScriptedExecutor
from lemon_router import Router, RouterConfig, RouterSessionPort
from lemon_router._port import RECEIPTS_TABLE

SESSION = "agent:default:main"
CONFIG = RouterConfig(idle_timeout_ms=None)


class GatedStore:
    """The real store, with the first read of the receipts table held at ``gate``."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.gate = Gate("receipt read")
        self.held = False

    async def get(self, table: str, key: str) -> Any | None:
        if table == RECEIPTS_TABLE and not self.held:
            self.held = True
            await self.gate.pass_through()
        return await self.inner.get(table, key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@dataclass
class Harness:
    bus: Bus
    router: Router
    store: GatedStore
    executor: ScriptedExecutor
    port: RouterSessionPort

    async def completed(self, delivery: Delivery, run_id: str) -> Event:
        while True:
            item = await delivery.get()
            if (
                isinstance(item, Event)
                and item.type == "run_phase_changed"
                and item.payload.run_id == run_id
                and item.payload.phase.terminal
            ):
                return item


@contextlib.asynccontextmanager
async def running(directory: Path) -> AsyncIterator[Harness]:
    context = RuntimeContext()
    executor = ScriptedExecutor()
    async with (
        Bus(validation="raise") as bus,
        await SQLiteStore.open(directory / "lemon.sqlite3") as sqlite,
    ):
        store = GatedStore(sqlite)
        store.held = True  # no gate unless a test asks for one
        async with (
            Gateway(bus=bus, executor=executor, store=sqlite, runtime=context),
            Router(bus=bus, context=context, chat_state=ChatStateStore(sqlite), config=CONFIG) as r,
        ):
            port = RouterSessionPort(r, store=store)  # type: ignore[arg-type]
            yield Harness(bus, r, store, executor, port)


def _request(run_id: str = "run_cron_1") -> RunRequest:
    return RunRequest(origin="cron", session_key=SESSION, prompt="hello", run_id=run_id)


async def test_resubmitting_a_finished_run_id_returns_its_receipt_and_runs_nothing(
    tmp_path: Path,
) -> None:
    async with running(tmp_path) as h:
        delivery = Delivery(max_entries=10_000)
        h.bus.subscribe(session_topic(SESSION), delivery=delivery)
        first = await h.port.submit(_request())
        assert first.status == "started"
        await h.completed(delivery, "run_cron_1")
        again = await h.port.submit(_request())
        assert again == first
        # Another port on the same store (a restarted daemon, or another one) knows it too.
        other = RouterSessionPort(h.router, store=h.store)  # type: ignore[arg-type]
        assert await other.submit(_request()) == first
        assert h.executor.record("run_cron_1").launch_attempts == 1
        assert h.executor.order.count("run_cron_1") <= 1
        assert h.port.resubmissions == 1
        assert other.resubmissions == 1
        # A new run id is a new run.
        fresh = await h.port.submit(_request("run_cron_2"))
        await h.completed(delivery, "run_cron_2")
        assert fresh.run_id == "run_cron_2"
        assert h.executor.record("run_cron_2").launch_attempts == 1


async def test_two_racing_submissions_of_one_run_id_start_one_run(tmp_path: Path) -> None:
    async with running(tmp_path) as h:
        delivery = Delivery(max_entries=10_000)
        h.bus.subscribe(session_topic(SESSION), delivery=delivery)
        h.store.held = False  # the first submission's receipt read waits at the gate
        first = asyncio.create_task(h.port.submit(_request()))
        await h.store.gate.reached()
        second = asyncio.create_task(h.port.submit(_request()))
        await asyncio.sleep(0)
        assert not second.done()  # it waits for the first admission's answer
        h.store.gate.open()
        a, b = await asyncio.gather(first, second)
        assert a == b
        assert a.status == "started"
        await h.completed(delivery, "run_cron_1")
        assert h.executor.record("run_cron_1").launch_attempts == 1
        assert h.port.resubmissions == 1


async def test_a_rejected_submission_is_not_remembered(tmp_path: Path) -> None:
    async with running(tmp_path) as h:
        assert await h.store.inner.get(RECEIPTS_TABLE, "run_cron_9") is None
        delivery = Delivery(max_entries=10_000)
        h.bus.subscribe(session_topic(SESSION), delivery=delivery)
        receipt = await h.port.submit(_request("run_cron_9"))
        await h.completed(delivery, "run_cron_9")
        stored = await h.store.inner.get(RECEIPTS_TABLE, "run_cron_9")
        assert stored is not None
        assert stored["status"] == receipt.status
