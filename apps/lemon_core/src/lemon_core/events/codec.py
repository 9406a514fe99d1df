"""The JSON codec of events and payloads: explicit, and private fields never leave the process.

``to_builtins`` turns an :class:`~lemon_core.events.Event`, a payload record, or any mix of
mappings, sequences and scalars into plain JSON-ready values. A payload's ``private_fields`` are
left out. ``encode_json`` is ``to_builtins`` followed by msgspec's JSON encoder.
"""

from __future__ import annotations

import base64
import datetime as dt
import enum
from collections.abc import Mapping
from typing import Any

import msgspec

from lemon_core.errors import UsageTypeError
from lemon_core.events._payload import Payload
from lemon_core.events.envelope import Event

__all__ = ["encode_json", "to_builtins"]

_SCALARS = (str, int, float, bool, type(None))


def to_builtins(value: Any) -> Any:
    """Plain JSON-ready values for ``value``; payload private fields are left out."""
    if isinstance(value, enum.Enum):
        return to_builtins(value.value)
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, Payload):
        private = value.private_fields
        return {
            name: to_builtins(getattr(value, name))
            for name in value.fields()
            if name not in private
        }
    if isinstance(value, Event):
        return {
            "type": value.type,
            "ts_ms": value.ts_ms,
            "meta": to_builtins(value.meta),
            "payload": to_builtins(value.payload),
        }
    if isinstance(value, Mapping):
        return {_key(k): to_builtins(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_builtins(v) for v in value]
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, msgspec.Struct):
        return to_builtins(msgspec.structs.asdict(value))
    try:
        return msgspec.to_builtins(value)
    except TypeError as error:
        raise UsageTypeError(
            f"{type(value).__name__} is not JSON-encodable; use records, mappings, sequences "
            f"and scalars in payloads and meta"
        ) from error


def _key(key: Any) -> str:
    if isinstance(key, enum.Enum):
        return str(key.value)
    if isinstance(key, str | int | float | bool):
        return str(key)
    raise UsageTypeError(f"mapping keys must be strings (or scalars), got {type(key).__name__}")


def encode_json(value: Any) -> bytes:
    """Compact JSON for ``value`` (see :func:`to_builtins`)."""
    return msgspec.json.encode(to_builtins(value))
