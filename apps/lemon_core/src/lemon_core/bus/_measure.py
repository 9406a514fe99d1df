"""What an item costs a delivery handle: its encoded JSON size plus retained buffer backing.

A ``memoryview`` keeps its whole exporting buffer alive, so a 256-byte view of a 16,384-byte
buffer is charged its encoded size plus the 16,128 bytes of backing it pins: encoded size alone
would admit it and pin the larger buffer.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import msgspec

from lemon_core.errors import UnencodableItemError

__all__ = ["measure"]

_ENCODER = msgspec.json.Encoder()
_LEAVES: frozenset[type] = frozenset({str, int, float, bool, type(None), bytes, bytearray})


def measure(item: Any) -> int:
    """Bytes charged for ``item``: encoded JSON size + excess backing of retained views.

    Raises :class:`~lemon_core.errors.UnencodableItemError` if ``item`` is not JSON-encodable.
    """
    try:
        encoded = len(_ENCODER.encode(item))
    except (TypeError, ValueError, RecursionError) as error:
        raise UnencodableItemError(
            f"cannot publish a {type(item).__name__}: it is not JSON-encodable ({error}); "
            f"publish Events with record, mapping, sequence or scalar payloads"
        ) from error
    return encoded + _excess_backing(item)


def _excess_backing(root: Any) -> int:
    excess = 0
    stack: list[Any] = [root]
    pop = stack.pop
    extend = stack.extend
    while stack:
        value = pop()
        kind = type(value)
        if kind in _LEAVES:
            continue
        if kind is dict:
            extend(value.values())
        elif kind is list or kind is tuple:
            extend(value)
        elif isinstance(value, msgspec.Struct):
            extend([getattr(value, name) for name in value.__struct_fields__])
        elif kind is memoryview:
            excess += _backing_bytes(value) - value.nbytes
        elif isinstance(value, str | int | float | enum.Enum):
            continue
        elif isinstance(value, Mapping):
            extend(value.values())
        elif isinstance(value, list | tuple | set | frozenset):
            extend(value)
    return excess


def _backing_bytes(view: memoryview) -> int:
    exporter: object = view.obj  # typeshed says never None; a released view's obj is
    if exporter is None:
        return view.nbytes
    try:
        with memoryview(exporter) as whole:  # type: ignore[arg-type]  # obj is a buffer exporter
            return max(whole.nbytes, view.nbytes)
    except TypeError:
        return view.nbytes
