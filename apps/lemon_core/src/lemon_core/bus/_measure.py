"""What an item costs a delivery handle: its encoded JSON size plus retained buffer backing.

A ``memoryview`` keeps its whole exporting buffer alive, so a 256-byte view of a 16,384-byte
buffer is charged its encoded size plus the 16,128 bytes of backing it pins: encoded size alone
would admit it and pin the larger buffer.

The search for views walks mappings, sequences and records. A record's fields are walked when
their declared type can hold a buffer (``Any``, containers, nested records); fields declared as
scalars (``str``, ``int``, enums, ...) are trusted to hold what they declare, which the typed
constructors (``new``/``from_map``) and mypy guarantee.
"""

from __future__ import annotations

import datetime as dt
import enum
import types
import typing
from collections.abc import Mapping
from typing import Any

import msgspec

from lemon_core.errors import UnencodableItemError
from lemon_core.events.envelope import Event

__all__ = ["measure"]

_ENCODER = msgspec.json.Encoder()
_LEAVES: frozenset[type] = frozenset({str, int, float, bool, type(None), bytes, bytearray})
_SCALAR_TYPES: tuple[type, ...] = (str, int, float, bool, type(None), dt.datetime, enum.Enum)
_WALKED_FIELDS: dict[type, tuple[str, ...]] = {}


def measure(item: Any) -> int:
    """Bytes charged for ``item``: encoded JSON size + excess backing of retained views.

    Raises :class:`~lemon_core.errors.UnencodableItemError` if ``item`` is not JSON-encodable.
    """
    try:
        encoded = len(_ENCODER.encode(item))
    except (TypeError, ValueError, RecursionError) as error:
        raise UnencodableItemError(
            f"cannot deliver a {type(item).__name__}: it is not JSON-encodable ({error}); "
            f"publish Events with record, mapping, sequence or scalar payloads"
        ) from error
    return encoded + _excess_backing(item)


def _is_scalar_annotation(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return all(_is_scalar_annotation(arg) for arg in typing.get_args(annotation))
    if origin is typing.Literal:
        return True
    return isinstance(annotation, type) and issubclass(annotation, _SCALAR_TYPES)


def _walked_fields(cls: type[msgspec.Struct]) -> tuple[str, ...]:
    names = _WALKED_FIELDS.get(cls)
    if names is None:
        names = tuple(
            info.name
            for info in msgspec.structs.fields(cls)
            if not _is_scalar_annotation(info.type)
        )
        _WALKED_FIELDS[cls] = names
    return names


def _excess_backing(root: Any) -> int:
    # Fast path for the envelope, the common case: an Event whose payload is a record.
    if type(root) is not Event:
        return _walk(root)
    excess = 0
    for value in root.meta.values():
        if type(value) not in _LEAVES:
            excess += _walk(value)
    payload = root.payload
    kind = type(payload)
    if kind in _LEAVES:
        return excess
    names = _WALKED_FIELDS.get(kind)
    if names is None:
        return excess + _walk(payload)
    for name in names:
        value = getattr(payload, name)
        if type(value) not in _LEAVES and (value or type(value) is memoryview):
            excess += _walk(value)
    return excess


def _walk(root: Any) -> int:
    excess = 0
    stack: list[Any] = [root]
    pop = stack.pop
    append = stack.append
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
            for name in _walked_fields(kind):
                append(getattr(value, name))
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
