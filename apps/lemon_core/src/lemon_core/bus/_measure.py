"""What an item costs a delivery handle: its encoded JSON size plus retained buffer backing.

A ``memoryview`` keeps its whole exporting buffer alive, so a 256-byte view of a 16,384-byte
buffer is charged its encoded size plus the 16,128 bytes of backing it pins: encoded size alone
would admit it and pin the larger buffer.

The bound is hard: the search for views looks at what every value *holds*, never at what a
field is declared to hold (a record built with the unchecked constructor can put a view in a
``str`` field). It walks mappings, sequences, records (all their fields, and the instance
attributes of records with private fields, whose encoded size is charged too since no encoder
writes them), dataclasses and any other object the encoder accepted. A walk that meets far
more objects than the encoding accounts for is refused, so hidden attributes cannot hang an
unbounded graph off an item. Not charged: the plain strings and numbers held in attributes no
encoder writes other than private fields (a dataclass's extra instance attributes, a list
subclass's attributes); views held there are charged, and their object count is bounded.

Refused at the publisher (:class:`~lemon_core.errors.UnencodableItemError`), because their
backing cannot be seen from Python: a ``msgspec.Raw`` that does not own its bytes (built over a
view, or decoded out of a larger message). Publish ``raw.copy()`` instead.
"""

from __future__ import annotations

import datetime as dt
import enum
import gc
import keyword
from collections.abc import Callable
from typing import Any

import msgspec

from lemon_core.errors import UnencodableItemError
from lemon_core.events.envelope import Event

__all__ = ["measure"]

_ENCODER = msgspec.json.Encoder()
#: Types whose values pin nothing beyond their own encoding: scalars, the ``datetime`` types
#: (not gc-traversable: the walk finds nothing in them either) and, learned as met (at most
#: ``_LEAVES_BOUND`` types), the member classes of str and int enums (a member belongs to its
#: class, never to an item: like a record's class, the walk need not look inside it).
_LEAVES: set[type] = {
    str,
    int,
    float,
    bool,
    type(None),
    bytes,
    bytearray,
    dt.datetime,
    dt.date,
    dt.time,
    dt.timedelta,
}
_LEAVES_BOUND = 256
#: Record classes (gc-traversable msgspec Structs) seen by the fast path.
_RECORDS: set[type] = set()
#: Per record class of ``_RECORDS`` (bounded): whether an instance holds a scalar in every field
#: right now (what each field holds, whatever its annotation), for the test in :func:`measure`.
_FLAT: dict[type, Callable[[Any], bool]] = {}
_FLAT_BOUND = 4096
#: Objects a walk may expand beyond what the encoding accounts for (one per encoded byte).
_WALK_SLACK = 1024
_get_referents = gc.get_referents


def measure(item: Any) -> int:
    """Bytes charged for ``item``: encoded JSON size + excess backing of retained views.

    Raises :class:`~lemon_core.errors.UnencodableItemError` if ``item`` is not JSON-encodable,
    or holds a ``msgspec.Raw`` whose backing it cannot see.
    """
    try:
        encoded = len(_ENCODER.encode(item))
    except (TypeError, ValueError, RecursionError) as error:
        raise UnencodableItemError(
            f"cannot deliver a {type(item).__name__}: it is not JSON-encodable ({error}); "
            f"publish Events with record, mapping, sequence or scalar payloads"
        ) from error
    flat = _FLAT.get(type(item))
    if flat is not None and flat(item):
        # A bare record seen before (a session event such as a text delta) whose every field
        # holds a scalar right now: it pins nothing beyond its encoding.
        return encoded
    return encoded + _excess_backing(item, encoded)


def _excess_backing(root: Any, encoded: int) -> int:
    # Fast path for the envelope, the common case: an Event whose meta holds scalars and whose
    # payload is a record of scalars (or of flat containers of scalars). Anything else, and
    # anything this path is not sure about, goes to the general walk.
    if type(root) is not Event:
        # A bare record (a session event such as a text delta): the payload's fast path.
        return _record_excess(root, encoded)
    for value in root.meta.values():
        if type(value) not in _LEAVES:
            return _walk(root, encoded)
    payload = root.payload
    kind = type(payload)
    if kind in _LEAVES:
        return 0
    if kind is dict:
        return _walk(payload, encoded) if _nested(payload.values()) else 0
    return _record_excess(payload, encoded)


def _record_excess(payload: Any, encoded: int) -> int:
    # A gc-traversable record whose fields are scalars, flat containers of scalars or (two
    # levels deep) such records pins nothing beyond its encoding; anything else (and anything
    # this path is not sure about) takes the walk.
    return 0 if _plain_record(payload, 2) else _walk(payload, encoded)


