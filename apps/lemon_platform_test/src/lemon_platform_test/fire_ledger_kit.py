"""The fire ledger contract kit: every FireLedger backend must pass these checks.

Subclass :class:`FireLedgerContract` in a test module (class name ``Test...``) and implement
:meth:`FireLedgerContract.open_ledger` (a ledger on the shared data of this test: each call is
"another daemon" on the same SQLite file or PostgreSQL schema; the memory backend returns the
same instance) and :meth:`FireLedgerContract.expire` (make a fire's lease expired by the
ledger keeper's clock)::

    class TestPostgresFires(FireLedgerContract):
        async def open_ledger(self):
            return PostgresFireLedger(await PostgresStore.open(dsn, schema=self.schema))
"""

from __future__ import annotations

import asyncio
from typing import Final

import pytest

from lemon_core.fire_ledger import Fire, FireLedger, FireWrite
from lemon_core.store.errors import StoreValueError

__all__ = ["FireLedgerContract"]

_DUE: Final = 1_767_225_600_000  # 2026-01-01T00:00:00Z
_LEASE: Final = 60_000


class FireLedgerContract:
    """Behaviour every fire ledger shares."""

    async def open_ledger(self) -> FireLedger:
        raise NotImplementedError("implement open_ledger() in the backend's contract test class")

    async def expire(self, fire: Fire) -> None:
        raise NotImplementedError("implement expire() in the backend's contract test class")

    async def _open(self) -> FireLedger:
        ledger = await self.open_ledger()
        assert isinstance(ledger, FireLedger)
        return ledger

    async def test_a_due_time_is_claimed_once(self) -> None:
        a, b = await self._open(), await self._open()
        fire = await a.claim("job-1", _DUE, "daemon-a", lease_ms=_LEASE)
        assert fire is not None
        assert (fire.owner, fire.fence, fire.status, fire.done) == ("daemon-a", 1, "claimed", False)
        assert fire.lease_until_ms > 0
        assert await b.claim("job-1", _DUE, "daemon-b", lease_ms=_LEASE) is None
        assert await a.claim("job-1", _DUE, "daemon-a", lease_ms=_LEASE) is None
        other = await b.claim("job-1", _DUE + 1, "daemon-b", lease_ms=_LEASE)
        assert other is not None
        assert other.owner == "daemon-b"
        seen = await b.get("job-1", _DUE)
        assert seen is not None
        assert (seen.owner, seen.fence) == ("daemon-a", 1)
        assert await b.get("job-1", _DUE + 2) is None

    async def test_racing_claimers_never_both_win(self) -> None:
        ledgers = [await self._open() for _ in range(6)]
        gate = asyncio.Event()

        async def contend(i: int, ledger: FireLedger) -> Fire | None:
            await gate.wait()
            return await ledger.claim("job-race", _DUE, f"d{i}", lease_ms=_LEASE)

        tasks = [asyncio.create_task(contend(i, x)) for i, x in enumerate(ledgers)]
        await asyncio.sleep(0)
        gate.set()
        won = [f for f in await asyncio.gather(*tasks) if f is not None]
        assert len(won) == 1
        stored = await ledgers[0].get("job-race", _DUE)
        assert stored is not None
        assert stored.owner == won[0].owner

    async def test_a_batched_claim_answers_each_due_time_as_a_single_claim_would(self) -> None:
        a, b = await self._open(), await self._open()
        assert await a.claim_many([], "daemon-a", lease_ms=_LEASE) == []
        taken = await b.claim("job-2", _DUE, "daemon-b", lease_ms=_LEASE)
        assert taken is not None
        keys = [("job-3", _DUE), ("job-2", _DUE), ("job-1", _DUE), ("job-1", _DUE + 1)]
        answers = await a.claim_many(keys, "daemon-a", lease_ms=_LEASE)
        assert [None if f is None else (f.job_id, f.due_at_ms) for f in answers] == [
            ("job-3", _DUE),
            None,  # daemon-b's: the others are claimed all the same
            ("job-1", _DUE),
            ("job-1", _DUE + 1),
        ]
        for fire in answers:
            if fire is None:
                continue
            assert (fire.owner, fire.fence, fire.status, fire.done) == (
                "daemon-a",
                1,
                "claimed",
                False,
            )
            assert fire.lease_until_ms > 0
            assert await b.get(fire.job_id, fire.due_at_ms) == fire
            assert await b.claim(fire.job_id, fire.due_at_ms, "daemon-b", lease_ms=_LEASE) is None
        assert await b.claim_many(keys, "daemon-b", lease_ms=_LEASE) == [None] * 4
        # A batched claim's fire is fenced like any other.
        first = answers[0]
        assert first is not None
        submitted = await a.record(first, status="submitted", run_id="run-3")
        assert submitted is not None
        assert submitted.fence == 1

    async def test_batched_and_single_claimers_never_both_win(self) -> None:
        """Daemons claiming overlapping batches (in opposite orders) race daemons claiming the
        same due times one by one: each due time has exactly one owner, the stored one."""
        ledgers = [await self._open() for _ in range(6)]
        keys = [(f"job-{n}", _DUE + k) for n in range(12) for k in range(2)]
        gate = asyncio.Event()

        async def batched(i: int, ledger: FireLedger) -> list[Fire | None]:
            order = keys if i % 2 == 0 else keys[::-1]
            await gate.wait()
            return await ledger.claim_many(order, f"batch-{i}", lease_ms=_LEASE)

        async def single(i: int, ledger: FireLedger) -> list[Fire | None]:
            await gate.wait()
            won = []
            for job_id, due in keys[i % 2 :: 2] + keys[(i + 1) % 2 :: 2]:
                won.append(await ledger.claim(job_id, due, f"single-{i}", lease_ms=_LEASE))
            return won

        tasks = [
            asyncio.create_task(batched(i, x) if i < 3 else single(i, x))
            for i, x in enumerate(ledgers)
        ]
        await asyncio.sleep(0)
        gate.set()
        won = [f for answers in await asyncio.gather(*tasks) for f in answers if f is not None]
        assert sorted((f.job_id, f.due_at_ms) for f in won) == sorted(keys)
        for fire in won:
            stored = await ledgers[0].get(fire.job_id, fire.due_at_ms)
            assert stored is not None
            assert (stored.owner, stored.fence) == (fire.owner, 1)

    async def test_a_bad_batch_claims_nothing(self) -> None:
        ledger = await self._open()
        with pytest.raises(StoreValueError, match="twice"):
            await ledger.claim_many([("job", _DUE), ("job", _DUE)], "a", lease_ms=_LEASE)
        with pytest.raises(StoreValueError, match="due_at_ms"):
            await ledger.claim_many([("job", _DUE), ("job", -1)], "a", lease_ms=_LEASE)
        with pytest.raises(StoreValueError, match="pair"):
            await ledger.claim_many([("job", _DUE), "job"], "a", lease_ms=_LEASE)  # type: ignore[list-item]  # bad input on purpose
        with pytest.raises(StoreValueError, match="lease_ms"):
            await ledger.claim_many([("job", _DUE)], "a", lease_ms=0)
        assert await ledger.get("job", _DUE) is None

    async def test_batched_records_are_fenced_each_as_a_single_record(self) -> None:
        a, b = await self._open(), await self._open()
        assert await a.record_many([]) == []
        fires = await a.claim_many([(f"job-{n}", _DUE) for n in range(4)], "a", lease_ms=_LEASE)
        assert all(f is not None for f in fires)
        live, taken, done, last = (f for f in fires if f is not None)
        await self.expire(taken)
        renewed = [await a.renew(f, lease_ms=_LEASE) for f in (live, done, last)]
        assert all(f is not None for f in renewed)  # the clock may have expired them all
        live, done, last = (f for f in renewed if f is not None)
        (successor,) = await b.take_over_expired("b", lease_ms=_LEASE)
        assert successor.job_id == taken.job_id
        finished = await a.record(done, status="completed")
        assert finished is not None
        answers = await a.record_many(
            [
                FireWrite(fire=live, status="submitted", run_id="run-0"),
                FireWrite(fire=taken, status="submitted", run_id="run-1"),  # fenced out
                FireWrite(fire=done, status="failed"),  # already done
                FireWrite(fire=last, status="completed", run_id="run-3", outcome="ok"),
            ]
        )
        assert [None if f is None else (f.job_id, f.status) for f in answers] == [
            ("job-0", "submitted"),
            None,
            None,
            ("job-3", "completed"),
        ]
        submitted, _, _, completed = answers
        assert submitted is not None
        assert completed is not None
        assert (submitted.run_id, submitted.fence, submitted.done) == ("run-0", 1, False)
        assert submitted.lease_until_ms == live.lease_until_ms  # in flight: the lease stays
        assert (completed.run_id, completed.outcome, completed.done) == ("run-3", "ok", True)
        assert completed.lease_until_ms == 0  # terminal: released
        assert await b.get("job-1", _DUE) == successor  # the refused write changed nothing
        again = await b.get("job-2", _DUE)
        assert again is not None
        assert again.status == "completed"
        assert await b.get("job-0", _DUE) == submitted

    async def test_a_batched_record_never_lands_after_a_takeover(self) -> None:
        """The former owner's batched records race another daemon's takeover of the same
        (expired) fires: a record that was answered landed before the takeover, one refused
        was fenced out by it; no fire has both or neither."""
        a, b = await self._open(), await self._open()
        keys = [(f"job-{n}", _DUE) for n in range(10)]
        fires = [f for f in await a.claim_many(keys, "a", lease_ms=_LEASE) if f is not None]
        assert len(fires) == len(keys)
        for fire in fires:
            await self.expire(fire)
        gate = asyncio.Event()

        async def write() -> list[Fire | None]:
            await gate.wait()
            return await a.record_many(
                [FireWrite(fire=f, status="submitted", run_id=f"run-{f.job_id}") for f in fires]
            )

        async def take() -> list[Fire]:
            await gate.wait()
            return await b.take_over_expired("b", lease_ms=_LEASE, limit=len(keys))

        tasks = (asyncio.create_task(write()), asyncio.create_task(take()))
        await asyncio.sleep(0)
        gate.set()
        written, taken = await asyncio.gather(*tasks)
        took = {f.job_id: f for f in taken}
        for fire, answer in zip(fires, written, strict=True):
            stored = await b.get(fire.job_id, fire.due_at_ms)
            assert stored is not None
            if answer is None:  # fenced out: the takeover came first and has it
                assert fire.job_id in took
                assert took[fire.job_id].status == "claimed"
                assert (stored.owner, stored.fence, stored.status) == ("b", 2, "claimed")
            else:  # landed first; a takeover after it sees the record
                assert answer.fence == 1
                assert stored.status == "submitted"
                if fire.job_id in took:
                    assert took[fire.job_id].status == "submitted"

    async def test_a_bad_batch_of_records_writes_nothing(self) -> None:
        ledger = await self._open()
        fire = await ledger.claim("job", _DUE, "a", lease_ms=_LEASE)
        assert fire is not None
        with pytest.raises(StoreValueError, match="twice"):
            await ledger.record_many(
                [FireWrite(fire=fire, status="submitted"), FireWrite(fire=fire, status="failed")]
            )
        with pytest.raises(StoreValueError, match="status"):
            await ledger.record_many(
                [FireWrite(fire=fire, status="submitted"), FireWrite(fire=fire, status="bogus")]
            )
        with pytest.raises(StoreValueError, match="FireWrite"):
            await ledger.record_many([fire])  # type: ignore[list-item]  # bad input on purpose
        stored = await ledger.get("job", _DUE)
        assert stored is not None
        assert stored.status == "claimed"

    async def test_fenced_records_and_the_terminal_status_releases(self) -> None:
        ledger = await self._open()
        fire = await ledger.claim("job-1", _DUE, "a", lease_ms=_LEASE)
        assert fire is not None
        submitted = await ledger.record(fire, status="submitted", run_id="run-1")
        assert submitted is not None
        assert (submitted.status, submitted.run_id) == ("submitted", "run-1")
        done = await ledger.record(submitted, status="completed", outcome="ok")
        assert done is not None
        assert (done.status, done.run_id, done.outcome, done.done) == (
            "completed",
            "run-1",
            "ok",
            True,
        )
        assert done.lease_until_ms == 0
        # A done fire is never written again, nor renewed, nor taken over.
        assert await ledger.record(done, status="failed") is None
        assert await ledger.renew(done, lease_ms=_LEASE) is None
        await self.expire(done)
        assert await ledger.take_over_expired("b", lease_ms=_LEASE) == []
        again = await ledger.get("job-1", _DUE)
        assert again is not None
        assert again.status == "completed"

    async def test_a_live_owner_renews_and_is_not_taken_over(self) -> None:
        a, b = await self._open(), await self._open()
        fire = await a.claim("job-1", _DUE, "a", lease_ms=_LEASE)
        assert fire is not None
        renewed = await a.renew(fire, lease_ms=2 * _LEASE)
        assert renewed is not None
        assert renewed.fence == fire.fence
        assert renewed.lease_until_ms >= fire.lease_until_ms
        assert await b.take_over_expired("b", lease_ms=_LEASE) == []

    async def test_takeover_after_expiry_fences_the_former_owner(self) -> None:
        a, b = await self._open(), await self._open()
        old = await a.claim("job-1", _DUE, "a", lease_ms=_LEASE)
        assert old is not None
        old = await a.record(old, status="submitted", run_id="run-1")
        assert old is not None
        await self.expire(old)  # the owner stopped renewing (paused, partitioned, dead)
        taken = await b.take_over_expired("b", lease_ms=_LEASE)
        assert [(f.job_id, f.due_at_ms, f.owner, f.fence) for f in taken] == [
            ("job-1", _DUE, "b", old.fence + 1)
        ]
        assert taken[0].run_id == "run-1"  # the successor sees the run to re-submit or await
        assert taken[0].status == "submitted"
        # The former owner wakes: its renewal and its writes match nothing.
        assert await a.renew(old, lease_ms=_LEASE) is None
        assert await a.record(old, status="completed", outcome="late") is None
        finished = await b.record(taken[0], status="interrupted", outcome="owner lost")
        assert finished is not None
        assert (finished.owner, finished.status, finished.outcome) == (
            "b",
            "interrupted",
            "owner lost",
        )
        stored = await a.get("job-1", _DUE)
        assert stored == finished

    async def test_an_expired_fire_nobody_took_is_still_its_owners(self) -> None:
        ledger = await self._open()
        fire = await ledger.claim("job-1", _DUE, "a", lease_ms=_LEASE)
        assert fire is not None
        await self.expire(fire)
        assert await ledger.renew(fire, lease_ms=_LEASE) is not None
        assert await ledger.record(fire, status="completed") is not None

    async def test_a_takeover_races_a_late_renewal(self) -> None:
        a, b = await self._open(), await self._open()
        fire = await a.claim("job-1", _DUE, "a", lease_ms=_LEASE)
        assert fire is not None
        await self.expire(fire)
        gate = asyncio.Event()

        async def renew() -> Fire | None:
            await gate.wait()
            return await a.renew(fire, lease_ms=_LEASE)

        async def take() -> list[Fire]:
            await gate.wait()
            return await b.take_over_expired("b", lease_ms=_LEASE)

        tasks = (asyncio.create_task(renew()), asyncio.create_task(take()))
        await asyncio.sleep(0)
        gate.set()
        renewed, taken = await asyncio.gather(*tasks)
        stored = await a.get("job-1", _DUE)
        assert stored is not None
        if taken:
            # The takeover won: the renewal either came first (and then the takeover must not
            # have seen an expired lease, impossible here) or was refused.
            assert stored.owner == "b"
            assert stored.fence == fire.fence + 1
            assert renewed is None or renewed.fence == fire.fence
            assert await a.record(fire, status="completed") is None
        else:
            assert renewed is not None
            assert (stored.owner, stored.fence) == ("a", fire.fence)

    async def test_racing_takeovers_never_take_the_same_fire(self) -> None:
        first = await self._open()
        for n in range(8):
            fire = await first.claim(f"job-{n}", _DUE, "dead", lease_ms=_LEASE)
            assert fire is not None
            await self.expire(fire)
        ledgers = [await self._open() for _ in range(4)]
        gate = asyncio.Event()

        async def take(i: int, ledger: FireLedger) -> list[Fire]:
            await gate.wait()
            return await ledger.take_over_expired(f"d{i}", lease_ms=_LEASE, limit=3)

        tasks = [asyncio.create_task(take(i, x)) for i, x in enumerate(ledgers)]
        await asyncio.sleep(0)
        gate.set()
        taken = [f for batch in await asyncio.gather(*tasks) for f in batch]
        assert sorted(f.job_id for f in taken) == sorted(f"job-{n}" for n in range(8))
        assert all(f.fence == 2 for f in taken)

    async def test_fires_are_listed_newest_first(self) -> None:
        ledger = await self._open()
        for k in (3, 1, 2):
            assert await ledger.claim("job-1", _DUE + k, "a", lease_ms=_LEASE) is not None
        assert await ledger.claim("job-2", _DUE, "a", lease_ms=_LEASE) is not None
        listed = await ledger.fires("job-1", limit=2)
        assert [f.due_at_ms for f in listed] == [_DUE + 3, _DUE + 2]

    async def test_prune_deletes_the_oldest_done_fires_beyond_keep_in_batches(self) -> None:
        ledger = await self._open()
        for k in range(6):
            fire = await ledger.claim("job-1", _DUE + k, "a", lease_ms=_LEASE)
            assert fire is not None
            if k != 1:  # the fire at _DUE + 1 stays in flight
                assert await ledger.record(fire, status="completed") is not None
        assert await ledger.claim("job-2", _DUE, "a", lease_ms=_LEASE) is not None
        assert await ledger.prune("job-1", keep=10) == []
        assert await ledger.prune("job-1", keep=2, limit=1) == [_DUE]
        assert await ledger.prune("job-1", keep=2) == [_DUE + 2, _DUE + 3]
        left = [f.due_at_ms for f in await ledger.fires("job-1")]
        assert left == [_DUE + 5, _DUE + 4, _DUE + 1]  # the one in flight is never deleted
        assert await ledger.prune("job-1", keep=2) == []
        assert [f.job_id for f in await ledger.fires("job-2")] == ["job-2"]
        with pytest.raises(StoreValueError, match="keep"):
            await ledger.prune("job-1", keep=0)

    async def test_bad_input_is_refused_with_what_to_fix(self) -> None:
        ledger = await self._open()
        with pytest.raises(StoreValueError, match="job_id"):
            await ledger.claim("", _DUE, "a", lease_ms=_LEASE)
        with pytest.raises(StoreValueError, match="due_at_ms"):
            await ledger.claim("job", -1, "a", lease_ms=_LEASE)
        with pytest.raises(StoreValueError, match="lease_ms"):
            await ledger.claim("job", _DUE, "a", lease_ms=0)
        fire = await ledger.claim("job", _DUE, "a", lease_ms=_LEASE)
        assert fire is not None
        with pytest.raises(StoreValueError, match="status"):
            await ledger.record(fire, status="bogus")
        stored = await ledger.get("job", _DUE)
        assert stored is not None
        assert stored.status == "claimed"
