"""OutboxStore: the channels' durable outbox (messages admitted before they are sent).

Three tables over the generic :class:`~lemon_core.store.Store` interface, so every backend
(SQLite, memory, and the others) keeps the same semantics:

* ``channel_outbox``: one :class:`OutboxEntry` per admitted intent, keyed
  ``<channel>/<admission order>``; :meth:`OutboxStore.pending` reads them oldest first.
* ``channel_outbox_ids``: ``<channel>/<intent id>`` -> the entry key. Admission is refused for
  an intent id already admitted (and still pending, or completed within ``dedupe_ttl_ms``), so
  the same intent is never sent twice, across restarts too. The id is claimed with
  :meth:`~lemon_core.store.Store.put_new`, the entry written in the claim's transaction: of
  several processes admitting one intent id at once (two daemons on one PostgreSQL schema),
  exactly one admits it, and a claim is never left without its entry.
* ``channel_slots``: ``<channel>/<slot>`` -> the platform message ids already made for a slot
  (the message an answer streams into, an approval prompt): a later intent on the slot edits
  them, and an entry that sent some parts before a restart resumes after the last one recorded.

Guarantee: every part is recorded in ``channel_slots`` right after the platform confirmed it,
before the next part is sent, so a restart resends at most the one part whose confirmation was
in flight (the platform offers no idempotency key; that window is one HTTP request).
"""

from __future__ import annotations

import itertools
import time
from typing import Any, Final

import msgspec

from lemon_core.clock import SYSTEM_CLOCK
from lemon_core.store.errors import StoreValueError
from lemon_core.store.protocol import Clock, Store

__all__ = ["DEFAULT_OUTBOX_DEDUPE_TTL_MS", "OutboxEntry", "OutboxStore"]

#: How long a completed intent id is remembered (and refused again): one day.
DEFAULT_OUTBOX_DEDUPE_TTL_MS: Final = 24 * 3600 * 1000
_SLOT_TTL_MS: Final = 7 * 24 * 3600 * 1000
_counter = itertools.count()


class OutboxEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One admitted intent: its rendered payloads (JSON forms), and how far delivery got."""

    key: str
    """The entry's key (``<channel>/<order>``), assigned by :meth:`OutboxStore.admit`."""
    channel_id: str
    intent_id: str
    kind: str
    slot: str
    peer_id: str
    payloads: tuple[dict[str, Any], ...]
    route: dict[str, Any] = msgspec.field(default_factory=dict)
    run_id: str | None = None
    session_key: str | None = None
    text_preview: str = ""
    attempts: int = 0
    next_attempt_ms: int = 0
    created_ms: int = 0
    last_error: str | None = None


_decode_entry = msgspec.convert


