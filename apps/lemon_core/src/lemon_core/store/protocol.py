"""The Store interface every backend implements, and the checks all backends share."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final, Protocol, runtime_checkable

import msgspec

from lemon_core.clock import SYSTEM_CLOCK, Clock
from lemon_core.store.errors import InvalidStoreKeyError, StoreValueError

__all__ = [
    "DEFAULT_MAX_VALUE_BYTES",
    "Clock",
    "PutEntry",
    "Store",
    "check_entries",
    "check_key",
    "check_limit",
    "check_table",
    "check_ttl",
    "decode_value",
    "encode_value",
    "system_clock_ms",
]

#: Default upper bound of one encoded value.
DEFAULT_MAX_VALUE_BYTES: Final = 1 << 20

_TABLE_RE: Final = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_MAX_KEY_CHARS: Final = 1024

#: One write of :meth:`Store.put_many`: ``(table, key, value, ttl_ms)``.
PutEntry = tuple[str, str, Any, int | None]

_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder()


#: Wall-clock milliseconds as a plain callable, for code that takes one (``SYSTEM_CLOCK.now_ms``).
system_clock_ms: Final = SYSTEM_CLOCK.now_ms


@runtime_checkable
class Store(Protocol):
    """One async key-value interface: tables of string keys to JSON-compatible values.

    * Values are copied on write (encoded) and decoded fresh on read. A msgspec Struct
      or dataclass may be written; it reads back as its JSON form (a dict).
    * ``ttl_ms`` stamps an expiry; an expired entry reads as absent and is removed by
      :meth:`sweep_expired`.
    * ``scan`` returns entries ordered by key (reversed with ``reverse=True``), at most
      ``limit`` of them.
    * A failed write raises :class:`~lemon_core.store.errors.StoreUnavailableError` and
      leaves the previous value in place.
    * :meth:`put_many` writes several entries (any tables) all or nothing.
    """

    async def get(self, table: str, key: str) -> Any | None:
        """The value, or None when absent or expired."""
        ...

    async def put(self, table: str, key: str, value: Any, *, ttl_ms: int | None = None) -> None:
        """Write ``value`` (durable when this returns)."""

    async def put_many(self, entries: Sequence[PutEntry]) -> None:
        """Write every ``(table, key, value, ttl_ms)`` entry, all or nothing: every entry is
        validated and encoded before anything is written, and the writes are one transaction
        (durable when this returns). On any error nothing of the batch is written and the
        previous values stay in place. A key given twice keeps its last value. A fenced view
        checks its lease once for the whole batch, atomically with it."""

    async def put_new(
        self,
        table: str,
        key: str,
        value: Any,
        *,
        ttl_ms: int | None = None,
        also: Sequence[PutEntry] = (),
    ) -> bool:
        """Claim ``key``: write ``value`` only when no live entry holds it (absent or expired),
        atomically with the check, so of any number of concurrent callers (other processes on
        the same backend included) exactly one gets True. With ``also``, those entries are
        written in the same transaction as the claim (all or nothing). False when a live entry
        holds the key: nothing is written (``also`` neither). Everything is validated and
        encoded before anything is written."""
        ...

    async def delete(self, table: str, key: str) -> bool:
        """Remove the entry; return whether a live entry was there."""
        ...

    async def scan(
        self, table: str, *, prefix: str = "", limit: int = 1000, reverse: bool = False
    ) -> list[tuple[str, Any]]:
        """Live entries whose key starts with ``prefix``, ordered by key."""
        ...

    async def sweep_expired(self) -> int:
        """Remove expired entries; return how many were removed."""
        ...

    async def close(self) -> None:
        """Release the backend; later calls raise StoreClosedError. Idempotent."""

    def statistics(self) -> dict[str, Any]:
        """Counters and bounds of this store."""
        ...


#: Table names already checked (a few constants in practice; bounded all the same): every
#: store call checks its table, and a set lookup is far cheaper than the pattern.
_CHECKED_TABLES: set[str] = set()
_MAX_CHECKED_TABLES: Final = 1024


def check_table(table: object) -> str:
    """Validate a table name."""
    if type(table) is str and table in _CHECKED_TABLES:
        return table
    if not isinstance(table, str) or not _TABLE_RE.match(table):
        raise InvalidStoreKeyError(
            f"invalid store table {table!r}: use 1-64 characters of a-z, 0-9 and '_', "
            "starting with a letter"
        )
    if type(table) is str and len(_CHECKED_TABLES) < _MAX_CHECKED_TABLES:
        _CHECKED_TABLES.add(table)
    return table


def check_key(key: object) -> str:
    """Validate a key."""
    if not isinstance(key, str) or not key or len(key) > _MAX_KEY_CHARS:
        raise InvalidStoreKeyError(
            f"invalid store key {key!r}: use a non-empty string of at most "
            f"{_MAX_KEY_CHARS} characters"
        )
    return key


def check_ttl(ttl_ms: object) -> int | None:
    """Validate a TTL."""
    if ttl_ms is None:
        return None
    if not isinstance(ttl_ms, int) or isinstance(ttl_ms, bool) or ttl_ms <= 0:
        raise StoreValueError(f"ttl_ms must be a positive integer or None, got {ttl_ms!r}")
    return ttl_ms


def check_limit(limit: object) -> int:
    """Validate a scan limit."""
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise StoreValueError(f"scan limit must be a positive integer, got {limit!r}")
    return limit


def encode_value(value: Any, max_bytes: int) -> bytes:
    """Encode a JSON-compatible value, enforcing the size bound."""
    try:
        data = _encoder.encode(value)
    except (TypeError, msgspec.EncodeError) as exc:
        raise StoreValueError(
            f"store values must be JSON-compatible (dict, list, str, int, float, bool, None): {exc}"
        ) from exc
    if len(data) > max_bytes:
        raise StoreValueError(
            f"store value is {len(data)} bytes, above the {max_bytes}-byte bound; store a "
            "smaller value or raise max_value_bytes"
        )
    return data


def decode_value(data: bytes) -> Any:
    """Decode a stored value."""
    return _decoder.decode(data)


def check_entries(entries: object, max_bytes: int) -> list[tuple[str, str, bytes, int | None]]:
    """Validate and encode a :meth:`Store.put_many` batch (nothing is written on an error):
    ``(table, key, encoded value, ttl_ms)`` per entry, in order."""
    if isinstance(entries, (str, bytes)) or not isinstance(entries, Sequence):
        raise StoreValueError(
            f"put_many takes a sequence of (table, key, value, ttl_ms) tuples, got {entries!r}"
        )
    out: list[tuple[str, str, bytes, int | None]] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, tuple) or len(entry) != 4:
            raise StoreValueError(
                f"put_many entry {index} must be a (table, key, value, ttl_ms) tuple, got {entry!r}"
            )
        table, key, value, ttl_ms = entry
        out.append(
            (
                check_table(table),
                check_key(key),
                encode_value(value, max_bytes),
                check_ttl(ttl_ms),
            )
        )
    return out
