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

The legacy raw-key migration and the failure checks also need the backend's own SQL: implement
:meth:`IdempotencyStoreContract.write_legacy_rows`, :meth:`~IdempotencyStoreContract.
legacy_rows`, :meth:`~IdempotencyStoreContract.fence_rows` and :meth:`~IdempotencyStoreContract.
set_fault` (real faults: triggers in the backend); those checks are skipped when they are not.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Final, Literal

import pytest

from lemon_core.idempotency import (
    IdempotencyStore,
    IdempotencyStoreError,
    MessageBinding,
    Reservation,
    StoredResponse,
    body_fingerprint,
    hash_idempotency_key,
)

__all__ = ["Fault", "IdempotencyStoreContract"]

Fault = Literal["raw_delete", "fence_delete", "legacy_writer"]
"""A fault :meth:`IdempotencyStoreContract.set_fault` injects in the backend's data:

* ``raw_delete``: deleting a legacy raw row raises an error naming ``injected``;
* ``fence_delete``: deleting a fence raises an error naming ``injected`` (after the snapshot
  deletes of the same transaction);
* ``legacy_writer``: inserting a fence updates every legacy raw row to ``state = 'completed'``,
  ``run_id = 'run-late'``, ``response_json = '{"late":true}'`` (a legacy writer racing the
  migration)."""

_T0: Final = 1_700_000_000_000
_TTL: Final = 86_400_000
_LEASE: Final = 30_000


def _key(raw: str = "key-1", integration: str = "hook") -> str:
    return hash_idempotency_key(integration, raw)


