"""OutboxStore: the same semantics on the memory and SQLite backends (admission order,
duplicate refusal across instances, slot message ids, completion, the pending bound)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lemon_core.store import OutboxStore, Store, StoreValueError
from lemon_infra import MemoryStore, SQLiteStore


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    backend: Store = (
        MemoryStore() if request.param == "memory" else await SQLiteStore.open(tmp_path / "s.db")
    )
    yield backend
    await backend.close()


async def admit(outbox: OutboxStore, intent: str, slot: str = "s") -> object:
    return await outbox.admit(
        channel_id="telegram",
        intent_id=intent,
        kind="final_text",
        slot=slot,
        peer_id="42",
        payloads=({"text": intent},),
        text_preview=intent,
    )


async def test_entries_are_pending_in_admission_order_until_completed(store: Store) -> None:
    outbox = OutboxStore(store)
    for name in ("b", "a", "c"):
        assert await admit(outbox, name) is not None
    pending = await outbox.pending("telegram")
    assert [e.intent_id for e in pending] == ["b", "a", "c"]
    assert await outbox.pending("other") == []
    await outbox.complete(pending[0])
    assert [e.intent_id for e in await outbox.pending("telegram")] == ["a", "c"]


async def test_an_intent_is_admitted_once_even_by_another_instance(store: Store) -> None:
    assert await admit(OutboxStore(store), "x") is not None
    assert await admit(OutboxStore(store), "x") is None
    [entry] = await OutboxStore(store).pending("telegram")
    await OutboxStore(store).complete(entry)
    assert await admit(OutboxStore(store), "x") is None  # completed: still refused


async def test_slot_message_ids_are_recorded_part_by_part(store: Store) -> None:
    outbox = OutboxStore(store)
    assert await outbox.slot_messages("telegram", "r:answer") == []
    await outbox.record_slot_message("telegram", "r:answer", 0, "10")
    await outbox.record_slot_message("telegram", "r:answer", 1, "11")
    await outbox.record_slot_message("telegram", "r:answer", 0, "12")
    assert await outbox.slot_messages("telegram", "r:answer") == ["12", "11"]
    with pytest.raises(StoreValueError, match="cannot be recorded yet"):
        await outbox.record_slot_message("telegram", "r:answer", 5, "13")


async def test_admission_beyond_the_pending_bound_is_refused(store: Store) -> None:
    outbox = OutboxStore(store, max_pending=2)
    await admit(outbox, "1")
    await admit(outbox, "2")
    with pytest.raises(StoreValueError, match="holds 2 pending messages"):
        await admit(outbox, "3")
    [first, _] = await outbox.pending("telegram")
    await outbox.complete(first)
    assert await admit(outbox, "3") is not None
    with pytest.raises(StoreValueError):  # a new instance counts the table itself
        await admit(OutboxStore(store, max_pending=2), "4")