class OutboxStore:
    """See the module docstring. ``max_pending`` bounds the pending entries per channel
    (admission beyond it raises :class:`~lemon_core.store.StoreValueError`); the count is read
    from the table once per process, then kept by this wrapper (one writer per channel)."""

    TABLE: Final = "channel_outbox"
    IDS: Final = "channel_outbox_ids"
    SLOTS: Final = "channel_slots"

    def __init__(
        self,
        store: Store,
        *,
        max_pending: int = 10_000,
        dedupe_ttl_ms: int = DEFAULT_OUTBOX_DEDUPE_TTL_MS,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._store = store
        self._max_pending = max_pending
        self._dedupe_ttl_ms = dedupe_ttl_ms
        self._clock = clock
        self._admitted = 0
        self._duplicates = 0
        self._completed = 0
        self._pending: dict[str, int] = {}

    @staticmethod
    def _order() -> str:
        # Wall-clock ns keep the order across restarts; the counter breaks ties in-process.
        return f"{time.time_ns():020d}{next(_counter) % 1_000_000:06d}"

    async def admit(
        self,
        *,
        channel_id: str,
        intent_id: str,
        kind: str,
        slot: str,
        peer_id: str,
        payloads: tuple[dict[str, Any], ...],
        route: dict[str, Any] | None = None,
        run_id: str | None = None,
        session_key: str | None = None,
        text_preview: str = "",
    ) -> OutboxEntry | None:
        """Admit an intent durably (written when this returns); ``None`` when this intent id
        was already admitted (a duplicate: nothing is written). The read first is only the
        cheap answer for a known duplicate; the claim decides."""
        id_key = f"{channel_id}/{intent_id}"
        if await self._store.get(self.IDS, id_key) is not None:
            self._duplicates += 1
            return None
        pending = self._pending.get(channel_id)
        if pending is None:  # counted once per process, then kept up to date here
            rows = await self._store.scan(
                self.TABLE, prefix=channel_id + "/", limit=self._max_pending + 1
            )
            pending = self._pending[channel_id] = len(rows)
        if pending >= self._max_pending:
            raise StoreValueError(
                f"the {channel_id} outbox holds {self._max_pending} pending messages; "
                "the channel is not delivering (see `lemon channels status`)"
            )
        now = self._clock.now_ms()
        entry = OutboxEntry(
            key=f"{channel_id}/{self._order()}",
            channel_id=channel_id,
            intent_id=intent_id,
            kind=kind,
            slot=slot,
            peer_id=peer_id,
            payloads=payloads,
            route=dict(route or {}),
            run_id=run_id,
            session_key=session_key,
            text_preview=text_preview,
            created_ms=now,
            next_attempt_ms=now,
        )
        claimed = await self._store.put_new(
            self.IDS,
            id_key,
            {"key": entry.key},
            ttl_ms=self._dedupe_ttl_ms,
            also=[(self.TABLE, entry.key, msgspec.to_builtins(entry), None)],
        )
        if not claimed:  # another process admitted it since the read above
            self._duplicates += 1
            return None
        self._pending[channel_id] = pending + 1
        self._admitted += 1
        return entry

    async def pending(self, channel_id: str, *, limit: int = 1000) -> list[OutboxEntry]:
        """The channel's pending entries, oldest first (entries that do not parse are
        skipped)."""
        rows = await self._store.scan(self.TABLE, prefix=channel_id + "/", limit=limit)
        entries: list[OutboxEntry] = []
        for _, value in rows:
            try:
                entries.append(_decode_entry(value, OutboxEntry))
            except (msgspec.ValidationError, TypeError):
                continue
        return entries

    async def update(self, entry: OutboxEntry) -> None:
        """Write a pending entry's progress (attempts, next attempt, last error)."""
        await self._store.put(self.TABLE, entry.key, msgspec.to_builtins(entry))

    async def replace_payloads(
        self, entry: OutboxEntry, payloads: tuple[dict[str, Any], ...], text_preview: str
    ) -> OutboxEntry:
        """Supersede a pending transient entry's content (the newer snapshot wins)."""
        updated = msgspec.structs.replace(entry, payloads=payloads, text_preview=text_preview)
        await self.update(updated)
        return updated

    async def complete(self, entry: OutboxEntry) -> None:
        """The entry is done (sent, or given up): remove it; its intent id stays refused for
        the dedupe TTL."""
        if await self._store.delete(self.TABLE, entry.key):
            count = self._pending.get(entry.channel_id)
            if count is not None:
                self._pending[entry.channel_id] = max(0, count - 1)
        self._completed += 1

    async def slot_messages(self, channel_id: str, slot: str) -> list[str]:
        """The platform message ids made for ``slot`` so far, in part order."""
        value = await self._store.get(self.SLOTS, f"{channel_id}/{slot}")
        if not isinstance(value, dict):
            return []
        ids = value.get("message_ids")
        return [str(i) for i in ids] if isinstance(ids, list) else []

    async def record_slot_message(
        self, channel_id: str, slot: str, index: int, message_id: str
    ) -> list[str]:
        """Record that part ``index`` of ``slot`` is message ``message_id``."""
        ids = await self.slot_messages(channel_id, slot)
        if index < len(ids):
            ids[index] = message_id
        elif index == len(ids):
            ids.append(message_id)
        else:
            raise StoreValueError(
                f"slot {slot!r} has {len(ids)} parts; part {index} cannot be recorded yet"
            )
        await self._store.put(
            self.SLOTS, f"{channel_id}/{slot}", {"message_ids": ids}, ttl_ms=_SLOT_TTL_MS
        )
        return ids

    def statistics(self) -> dict[str, int]:
        return {
            "admitted": self._admitted,
            "duplicates": self._duplicates,
            "completed": self._completed,
            "max_pending": self._max_pending,
        }