class IdempotencyStoreContract:
    """Behaviour every idempotency store shares. Subclass and implement :meth:`open_store`."""

    async def open_store(self, directory: Path) -> IdempotencyStore:
        raise NotImplementedError("implement open_store() in the backend's contract test class")

    async def write_legacy_rows(self, directory: Path, rows: list[tuple[object, ...]]) -> None:
        """Create the schema-1 raw-key table in the data of ``directory`` (before any store is
        open) and insert ``rows`` (integration, raw key, state, run id, session key, response
        JSON, created). Optional: the legacy checks are skipped without it."""
        raise NotImplementedError

    async def legacy_rows(self, directory: Path) -> list[tuple[object, ...]]:
        """The raw rows left, as ``(idempotency_key, state)``."""
        raise NotImplementedError

    async def fence_rows(self, directory: Path) -> list[tuple[object, ...]]:
        """Every column of every durable fence row, as stored."""
        raise NotImplementedError

    async def set_fault(self, directory: Path, fault: Fault, *, on: bool) -> None:
        """Inject ``fault`` (see :data:`Fault`) in the data of ``directory``, or remove it."""
        raise NotImplementedError

    async def _legacy(self, directory: Path, rows: list[tuple[object, ...]]) -> None:
        try:
            await self.write_legacy_rows(directory, rows)
        except NotImplementedError:
            pytest.skip("the backend's contract test implements no legacy hooks")

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

    async def test_idempotency_mark_vanished_turns_the_runs_fence_outcome_unknown(
        self, tmp_path: Path
    ) -> None:
        store = await self._open(tmp_path)
        try:
            await self._reserve(store, key=_key("a"), run_id="run_a")
            await self._accept(store, _key("a"), "run_a")
            await self._reserve(store, key=_key("b"), run_id="run_b")
            await self._accept(store, _key("b"), "run_b")
            # another integration's run id, or an unknown one, changes nothing
            assert await store.mark_vanished(run_id="run_a", integration="other", now_ms=_T0) == 0
            assert await store.mark_vanished(run_id="run_x", integration="hook", now_ms=_T0) == 0
            assert await store.mark_vanished(run_id="run_a", integration="hook", now_ms=_T0) == 1
            assert await store.mark_vanished(run_id="run_a", integration="hook", now_ms=_T0) == 0
            a = await store.lookup(_key("a"), now_ms=_T0 + 1)
            b = await store.lookup(_key("b"), now_ms=_T0 + 1)
            assert a is not None
            assert b is not None
            assert (a.state, b.state) == ("outcome_unknown", "accepted")
            assert a.response is not None  # the exact answer stays; replays are uncertain now
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

    # -- the legacy raw-key migration and failures (backend hooks) ----------------------------

    async def test_idempotency_legacy_rows_migrate_to_hashed_fences_with_exact_responses(
        self, tmp_path: Path
    ) -> None:
        exact = '{"run_id":"run-legacy-1","session_key":"agent:default:main","mode":"async"}'
        await self._legacy(
            tmp_path,
            [
                ("hook", "done-key", "completed", "run-legacy-1", "agent:default:main", exact, _T0),
                ("hook", "sent-key", "submitted", "run-legacy-2", "agent:default:main", None, _T0),
                ("hook", "ran-key", "pending", "run-legacy-3", None, None, _T0),
                ("hook", "ambiguous-key", "pending", None, None, None, _T0),
            ],
        )
        store = await self._open(tmp_path)
        try:
            assert await store.schema_version() == 2
            report = await store.migrate_legacy(now_ms=_T0 + 10, ttl_ms=_TTL)
            assert (report.seen, report.written, report.deleted, report.kept) == (4, 4, 4, 0)
            assert await self.legacy_rows(tmp_path) == []
            done = await store.lookup(_key("done-key"), now_ms=_T0 + 11)
            assert done is not None
            assert (done.state, done.legacy, done.body_hash) == ("accepted", True, None)
            assert done.response == StoredResponse(status=202, body=exact.encode())
            sent = await store.lookup(_key("sent-key"), now_ms=_T0 + 11)
            assert sent is not None  # accepted, but no exact response: never a generic success
            assert (sent.state, sent.run_id, sent.response) == ("accepted", "run-legacy-2", None)
            ran = await store.lookup(_key("ran-key"), now_ms=_T0 + 11)
            assert ran is not None
            assert (ran.state, ran.run_id) == ("outcome_unknown", "run-legacy-3")
            ambiguous = await store.lookup(_key("ambiguous-key"), now_ms=_T0 + 11)
            assert ambiguous is not None  # a fence, not an invented execution identity
            assert (ambiguous.state, ambiguous.run_id) == ("pending", None)
            assert ambiguous.in_flight(_T0 + _TTL - 1)
            assert await store.recover(now_ms=_T0 + 12) == 0  # stays ambiguous
            rows = await self.fence_rows(tmp_path)
            assert len(rows) == 4
            assert all("-key" not in str(row) for row in rows)  # no raw key in a durable record
            again = await store.migrate_legacy(now_ms=_T0 + 20, ttl_ms=_TTL)  # finds nothing
            assert again.seen == 0
        finally:
            await store.close()

    async def test_idempotency_a_failed_raw_delete_keeps_the_raw_row_after_its_copy(
        self, tmp_path: Path
    ) -> None:
        """A partial migration: the hashed fence is durable first; the raw row stays, and the
        copy cannot authorise a replay (no invented response)."""
        await self._legacy(
            tmp_path, [("hook", "k", "submitted", "run-9", "agent:default:main", None, _T0)]
        )
        store = await self._open(tmp_path)
        try:
            await self.set_fault(tmp_path, "raw_delete", on=True)
            with pytest.raises(IdempotencyStoreError, match="injected"):
                await store.migrate_legacy(now_ms=_T0, ttl_ms=_TTL)
            assert await self.legacy_rows(tmp_path) == [("k", "submitted")]  # the raw row stays
            fence = await store.lookup(_key("k"), now_ms=_T0 + 1)
            assert fence is not None  # the hashed fence was written first
            assert (fence.state, fence.response) == ("accepted", None)  # no exact response
            await self.set_fault(tmp_path, "raw_delete", on=False)
            report = await store.migrate_legacy(now_ms=_T0 + 2, ttl_ms=_TTL)
            assert (report.deleted, report.kept) == (1, 0)
        finally:
            await store.close()

    async def test_idempotency_a_raw_row_changed_after_its_copy_is_kept_and_recopied(
        self, tmp_path: Path
    ) -> None:
        await self._legacy(tmp_path, [("hook", "k", "pending", None, None, None, _T0)])
        store = await self._open(tmp_path)
        try:
            # a legacy writer completes the raw row right after its copy is written
            await self.set_fault(tmp_path, "legacy_writer", on=True)
            report = await store.migrate_legacy(now_ms=_T0, ttl_ms=_TTL)
            assert (report.deleted, report.kept) == (0, 1)  # the conditional delete refused
            fence = await store.lookup(_key("k"), now_ms=_T0 + 1)
            assert fence is not None
            assert (fence.state, fence.run_id, fence.response) == ("pending", None, None)
            await self.set_fault(tmp_path, "legacy_writer", on=False)
            report = await store.migrate_legacy(now_ms=_T0 + 2, ttl_ms=_TTL)
            assert (report.written, report.deleted) == (1, 1)
            fence = await store.lookup(_key("k"), now_ms=_T0 + 3)
            assert fence is not None
            assert (fence.state, fence.run_id) == ("accepted", "run-late")
            assert fence.response == StoredResponse(status=202, body=b'{"late":true}')
        finally:
            await store.close()

    async def test_idempotency_a_reservation_migrates_its_own_legacy_row_first(
        self, tmp_path: Path
    ) -> None:
        exact = '{"run_id":"run-old"}'
        await self._legacy(tmp_path, [("hook", "k", "completed", "run-old", None, exact, _T0)])
        store = await self._open(tmp_path)
        try:
            reservation = await store.reserve(
                key_hash=_key("k"),
                integration="hook",
                body_hash=body_fingerprint(b"{}"),
                run_id="run-new",
                session_key="s",
                now_ms=_T0 + 5,
                ttl_ms=_TTL,
                lease_ms=1000,
                legacy_key="k",
            )
            assert not reservation.created
            assert reservation.record.run_id == "run-old"
            assert reservation.record.response == StoredResponse(status=202, body=exact.encode())
            assert await self.legacy_rows(tmp_path) == []
        finally:
            await store.close()

    async def test_idempotency_a_failed_sweep_removes_nothing_and_keeps_the_watermark(
        self, tmp_path: Path
    ) -> None:
        store = await self._open(tmp_path)
        try:
            try:
                await self.set_fault(tmp_path, "fence_delete", on=False)
            except NotImplementedError:
                pytest.skip("the backend's contract test implements no fault hooks")
            await store.reserve(
                key_hash=_key("k"),
                integration="hook",
                body_hash="b",
                run_id="run-1",
                session_key="s",
                now_ms=_T0,
                ttl_ms=1000,
                lease_ms=1000,
            )
            response = StoredResponse(status=202, body=b'{"ok":1}')
            await store.complete(key_hash=_key("k"), run_id="run-1", response=response, now_ms=_T0)
            # the fence delete fails after the snapshot delete, in the same transaction
            await self.set_fault(tmp_path, "fence_delete", on=True)
            with pytest.raises(IdempotencyStoreError, match="injected"):
                await store.sweep(now_ms=_T0 + 5000)
            assert await store.watermark() == 0
            assert [r.response for r in await store.records()] == [response]  # snapshot kept
            assert await store.lookup(_key("k"), now_ms=_T0 + 5000) is None  # expired: no replay
            await self.set_fault(tmp_path, "fence_delete", on=False)
            report = await store.sweep(now_ms=_T0 + 5000)
            assert (report.responses_removed, report.fences_removed) == (1, 1)
            assert await store.watermark() == _T0 + 5000
        finally:
            await store.close()
