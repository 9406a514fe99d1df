"""In-memory Store backend, for tests and ephemeral runtimes."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from lemon_core.clock import SYSTEM_CLOCK
from lemon_core.store.errors import StoreClosedError, StoreUnavailableError
from lemon_core.store.protocol import (
    DEFAULT_MAX_VALUE_BYTES,
    Clock,
    PutEntry,
    check_entries,
    check_key,
    check_limit,
    check_table,
    check_ttl,
    decode_value,
    encode_value,
)

__all__ = ["MemoryStore"]


class MemoryStore:
    """A Store kept in dictionaries. Bounded by ``max_entries`` (a write beyond it raises).

    Values are encoded on write, so later mutation of the caller's object never leaks in.
    """

    def __init__(
        self,
        *,
        clock: Clock = SYSTEM_CLOCK,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        max_entries: int = 1_000_000,
    ) -> None:
        self._clock = clock
        self._max_value_bytes = max_value_bytes
        self._max_entries = max_entries
        self._tables: dict[str, dict[str, tuple[bytes, int | None]]] = {}
        self._entries = 0
        self._closed = False
        self._ops = 0

    def _table(self, table: str) -> dict[str, tuple[bytes, int | None]]:
        if self._closed:
            raise StoreClosedError("this MemoryStore is closed")
        self._ops += 1
        try:
            rows = self._tables.get(table)
        except TypeError:  # unhashable: not a valid table name
            rows = None
        if rows is None:
            rows = self._tables[check_table(table)] = {}
        return rows

    def _live(self, item: tuple[bytes, int | None] | None, now: int) -> bytes | None:
        if item is None:
            return None
        data, expires = item
        return None if expires is not None and expires <= now else data

    async def get(self, table: str, key: str) -> Any | None:
        data = self._live(self._table(table).get(check_key(key)), self._clock.now_ms())
        return None if data is None else decode_value(data)

    async def put(self, table: str, key: str, value: Any, *, ttl_ms: int | None = None) -> None:
        rows = self._table(table)
        check_key(key)
        ttl = check_ttl(ttl_ms)
        data = encode_value(value, self._max_value_bytes)
        if key not in rows:
            if self._entries >= self._max_entries:
                raise StoreUnavailableError(
                    f"MemoryStore is full ({self._max_entries} entries); raise max_entries"
                )
            self._entries += 1
        rows[key] = (data, None if ttl is None else self._clock.now_ms() + ttl)

    async def put_many(self, entries: Sequence[PutEntry]) -> None:
        if self._closed:
            raise StoreClosedError("this MemoryStore is closed")
        batch = check_entries(entries, self._max_value_bytes)
        new = {(t, k) for t, k, _, _ in batch if k not in self._tables.get(t, {})}
        if self._entries + len(new) > self._max_entries:
            raise StoreUnavailableError(
                f"MemoryStore is full ({self._max_entries} entries; this batch adds "
                f"{len(new)}); raise max_entries"
            )
        now = self._clock.now_ms()
        for table, key, data, ttl in batch:  # no await: no reader sees half of it
            rows = self._table(table)
            rows[key] = (data, None if ttl is None else now + ttl)
        self._entries += len(new)

    async def put_new(
        self,
        table: str,
        key: str,
        value: Any,
        *,
        ttl_ms: int | None = None,
        also: Sequence[PutEntry] = (),
    ) -> bool:
        """The check and the writes run with no suspension between them (one event loop;
        ``put_many`` never awaits), and ``put_many`` validates the whole batch first."""
        rows = self._table(table)
        check_key(key)
        ttl = check_ttl(ttl_ms)
        batch = [(table, key, value, ttl), *also]
        check_entries(batch, self._max_value_bytes)  # bad input raises even for a held key
        if self._live(rows.get(key), self._clock.now_ms()) is not None:
            return False
        await self.put_many(batch)
        return True

    async def delete(self, table: str, key: str) -> bool:
        rows = self._table(table)
        item = rows.pop(check_key(key), None)
        if item is None:
            return False
        self._entries -= 1
        return self._live(item, self._clock.now_ms()) is not None

    async def scan(
        self, table: str, *, prefix: str = "", limit: int = 1000, reverse: bool = False
    ) -> list[tuple[str, Any]]:
        rows = self._table(table)
        check_limit(limit)
        now = self._clock.now_ms()
        keys = sorted(rows)
        start = bisect.bisect_left(keys, prefix)
        end = len(keys)
        if prefix:
            end = start
            while end < len(keys) and keys[end].startswith(prefix):
                end += 1
        matching = keys[start:end]
        if reverse:
            matching.reverse()
        out: list[tuple[str, Any]] = []
        for k in matching:
            data = self._live(rows[k], now)
            if data is not None:
                out.append((k, decode_value(data)))
                if len(out) >= limit:
                    break
        return out

    async def sweep_expired(self) -> int:
        if self._closed:
            raise StoreClosedError("this MemoryStore is closed")
        now = self._clock.now_ms()
        removed = 0
        for rows in self._tables.values():
            dead = [k for k, (_, exp) in rows.items() if exp is not None and exp <= now]
            for k in dead:
                del rows[k]
            removed += len(dead)
        self._entries -= removed
        return removed

    async def close(self) -> None:
        self._closed = True

    def statistics(self) -> dict[str, Any]:
        return {
            "backend": "memory",
            "closed": self._closed,
            "entries": self._entries,
            "max_entries": self._max_entries,
            "max_value_bytes": self._max_value_bytes,
            "ops": self._ops,
        }
