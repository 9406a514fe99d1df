"""The Store contract kit: every Store backend must pass these checks.

Use it by subclassing :class:`StoreContract` in a test module named ``Test...`` and
implementing :meth:`StoreContract.open_store`::

    class TestMyBackend(StoreContract):
        persistent = True

        async def open_store(self, directory, clock):
            return await MyStore.open(directory / "db", clock=clock)

``directory`` is the same for every open within one test, so a persistent backend must
see the data written by an earlier open (set ``persistent = False`` otherwise).

A backend that can fail a write at its storage level (after the value was validated) should
also implement :meth:`StoreContract.fail_writes_of` (e.g. a trigger that raises), so the kit
shows that a ``put_many`` failing half way through leaves nothing of its batch.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

import pytest

from lemon_core.execution import ResumeToken
from lemon_core.store import (
    ApprovalGrant,
    ApprovalGrantStore,
    ChatStateStore,
    InvalidStoreKeyError,
    PutEntry,
    RunStore,
    RunSummary,
    Store,
    StoreClosedError,
    StoreError,
    StoreValueError,
)
from lemon_platform_test.clock import ManualClock

__all__ = ["ManualClock", "StoreContract"]  # ManualClock: re-exported from .clock


class StoreContract:
    """Behaviour every Store backend shares. Subclass and implement :meth:`open_store`."""

    persistent: ClassVar[bool] = True

    async def open_store(self, directory: Path, clock: ManualClock) -> Store:
        raise NotImplementedError("implement open_store() in the backend's contract test class")

    async def fail_writes_of(self, store: Store, key: str) -> bool:
        """Make ``store``'s storage refuse any write of ``key`` (in any table) from now on, with
        the rest of a batch accepted; return False when the backend cannot (the check is then
        skipped)."""
        return False

    @pytest.fixture
    def clock(self) -> ManualClock:
        return ManualClock()

    async def _open(self, tmp_path: Path, clock: ManualClock) -> Store:
        store = await self.open_store(tmp_path, clock)
        assert isinstance(store, Store)
        return store

    async def test_store_put_then_get_returns_an_equal_copy(
        self, tmp_path: Path, clock: ManualClock
    ) -> None:
        store = await self._open(tmp_path, clock)
        try:
            value: dict[str, Any] = {"a": [1, 2.5, "x", None, True], "nested": {"k": False}}
            await store.put("things", "k1", value)
            value["a"].append("mutated after put")
            got = await store.get("things", "k1")
            assert got == {"a": [1, 2.5, "x", None, True], "nested": {"k": False}}
            assert await store.get("things", "missing") is None
            assert await store.get("other_table", "k1") is None
        finally:
            await store.close()

    async def test_store_put_overwrites_and_delete_reports_presence(
        self, tmp_path: Path, clock: ManualClock
    ) -> None:
        store = await self._open(tmp_path, clock)
        try:
            await store.put("t", "k", 1)
            await store.put("t", "k", 2)
            assert await store.get("t", "k") == 2
            assert await store.delete("t", "k") is True
            assert await store.delete("t", "k") is False
            assert await store.get("t", "k") is None
        finally:
            await store.close()

    async def test_store_ttl_expires_entries_and_sweep_removes_them(
        self, tmp_path: Path, clock: ManualClock
    ) -> None:
        store = await self._open(tmp_path, clock)
        try:
            await store.put("t", "short", "s", ttl_ms=1_000)
            await store.put("t", "forever", "f")
            clock.advance(999)
            assert await store.get("t", "short") == "s"
            clock.advance(1)
            assert await store.get("t", "short") is None
            assert [k for k, _ in await store.scan("t")] == ["forever"]
            assert await store.delete("t", "short") is False
            await store.put("t", "short2", "s", ttl_ms=10)
            clock.advance(10)
            assert await store.sweep_expired() == 1
            assert await store.sweep_expired() == 0
            assert await store.get("t", "forever") == "f"
        finally:
            await store.close()

    async def test_store_scan_orders_by_key_with_prefix_limit_and_reverse(
        self, tmp_path: Path, clock: ManualClock
    ) -> None:
        store = await self._open(tmp_path, clock)
        try:
            for key in ["b:2", "a:1", "b:1", "B:3", "b:10", "b%x", "c"]:
                await store.put("t", key, key)
            assert [k for k, _ in await store.scan("t", prefix="b:")] == ["b:1", "b:10", "b:2"]
            assert [k for k, _ in await store.scan("t", prefix="b:", reverse=True)] == [
                "b:2",
                "b:10",
                "b:1",
            ]
            assert [k for k, _ in await store.scan("t", prefix="b", limit=2)] == ["b%x", "b:1"]
            assert [k for k, _ in await store.scan("t", prefix="b%")] == ["b%x"]
            assert len(await store.scan("t")) == 7
            assert await store.scan("t", prefix="zzz") == []
        finally:
            await store.close()

    async def test_store_rejects_bad_tables_keys_values_and_ttls_clearly(
        self, tmp_path: Path, clock: ManualClock
    ) -> None:
        store = await self._open(tmp_path, clock)
        try:
            with pytest.raises(InvalidStoreKeyError, match="table"):
                await store.put("Bad Table", "k", 1)
            with pytest.raises(InvalidStoreKeyError, match="key"):
                await store.put("t", "", 1)
            with pytest.raises(StoreValueError, match="JSON"):
                await store.put("t", "k", object())
            with pytest.raises(StoreValueError, match="ttl_ms"):
                await store.put("t", "k", 1, ttl_ms=0)
            with pytest.raises(StoreValueError, match="bound"):
                await store.put("t", "k", "x" * (2 << 20))
            assert await store.get("t", "k") is None
        finally:
            await store.close()

    async def test_store_handles_concurrent_writers_without_losing_any(
        self, tmp_path: Path, clock: ManualClock
    ) -> None:
        store = await self._open(tmp_path, clock)
        try:
            await asyncio.gather(*(store.put("t", f"k{i:03d}", i) for i in range(200)))
            rows = await store.scan("t", limit=500)
            assert [v for _, v in rows] == list(range(200))
        finally:
            await store.close()

    async def test_store_close_is_idempotent_and_later_calls_fail_clearly(
        self, tmp_path: Path, clock: ManualClock
    ) -> None:
        store = await self._open(tmp_path, clock)
        await store.put("t", "k", 1)
        await store.close()
        await store.close()
        with pytest.raises(StoreClosedError):
            await store.get("t", "k")
        if self.persistent:
            reopened = await self._open(tmp_path, clock)
            try:
                assert await reopened.get("t", "k") == 1
            finally:
                await reopened.close()

    async def test_store_statistics_names_the_backend(
        self, tmp_path: Path, clock: ManualClock
    ) -> None:
        store = await self._open(tmp_path, clock)
        try:
            stats = store.statistics()
            assert isinstance(stats.get("backend"), str)
        finally:
            await store.close()

    async def test_store_put_many_writes_every_entry_all_visible_after(
        self, tmp_path: Path, clock: ManualClock
    ) -> None:
        store = await self._open(tmp_path, clock)
        try:
            await store.put("a", "old", "before")
            await store.put_many([])
            await store.put_many(
                [
                    ("a", "k1", {"n": 1}, None),
                    ("b", "k1", [1, 2], None),
                    ("a", "old", "after", None),
                    ("a", "short", "s", 1_000),
                    ("a", "k1", {"n": 2}, None),  # the last value of a key wins
                ]
            )
            assert await store.scan("a") == [
                ("k1", {"n": 2}),
                ("old", "after"),
                ("short", "s"),
            ]
            assert await store.get("b", "k1") == [1, 2]
            clock.advance(1_000)
            assert await store.get("a", "short") is None
        finally:
            await store.close()
        if self.persistent:
            reopened = await self._open(tmp_path, clock)
            try:
                assert await reopened.get("a", "old") == "after"
                assert await reopened.get("b", "k1") == [1, 2]
            finally:
                await reopened.close()

    async def test_store_put_many_that_fails_mid_batch_writes_none_of_it(
        self, tmp_path: Path, clock: ManualClock
    ) -> None:
        store = await self._open(tmp_path, clock)
        try:
            await store.put("a", "kept", "before")

            def batch(bad: PutEntry) -> list[PutEntry]:
                return [("a", "kept", "overwritten", None), ("b", "new", 1, None), bad]

            with pytest.raises(StoreValueError, match="JSON"):
                await store.put_many([*batch(("a", "x", object(), None)), ("a", "y", 2, None)])
            with pytest.raises(InvalidStoreKeyError, match="key"):
                await store.put_many(batch(("a", "", 1, None)))
            with pytest.raises(StoreValueError, match="ttl_ms"):
                await store.put_many(batch(("a", "x", 1, 0)))
            with pytest.raises(StoreValueError, match="tuple"):
                await store.put_many(batch(("a", "x", 1)))  # type: ignore[arg-type]
            if await self.fail_writes_of(store, "boom"):
                with pytest.raises(StoreError):
                    await store.put_many([*batch(("c", "boom", 1, None)), ("c", "z", 3, None)])
            assert await store.get("a", "kept") == "before"
            assert await store.scan("b") == []
            assert await store.scan("c") == []
            assert [k for k, _ in await store.scan("a")] == ["kept"]
        finally:
            await store.close()
        with pytest.raises(StoreClosedError):
            await store.put_many([("a", "k", 1, None)])

    async def test_store_put_new_claims_a_key_once_with_its_entries_or_nothing(
        self, tmp_path: Path, clock: ManualClock
    ) -> None:
        store = await self._open(tmp_path, clock)
        try:
            also: list[PutEntry] = [("entries", "e1", {"n": 1}, None)]
            assert await store.put_new("ids", "i1", {"key": "e1"}, also=also) is True
            assert await store.get("entries", "e1") == {"n": 1}
            held: list[PutEntry] = [("entries", "e2", {"n": 2}, None)]
            assert await store.put_new("ids", "i1", {"key": "e2"}, also=held) is False
            assert await store.get("ids", "i1") == {"key": "e1"}  # the first claim stands
            assert await store.get("entries", "e2") is None  # nothing of the loser written
            # an expired claim is free again
            assert await store.put_new("ids", "i2", 1, ttl_ms=1_000) is True
            clock.advance(999)
            assert await store.put_new("ids", "i2", 2, ttl_ms=1_000) is False
            clock.advance(1)
            assert await store.put_new("ids", "i2", 3) is True
            assert await store.get("ids", "i2") == 3
            # bad input is refused before anything is written, held key or not
            with pytest.raises(StoreValueError, match="JSON"):
                await store.put_new("ids", "i3", 1, also=[("entries", "x", object(), None)])
            with pytest.raises(InvalidStoreKeyError):
                await store.put_new("ids", "", 1)
            assert await store.get("ids", "i3") is None
            if await self.fail_writes_of(store, "boom"):
                with pytest.raises(StoreError):
                    await store.put_new("ids", "i4", 1, also=[("entries", "boom", 1, None)])
                assert await store.get("ids", "i4") is None  # the claim rolled back with it
        finally:
            await store.close()

    async def test_store_put_new_of_many_concurrent_claimers_has_one_winner(
        self, tmp_path: Path, clock: ManualClock
    ) -> None:
        """Two handles on one backend (two processes' connections when it is persistent)
        claim the same keys at once: each key has exactly one winner."""
        first = await self._open(tmp_path, clock)
        second = await self._open(tmp_path, clock) if self.persistent else first
        try:
            for round_ in range(5):
                key = f"k{round_}"
                results = await asyncio.gather(
                    *(
                        (first if i % 2 else second).put_new(
                            "claims", key, i, also=[("owners", f"{key}.{i}", i, None)]
                        )
                        for i in range(10)
                    )
                )
                assert results.count(True) == 1, results
                winner = results.index(True)
                assert await second.get("claims", key) == winner
                assert [k for k, _ in await first.scan("owners", prefix=key + ".")] == [
                    f"{key}.{winner}"
                ]
        finally:
            await first.close()
            if second is not first:
                await second.close()

    async def test_store_run_store_keeps_history_newest_first(
        self, tmp_path: Path, clock: ManualClock
    ) -> None:
        store = await self._open(tmp_path, clock)
        try:
            runs = RunStore(store)
            for i in range(3):
                await runs.finalize(
                    RunSummary(
                        run_id=f"r{i}",
                        session_key="s1",
                        ok=i != 1,
                        error="boom" if i == 1 else None,
                        resume=ResumeToken.native(f"v{i}"),
                        finished_at_ms=1000 + i,
                    )
                )
            await runs.finalize(RunSummary(run_id="other", session_key="s10", ok=True))
            history = await runs.history("s1")
            assert [r.run_id for r in history] == ["r2", "r1", "r0"]
            assert history[1].ok is False
            assert history[1].error == "boom"
            got = await runs.get("r0")
            assert got is not None
            assert got.resume == ResumeToken.native("v0")
            assert await runs.get("nope") is None
        finally:
            await store.close()

    async def test_store_chat_state_returns_native_tokens_only_and_expires(
        self, tmp_path: Path, clock: ManualClock
    ) -> None:
        store = await self._open(tmp_path, clock)
        try:
            chat = ChatStateStore(store, ttl_ms=60_000, clock=clock)
            await chat.put("native", ResumeToken.native("abc"))
            await chat.put("foreign", ResumeToken(engine="codex", value="xyz"))
            assert await chat.resume_token("native") == ResumeToken.native("abc")
            assert await chat.resume_token("foreign") is None
            foreign = await chat.get("foreign")
            assert foreign is not None
            assert foreign.last_engine == "codex"
            assert foreign.last_resume_token == "xyz"
            clock.advance(60_000)
            assert await chat.resume_token("native") is None
            assert await chat.get("foreign") is None
        finally:
            await store.close()

    async def test_store_approval_grants_persist_bounded_and_refuse_session_scope(
        self, tmp_path: Path, clock: ManualClock
    ) -> None:
        def grant(scope: str, owner: str, key: str, at_ms: int) -> ApprovalGrant:
            return ApprovalGrant(
                scope=scope,
                owner=owner,
                tool="bash",
                key=key,
                granted_at_ms=at_ms,
                approval_id=f"appr_{key}",
                action_preview='{"argv":["ls"]}',
            )

        store = await self._open(tmp_path, clock)
        try:
            grants = ApprovalGrantStore(store, max_grants=3)
            await grants.put(grant("global", "", "k1", 10))
            await grants.put(grant("agent", "a", "k2", 20))
            await grants.put(grant("agent", "b", "k2", 30))
            # The same grant again replaces it (newer stamp), it does not add one.
            await grants.put(grant("global", "", "k1", 40))
            with pytest.raises(StoreValueError, match="session"):
                await grants.put(grant("session", "agent:a:main", "k3", 50))
            # A damaged row in the table is skipped, not raised.
            await store.put(ApprovalGrantStore.TABLE, "junk", {"not": "a grant"})
            loaded = await grants.load()
            assert [(g.scope, g.owner, g.key) for g in loaded] == [
                ("agent", "a", "k2"),
                ("agent", "b", "k2"),
                ("global", "", "k1"),
            ]
            assert loaded[2] == grant("global", "", "k1", 40)
            assert grants.statistics()["skipped"] == 1
            await store.delete(ApprovalGrantStore.TABLE, "junk")
            # Beyond the bound, a load keeps the newest and deletes the oldest.
            await grants.put(grant("agent", "c", "k4", 60))
            loaded = await grants.load()
            assert [g.owner for g in loaded] == ["b", "", "c"]
            assert grants.statistics()["pruned"] == 1
            assert await grants.delete("agent", "a", "k2") is False
            assert await grants.delete("agent", "b", "k2") is True
            assert [g.owner for g in await grants.load()] == ["", "c"]
            # One grant by its identity (what a decision reads); a damaged row is none.
            assert await grants.get("global", "", "k1") == grant("global", "", "k1", 40)
            assert await grants.get("agent", "b", "k2") is None
            assert await grants.get("agent", "c", "k1") is None
            await store.put(ApprovalGrantStore.TABLE, grants.row_key("agent", "x", "k9"), {})
            assert await grants.get("agent", "x", "k9") is None
            await store.delete(ApprovalGrantStore.TABLE, grants.row_key("agent", "x", "k9"))
            with pytest.raises(StoreValueError, match="max_grants"):
                ApprovalGrantStore(store, max_grants=0)
        finally:
            await store.close()
        if self.persistent:
            reopened = await self._open(tmp_path, clock)
            try:
                again = await ApprovalGrantStore(reopened).load()
                assert [(g.scope, g.owner, g.key) for g in again] == [
                    ("global", "", "k1"),
                    ("agent", "c", "k4"),
                ]
            finally:
                await reopened.close()
