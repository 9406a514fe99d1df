"""The outbox on a real SQLite store, the real Telegram plugin and the fake Bot API server:
durable admission before the send, retry honouring retry_after, restart (sent once),
dedupe, superseded transients, and the channel_delivery observation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from lemon_channels import Outbox
from lemon_channels.telegram import TelegramPlugin
from lemon_channels.testing import FakeTelegram
from lemon_core.bus import CHANNELS, Bus
from lemon_core.channels import DeliveryIntent, DeliveryRoute, InboundMessage, IntentKind
from lemon_core.events import ChannelDelivery
from lemon_core.store import OutboxStore
from lemon_infra import SQLiteStore

ROUTE = DeliveryRoute(channel_id="telegram", account_id="1", peer_kind="dm", peer_id="42")


def intent(
    n: int, text: str, *, kind: IntentKind = IntentKind.FINAL_TEXT, slot: str | None = None
) -> DeliveryIntent:
    return DeliveryIntent(
        intent_id=f"i{n}",
        kind=kind,
        route=ROUTE,
        slot=slot or f"s{n}",
        text=text,
        run_id="run_1",
        session_key="agent:default:telegram:1:dm:42",
    )


async def _ignore(_: InboundMessage) -> None:
    return None


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def plugin(fake: FakeTelegram) -> AsyncIterator[TelegramPlugin]:
    plugin = TelegramPlugin(token=fake.token, api_base_url=fake.url, poll_timeout_s=5)
    await plugin.start(_ignore)
    yield plugin
    await plugin.stop()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    store = await SQLiteStore.open(tmp_path / "lemon.sqlite3")
    yield store
    await store.close()


def outbox_for(plugin: TelegramPlugin, store: SQLiteStore, bus: Bus | None = None) -> Outbox:
    return Outbox(plugin=plugin, store=OutboxStore(store), bus=bus, base_backoff_s=0.01)


def shown(fake: FakeTelegram) -> list[str]:
    return [m.shown for m in fake.chat(42)]


async def test_a_message_is_admitted_durably_before_it_is_sent(
    fake: FakeTelegram, plugin: TelegramPlugin, store: SQLiteStore
) -> None:
    gate = fake.hold("sendMessage")
    outbox = outbox_for(plugin, store)
    await outbox.admit(intent(1, "hello"))
    await fake.wait_for(lambda: len(fake.method_calls("sendMessage")) == 1)
    [pending] = await OutboxStore(store).pending("telegram")
    assert pending.intent_id == "i1"
    assert shown(fake) == []
    gate.set()
    await asyncio.wait_for(outbox.drained(), 10)
    assert shown(fake) == ["hello"]
    assert await OutboxStore(store).pending("telegram") == []
    await outbox.close()


async def test_a_rate_limit_is_retried_no_sooner_than_retry_after(
    fake: FakeTelegram, plugin: TelegramPlugin, store: SQLiteStore
) -> None:
    fake.refuse_next("sendMessage", retry_after=1)
    gate = fake.hold("sendMessage")
    outbox = outbox_for(plugin, store)
    await outbox.admit(intent(1, "later"))
    gate.set()
    await fake.wait_for(lambda: len(fake.method_calls("sendMessage")) == 1)

    async def retried_entry() -> Any:
        while True:
            pending = await OutboxStore(store).pending("telegram")
            if pending and pending[0].last_error is not None:
                return pending[0]
            await fake.wait_for(lambda: True)

    entry = await asyncio.wait_for(retried_entry(), 10)
    assert "429" in (entry.last_error or "")
    assert entry.attempts == 0  # flow control, not a failed attempt
    assert entry.next_attempt_ms - entry.created_ms >= 1000  # retry_after, not the 10 ms backoff
    await asyncio.wait_for(outbox.drained(), 10)
    assert shown(fake) == ["later"]
    assert outbox.statistics().retried == 1
    await outbox.close()


async def test_a_restart_mid_delivery_sends_every_message_once(
    fake: FakeTelegram, tmp_path: Path
) -> None:
    plugin = TelegramPlugin(token=fake.token, api_base_url=fake.url, poll_timeout_s=5)
    await plugin.start(_ignore)
    store = await SQLiteStore.open(tmp_path / "lemon.sqlite3")
    long_text = " ".join(f"w{i}" for i in range(1500))  # two messages
    fake.refuse_call("sendMessage", 2, retry_after=1)  # part 2 of the long answer: rate-limited
    outbox = outbox_for(plugin, store)
    await outbox.admit(intent(1, long_text))
    await outbox.admit(intent(2, "second message"))
    await fake.wait_for(lambda: len(fake.method_calls("sendMessage")) == 2)
    await outbox.close()  # the "daemon" dies with part 2 and message 2 pending
    await store.close()
    assert len(fake.chat(42)) == 1

    store = await SQLiteStore.open(tmp_path / "lemon.sqlite3")
    restarted = outbox_for(plugin, store)
    assert await restarted.start() == 2
    assert not await restarted.admit(intent(1, long_text))  # the same intent: refused
    await asyncio.wait_for(restarted.drained(), 10)
    texts = shown(fake)
    assert len(texts) == 3
    assert " ".join(texts[:2]).split() == long_text.split()
    assert texts[2] == "second message"
    assert all(m.edits <= 1 for m in fake.chat(42))
    await restarted.close()
    await store.close()
    await plugin.stop()


async def test_a_duplicate_intent_is_sent_once(
    fake: FakeTelegram, plugin: TelegramPlugin, store: SQLiteStore
) -> None:
    outbox = outbox_for(plugin, store)
    assert await outbox.admit(intent(1, "once"))
    assert not await outbox.admit(intent(1, "once"))
    await asyncio.wait_for(outbox.drained(), 10)
    assert not await outbox_for(plugin, store).admit(intent(1, "once"))
    assert shown(fake) == ["once"]
    assert outbox.statistics().duplicates == 1
    await outbox.close()


async def test_pending_snapshots_are_superseded_and_the_final_edits_the_slot(
    fake: FakeTelegram, plugin: TelegramPlugin, store: SQLiteStore
) -> None:
    gate = fake.hold("sendMessage")
    outbox = outbox_for(plugin, store)
    snap = IntentKind.STREAM_SNAPSHOT
    await outbox.admit(intent(1, "a", kind=snap, slot="r:answer"))
    await fake.wait_for(lambda: len(fake.method_calls("sendMessage")) == 1)
    await outbox.admit(intent(2, "ab", kind=snap, slot="r:answer"))
    await outbox.admit(intent(3, "abc", kind=snap, slot="r:answer"))
    await outbox.admit(intent(4, "abcd, final", slot="r:answer"))
    gate.set()
    await asyncio.wait_for(outbox.drained(), 10)
    [message] = fake.chat(42)
    assert message.shown == "abcd, final"
    assert message.edits == 1
    assert outbox.statistics().superseded == 2
    await outbox.close()


async def test_each_dispatch_is_observed_once_with_a_bounded_preview(
    fake: FakeTelegram, plugin: TelegramPlugin, store: SQLiteStore
) -> None:
    async with Bus() as bus:
        subscription = bus.subscribe(CHANNELS)
        fake.refuse_next("sendMessage", retry_after=0)
        outbox = outbox_for(plugin, store, bus)
        await outbox.admit(intent(1, "x" * 10_000))
        await asyncio.wait_for(outbox.drained(), 10)
        events = [await asyncio.wait_for(subscription.get(), 5) for _ in range(2)]
        payloads = [e.payload for e in events]
        assert all(isinstance(p, ChannelDelivery) for p in payloads)
        assert [p.ok for p in payloads] == [False, True]
        assert all(p.intent_id == "i1" and p.peer_id == "42" for p in payloads)
        assert all(len(p.text_preview or "") <= 200 for p in payloads)
        assert "429" in (payloads[0].error or "")
        assert outbox.statistics().events_published == 2
        await outbox.close()


class _BrokenBus(Bus):
    def broadcast_event(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the bus backend is down")


async def test_a_failing_bus_never_breaks_a_send(
    fake: FakeTelegram, plugin: TelegramPlugin, store: SQLiteStore
) -> None:
    async with _BrokenBus() as bus:
        outbox = outbox_for(plugin, store, bus)
        await outbox.admit(intent(1, "still sent"))
        await asyncio.wait_for(outbox.drained(), 10)
        assert shown(fake) == ["still sent"]
        assert outbox.statistics().event_failures == 1
        await outbox.close()


async def test_a_permanent_refusal_is_given_up_not_retried(
    fake: FakeTelegram, plugin: TelegramPlugin, store: SQLiteStore
) -> None:
    fake.refuse_next("sendMessage", error="chat not found")
    outbox = outbox_for(plugin, store)
    await outbox.admit(intent(1, "nobody"))
    await outbox.admit(intent(2, "next"))
    await asyncio.wait_for(outbox.drained(), 10)
    stats = outbox.statistics()
    assert stats.given_up == 1
    assert stats.retried == 0
    assert "chat not found" in (stats.last_error or "")
    assert shown(fake) == ["next"]
    await outbox.close()
