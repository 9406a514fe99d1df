"""The idempotency store contract kit: every IdempotencyStore backend must pass these checks.

Subclass :class:`IdempotencyStoreContract` in a test module (class name ``Test...``) and
implement :meth:`IdempotencyStoreContract.open_store`::

    class TestPostgresIdempotency(IdempotencyStoreContract):
        async def open_store(self, directory):
            return await PostgresIdempotencyStore.open(dsn, schema=unique_schema)

``directory`` is the same for every open within one test: a backend must see, after a reopen,
and from several stores open at once, what an earlier open wrote (one SQLite file, one
PostgreSQL schema). Every check passes times explicitly (``now_ms``), so no clock is
involved.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Final

from lemon_core.idempotency import (
    IdempotencyStore,
    MessageBinding,
    Reservation,
    StoredResponse,
    body_fingerprint,
    hash_idempotency_key,
)

__all__ = ["IdempotencyStoreContract"]

_T0: Final = 1_700_000_000_000
_TTL: Final = 86_400_000
_LEASE: Final = 30_000


def _key(raw: str = "key-1", integration: str = "hook") -> str:
    return hash_idempotency_key(integration, raw)


class IdempotencyStoreContract:
    """Behaviour every idempotency store shares. Subclass and implement :meth:`open_store`."""

    async def open_store(self, directory: Path) -> IdempotencyStore:
        raise NotImplementedError("implement open_store() in the backend's contract test class")

    async def _open(self, directory: Path) -> IdempotencyStore:
        store = await self.open_store(directory)
        assert isinstance(store, IdempotencyStore)
        return store

    async def _reservation(
        self,
        store: IdempotencyStore,
        *,
        key: str | None = None,
        run_id: str = "run_1",
        body: bytes = b"{}",
        now_ms: int = _T0,
        integration: str = "hook",
        bind: MessageBinding | None = None,
    ) -> Reservation:
        return await store.reserve(
            key_hash=key or _key(integration=integration),
            integration=integration,
            body_hash=body_fingerprint(body),
            run_id=run_id,
            session_key="agent:default:main",
            now_ms=now_ms,
            ttl_ms=_TTL,
            lease_ms=_LEASE,
            bind=bind,
        )

    async def _reserve(self, store: IdempotencyStore, **options: Any) -> bool:
        """Whether :meth:`_reservation` (same options) created the fence."""
        return (await self._reservation(store, **options)).created

    @staticmethod
    async def _accept(
        store: IdempotencyStore, key_hash: str, run_id: str, *, now_ms: int = _T0
    ) -> None:
        """Complete the pending fence with an empty accepted answer."""
        response = StoredResponse(status=202, body=b"{}")
        await store.complete(key_hash=key_hash, run_id=run_id, response=response, now_ms=now_ms)

    async def test_idempotency_reserve_creates_one_pending_fence_then_finds_it(
        self, tmp_path: Path
    ) -> None:
        store = await self._open(tmp_path)
        try:
            assert await self._reserve(store, run_id="run_1")
            again = await self._reservation(store, run_id="run_2", body=b"other", now_ms=_T0 + 1)
            assert not again.created
            record = again.record
            assert (record.state, record.run_id, record.response) == ("pending", "run_1", None)
            assert record.body_hash == body_fingerprint(b"{}")
            assert record.in_flight(_T0 + _LEASE - 1)
            assert not record.in_flight(_T0 + _LEASE)
        finally:
            await store.close()

    async def test_idempotency_complete_stores_the_exact_response_with_the_fence(
        self, tmp_path: Path
    ) -> None:
        store = await self._open(tmp_path)
        try:
            await self._reserve(store)
            body = b'{"status":"accepted","run_id":"run_1","session_key":"s"}'
            response = StoredResponse(status=202, body=body)
            assert not await store.complete(
                key_hash=_key(), run_id="run_other", response=response, now_ms=_T0 + 1
            )
            assert await store.complete(
                key_hash=_key(), run_id="run_1", response=response, now_ms=_T0 + 1
            )
            record = await store.lookup(_key(), now_ms=_T0 + 2)
            assert record is not None
            assert record.state == "accepted"
            assert record.response == response
            # only a pending fence completes: a second completion changes nothing
            other = StoredResponse(status=202, body=b"{}")
            assert not await store.complete(
                key_hash=_key(), run_id="run_1", response=other, now_ms=_T0 + 3
            )
            again = await store.lookup(_key(), now_ms=_T0 + 4)
            assert again is not None
            assert again.response == response
        finally:
            await store.close()

    async def test_idempotency_a_message_binding_is_written_with_the_reservation(
        self, tmp_path: Path
    ) -> None:
        """A message bound to one key refuses another key (nothing written), keeps its key,
        and expires on its own ttl."""
        bind = MessageBinding(key_hash=_key("msg", "hook#m"), integration="hook#m", ttl_ms=1_000)
        store = await self._open(tmp_path)
        try:

            async def reserve(raw: str, run_id: str, now_ms: int = _T0) -> Reservation:
                return await self._reservation(
                    store, key=_key(raw), run_id=run_id, now_ms=now_ms, bind=bind
                )

            first = await reserve("key-1", "run_1")
            assert (first.created, first.bound, first.message_reused) == (True, True, False)
            other = await reserve("key-2", "run_2")
            assert (other.created, other.message_reused) == (False, True)
            assert other.record.body_hash == _key("key-1")
            assert await store.lookup(_key("key-2"), now_ms=_T0) is None  # nothing written
            same = await reserve("key-1", "run_3")
            assert (same.created, same.bound, same.message_reused) == (False, False, False)
            assert same.record.run_id == "run_1"
            later = await reserve("key-2", "run_4", now_ms=_T0 + 1_000)  # the binding expired
            assert (later.created, later.bound) == (True, True)
        finally:
            await store.close()

    async def test_idempotency_complete_after_the_lease_changes_nothing(
        self, tmp_path: Path
    ) -> None:
        """Past its lease a pending fence already answers ``outcome_unknown`` to replays; a
        late completion must not turn it into an acceptance (one key, one answer)."""
        store = await self._open(tmp_path)
        try:
            await self._reserve(store)
            late = StoredResponse(status=202, body=b'{"status":"accepted"}')
            assert not await store.complete(
                key_hash=_key(), run_id="run_1", response=late, now_ms=_T0 + _LEASE
            )
            record = await store.lookup(_key(), now_ms=_T0 + _LEASE)
            assert record is not None
            assert (record.state, record.response) == ("pending", None)
            assert not record.in_flight(_T0 + _LEASE)
            assert await store.mark_unknown(key_hash=_key(), run_id="run_1", now_ms=_T0 + _LEASE)
        finally:
            await store.close()

    async def test_idempotency_data_survives_a_reopen(self, tmp_path: Path) -> None:
        store = await self._open(tmp_path)
        response = StoredResponse(status=202, body=b'{"a":1}')
        try:
            await self._reserve(store)
            await store.complete(key_hash=_key(), run_id="run_1", response=response, now_ms=_T0)
        finally:
            await store.close()
        reopened = await self._open(tmp_path)
        try:
            record = await reopened.lookup(_key(), now_ms=_T0 + 1)
            assert record is not None
            assert record.response == response
            assert await reopened.schema_version() >= 2
        finally:
            await reopened.close()

    async def test_idempotency_release_frees_the_key_and_mark_unknown_burns_it(
        self, tmp_path: Path
    ) -> None:
        store = await self._open(tmp_path)
        try:
            await self._reserve(store)
            assert not await store.release(key_hash=_key(), run_id="run_other")
            assert await store.release(key_hash=_key(), run_id="run_1")
            assert await store.lookup(_key(), now_ms=_T0) is None
            assert await self._reserve(store, run_id="run_2")
            assert await store.mark_unknown(key_hash=_key(), run_id="run_2", now_ms=_T0 + 1)
            assert not await store.release(key_hash=_key(), run_id="run_2")  # not pending
            record = await store.lookup(_key(), now_ms=_T0 + 2)
            assert record is not None
            assert (record.state, record.run_id) == ("outcome_unknown", "run_2")
        finally:
            await store.close()

    async def test_idempotency_recover_makes_pending_fences_outcome_unknown(
        self, tmp_path: Path
    ) -> None:
        store = await self._open(tmp_path)
        try:
            await self._reserve(store, key=_key("a"), run_id="run_a")
            await self._reserve(store, key=_key("b"), run_id="run_b")
            await self._accept(store, _key("b"), "run_b")
            assert await store.recover(now_ms=_T0 + 1) == 1
            a = await store.lookup(_key("a"), now_ms=_T0 + 2)
            b = await store.lookup(_key("b"), now_ms=_T0 + 2)
            assert a is not None
            assert b is not None
            assert (a.state, b.state) == ("outcome_unknown", "accepted")
        finally:
            await store.close()

    async def test_idempotency_an_expired_fence_is_absent_and_replaced_on_reserve(
        self, tmp_path: Path
    ) -> None:
        store = await self._open(tmp_path)
        try:
            await self._reserve(store, run_id="run_1")
            await self._accept(store, _key(), "run_1")
            assert await store.lookup(_key(), now_ms=_T0 + _TTL - 1) is not None
            assert await store.lookup(_key(), now_ms=_T0 + _TTL) is None
            assert await self._reserve(store, run_id="run_2", now_ms=_T0 + _TTL)
            record = await store.lookup(_key(), now_ms=_T0 + _TTL + 1)
            assert record is not None
            assert (record.run_id, record.state, record.response) == ("run_2", "pending", None)
        finally:
            await store.close()

    async def test_idempotency_sweep_removes_expired_pairs_and_advances_the_watermark(
        self, tmp_path: Path
    ) -> None:
        store = await self._open(tmp_path)
        try:
            assert await store.watermark() == 0
            await self._reserve(store, key=_key("old"), run_id="run_old", now_ms=_T0)
            await self._accept(store, _key("old"), "run_old")
            await self._reserve(store, key=_key("new"), run_id="run_new", now_ms=_T0 + 1000)
            report = await store.sweep(now_ms=_T0 + _TTL)
            assert (report.responses_removed, report.fences_removed) == (1, 1)
            assert report.watermark_ms == _T0 + _TTL
            assert await store.watermark() == _T0 + _TTL
            assert [r.run_id for r in await store.records()] == ["run_new"]
            # the watermark never moves back
            assert (await store.sweep(now_ms=_T0)).watermark_ms == _T0 + _TTL
        finally:
            await store.close()

    async def test_idempotency_records_are_newest_first_and_never_hold_the_raw_key(
        self, tmp_path: Path
    ) -> None:
        store = await self._open(tmp_path)
        try:
            await self._reserve(store, key=_key("secret-key-a"), run_id="run_a", now_ms=_T0)
            await self._reserve(
                store,
                key=_key("secret-key-b", "other"),
                integration="other",
                run_id="run_b",
                now_ms=_T0 + 1,
            )
            records = await store.records()
            assert [r.run_id for r in records] == ["run_b", "run_a"]
            assert [r.run_id for r in await store.records(integration="hook")] == ["run_a"]
            assert [r.run_id for r in await store.records(limit=1)] == ["run_b"]
            assert all("secret-key" not in str(r.to_dict()) for r in records)
        finally:
            await store.close()

    async def test_idempotency_concurrent_reservations_of_one_key_create_exactly_one(
        self, tmp_path: Path
    ) -> None:
        store = await self._open(tmp_path)
        try:
            created = await asyncio.gather(
                *(self._reserve(store, run_id=f"run_{i}") for i in range(100))
            )
            assert sum(created) == 1
            record = await store.lookup(_key(), now_ms=_T0)
            assert record is not None
            assert record.run_id == f"run_{created.index(True)}"
        finally:
            await store.close()

    async def test_idempotency_concurrent_reservations_across_stores_create_exactly_one(
        self, tmp_path: Path
    ) -> None:
        # four stores on the same data (four connections, or four daemons' pools): 100
        # reservations of one key, started together, and exactly one creates the fence
        stores = [await self._open(tmp_path) for _ in range(4)]
        try:
            start = asyncio.Event()

            async def reserve(i: int) -> tuple[bool, str | None]:
                await start.wait()
                reservation = await self._reservation(
                    stores[i % 4], key=_key("shared"), run_id=f"run_{i}"
                )
                return reservation.created, reservation.record.run_id

            tasks = [asyncio.ensure_future(reserve(i)) for i in range(100)]
            await asyncio.sleep(0)
            start.set()
            results = await asyncio.gather(*tasks)
            winners = [run_id for created, run_id in results if created]
            assert len(winners) == 1
            assert {run_id for _, run_id in results} == set(winners)  # every loser saw it
            for store in stores:
                record = await store.lookup(_key("shared"), now_ms=_T0)
                assert record is not None
                assert record.run_id == winners[0]
        finally:
            for store in stores:
                await store.close()

    async def test_idempotency_a_concurrent_replacement_of_an_expired_fence_has_one_winner(
        self, tmp_path: Path
    ) -> None:
        stores = [await self._open(tmp_path) for _ in range(2)]
        try:
            await self._reserve(stores[0], run_id="run_old")
            later = _T0 + _TTL
            results = await asyncio.gather(
                *(
                    self._reserve(stores[i % 2], run_id=f"run_new_{i}", now_ms=later)
                    for i in range(20)
                )
            )
            assert sum(results) == 1
            record = await stores[1].lookup(_key(), now_ms=later)
            assert record is not None
            assert record.run_id == f"run_new_{results.index(True)}"
        finally:
            for store in stores:
                await store.close()

    async def test_idempotency_one_message_raced_under_many_keys_binds_one_key(
        self, tmp_path: Path
    ) -> None:
        # one signed message resent under 20 different keys at once, over two stores: one key
        # binds it and is reserved; every other is refused with nothing written
        bind = MessageBinding(key_hash=_key("msg", "hook#m"), integration="hook#m", ttl_ms=_TTL)
        stores = [await self._open(tmp_path) for _ in range(2)]
        try:
            results = await asyncio.gather(
                *(
                    self._reservation(
                        stores[i % 2], key=_key(f"key-{i}"), run_id=f"run_{i}", bind=bind
                    )
                    for i in range(20)
                )
            )
            winners = [i for i, r in enumerate(results) if r.created]
            assert len(winners) == 1
            assert results[winners[0]].bound
            assert all(r.message_reused for i, r in enumerate(results) if i != winners[0])
            for i in range(20):
                found = await stores[0].lookup(_key(f"key-{i}"), now_ms=_T0)
                assert (found is not None) == (i == winners[0])
        finally:
            for store in stores:
                await store.close()