def _plain_record(record: Any, depth: int) -> bool:
    kind = type(record)
    if kind not in _RECORDS:
        if (
            not isinstance(record, msgspec.Struct)
            or not kind.__struct_config__.gc
            or kind.__struct_config__.dict  # private fields: the walk charges them
        ):
            return False
        _RECORDS.add(kind)
        if len(_FLAT) < _FLAT_BOUND:
            _FLAT[kind] = _flat_test(kind)
    for value in _get_referents(record):  # every field, whatever its annotation
        field_kind = type(value)
        if field_kind in _LEAVES or value is kind:
            continue
        if field_kind is dict:
            if _nested(value.values()):
                return False
        elif field_kind is list or field_kind is tuple:
            if _nested(value):
                return False
        elif not (
            (depth and isinstance(value, msgspec.Struct) and _plain_record(value, depth - 1))
            or _learn_leaf(value)
        ):
            return False
    return True


def _learn_leaf(value: Any) -> bool:
    """Whether ``value`` is a member of a str or int enum (its class is then a leaf)."""
    if isinstance(value, enum.Enum) and isinstance(value, str | int):
        if len(_LEAVES) < _LEAVES_BOUND:
            _LEAVES.add(type(value))
        return True
    return False


def _flat_test(kind: type) -> Callable[[Any], bool]:
    """``kind``'s scalar test: one expression over its fields (a comprehension or a loop over
    them costs several times more on this hot path). Field names are identifiers (they are
    class attributes); anything else gets the loop."""
    names: tuple[str, ...] = kind.__struct_fields__  # type: ignore[attr-defined]  # a Struct
    if not all(name.isidentifier() and not keyword.iskeyword(name) for name in names):

        def test(record: Any) -> bool:
            return all(type(getattr(record, name)) in _LEAVES for name in names)

        return test
    body = " and ".join(f"kind(record.{name}) in leaves" for name in names) or "True"
    namespace: dict[str, Any] = {}
    # ``kind`` and ``leaves`` are locals (defaults): no global lookup per field.
    source = f"def test(record, leaves=leaves, kind=type):\n    return {body}\n"  # names checked
    exec(source, {"leaves": _LEAVES}, namespace)
    return namespace["test"]  # type: ignore[no-any-return]


def _nested(values: Any) -> bool:
    # Whether any of ``values`` is not a plain scalar (so the general walk must look). A loop,
    # not any(): the generator costs more than the test on this hot path.
    for value in values:  # noqa: SIM110  (hot path: a loop beats any() over a generator)
        if type(value) not in _LEAVES:
            return True
    return False


def _walk(root: Any, encoded: int) -> int:
    excess = 0
    budget = encoded + _WALK_SLACK
    stack: list[Any] = [root]
    pop = stack.pop
    extend = stack.extend
    while stack:
        value = pop()
        kind = type(value)
        if kind in _LEAVES:
            continue
        budget -= 1
        if budget < 0:
            raise UnencodableItemError(
                f"cannot deliver a {type(root).__name__}: it holds far more objects than its "
                f"JSON encoding ({encoded} bytes) accounts for; publish plain records"
            )
        if kind is dict:
            extend(value.values())
        elif kind is list or kind is tuple:
            extend(value)
        elif kind is memoryview:
            excess += _backing_bytes(value) - value.nbytes
        elif kind is msgspec.Raw:
            _check_raw(value)
        elif isinstance(value, type):
            continue  # a record's or an enum member's class: shared, not pinned by this item
        else:
            if isinstance(value, msgspec.Struct):
                hidden = getattr(value, "__dict__", None)
                if hidden:  # private fields: never encoded, so charged here
                    excess += _hidden_size(hidden, root)
            referents = _get_referents(value)
            if referents:
                extend(referents)  # record fields whatever their annotation, __dict__, items
            elif isinstance(value, msgspec.Struct):  # gc=False records traverse nothing
                extend(getattr(value, name) for name in value.__struct_fields__)
    return excess


def _hidden_size(attributes: dict[str, Any], root: Any) -> int:
    try:
        return len(_ENCODER.encode(attributes))
    except (TypeError, ValueError, RecursionError) as error:
        raise UnencodableItemError(
            f"cannot deliver a {type(root).__name__}: a record in it holds private values that "
            f"are not JSON-encodable ({error}); keep private fields to plain values"
        ) from error


def _check_raw(raw: msgspec.Raw) -> None:
    # copy() returns the Raw itself only when it owns exactly its bytes (no larger backing).
    if raw.copy() is not raw:
        raise UnencodableItemError(
            f"cannot deliver a msgspec.Raw of {len(raw)} bytes that does not own its buffer: it "
            f"may pin a much larger one the bound cannot see; publish raw.copy() instead"
        )


def _backing_bytes(view: memoryview) -> int:
    exporter: object = view.obj  # typeshed says never None; a released view's obj is
    if exporter is None:
        return view.nbytes
    try:
        with memoryview(exporter) as whole:  # type: ignore[arg-type]  # obj is a buffer exporter
            return max(whole.nbytes, view.nbytes)
    except TypeError:
        return view.nbytes
