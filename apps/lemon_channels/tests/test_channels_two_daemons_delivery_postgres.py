"""Two daemons on one PostgreSQL schema (two stores, two pools, two Telegram plugins against one
fake Bot API) deliver the same fire's summary through their own ChannelSupervision at the same
instant: it is admitted once and sent once.

The race is driven by a barrier, not by timing: each daemon's admission is held at its first
read of the outbox's id table until both have reached it, so both have seen "not admitted yet"
before either writes. A check-then-insert admission sends the summary twice here; the outbox's
claim (``Store.put_new``: ``INSERT … ON CONFLICT … RETURNING`` in one transaction with the
entry) lets exactly one through."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from lemon_channels import Channels, Outbox
from lemon_channels._supervision import ChannelsSupervision
from lemon_channels.telegram import TelegramPlugin
from lemon_channels.testing import FakeTelegram
from lemon_core.channels import InboundMessage
from lemon_core.store import OutboxStore
from lemon_infra import PostgresStore, drop_schema

DSN = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
CHAT = "4242"
#: A fire's cron_run_id: the intent id automation submits a summary with.
FIRE = "cron_9f2c4e1a7b3d5e6f"


class BarrierStore:
    """A daemon's Store whose reads of the outbox's id table wait for ``barrier`` (every
    other call goes straight through)."""

    def __init__(self, inner: PostgresStore, barrier: asyncio.Barrier) -> None:
        self.inner = inner
        self.barrier = barrier

    async def get(self, table: str, key: str) -> Any:
        if table == OutboxStore.IDS:
            await self.barrier.wait()
        return await self.inner.get(table, key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def _ignore(_: InboundMessage) -> None:
    return None


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    name = f"chan2d_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    yield name
    await drop_schema(DSN, name)


class Daemon:
    def __init__(
        self, store: PostgresStore, gated: BarrierStore, plugin: TelegramPlugin, outbox: Outbox
    ) -> None:
        self.store = store
        self.gated = gated
        self.plugin = plugin
        self.outbox = outbox
        host = SimpleNamespace(plugin=plugin, outbox=outbox)  # what supervision reads of a host
        channels = Channels(hosts={"telegram": host})  # type: ignore[dict-item]
        self.supervision = ChannelsSupervision(channels, store)

    async def close(self) -> None:
        await self.outbox.close()
        await self.plugin.stop()
        await self.store.close()


async def _daemon(fake: FakeTelegram, schema: str, barrier: asyncio.Barrier) -> Daemon:
    store = await PostgresStore.open(DSN, schema=schema, max_connections=4)
    plugin = TelegramPlugin(token=fake.token, api_base_url=fake.url, poll_timeout_s=5)
    await plugin.start(_ignore)
    gated = BarrierStore(store, barrier)
    outbox = Outbox(
        plugin=plugin,
        store=OutboxStore(gated),  # type: ignore[arg-type]
        bus=None,
        base_backoff_s=0.01,
    )
    return Daemon(store, gated, plugin, outbox)


async def test_a_fires_summary_raced_by_two_daemons_is_admitted_and_sent_once(
    fake: FakeTelegram, schema: str
) -> None:
    barrier = asyncio.Barrier(2)
    a = await _daemon(fake, schema, barrier)
    b = await _daemon(fake, schema, barrier)
    try:
        receipts = await asyncio.wait_for(
            asyncio.gather(
                *(
                    d.supervision.submit(
                        f"telegram:{CHAT}",
                        intent_id=FIRE,
                        text="the nightly report: all green",
                        run_id="run_cron_1",
                        meta={"origin": "cron", "cron_run_id": FIRE},
                    )
                    for d in (a, b)
                )
            ),
            10,
        )
        assert sorted(r.status for r in receipts) == ["admitted", "duplicate"]
        await asyncio.wait_for(asyncio.gather(a.outbox.drained(), b.outbox.drained()), 10)
        assert [m.text for m in fake.chat(CHAT)] == ["the nightly report: all green"]
        assert len(fake.method_calls("sendMessage")) == 1
        stats = [d.outbox.statistics() for d in (a, b)]
        assert sorted((s.admitted, s.duplicates) for s in stats) == [(0, 1), (1, 0)]
        # both daemons read the one delivery's message id back from the shared outbox
        (sent,) = fake.chat(CHAT)
        for d in (a, b):
            ids = await d.supervision.message_ids(f"telegram:{CHAT}", FIRE)
            assert ids == (str(sent.message_id),)
        # and a later repeat from either daemon (a takeover re-delivering) is a duplicate
        for d in (a, b):
            d.gated.barrier = asyncio.Barrier(1)
            again = await d.supervision.submit(f"telegram:{CHAT}", intent_id=FIRE, text="x")
            assert again.status == "duplicate"
        assert len(fake.chat(CHAT)) == 1
    finally:
        await a.close()
        await b.close()
