"""Property tests of every payload class: round trips through the JSON codec and ``from_map``
(falsified booleans and unknown keys included), strictness of ``new``."""

from __future__ import annotations

import datetime as dt
import enum
import types
import typing
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lemon_core import EventPayloadError
from lemon_core.events import (
    CastError,
    CastOk,
    Payload,
    cast,
    coerce,
    payload_classes,
    registry,
    to_builtins,
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.text(max_size=20),
)


def strategy_for(annotation: Any) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return st.one_of(*(strategy_for(arg) for arg in typing.get_args(annotation)))
    if annotation is type(None):
        return st.none()
    if annotation is str:
        return st.text(max_size=30)
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return st.integers(-(2**53), 2**53)
    if annotation is float:
        return st.floats(allow_nan=False, allow_infinity=False, width=64)
    if annotation is dt.datetime:
        return st.datetimes(timezones=st.just(dt.UTC))
    if origin is dict:
        return st.dictionaries(st.text(max_size=8), scalars, max_size=3)
    if origin is list:
        return st.lists(st.text(max_size=8), max_size=3)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return st.sampled_from(list(annotation))
    if isinstance(annotation, type) and issubclass(annotation, Payload):
        return payloads(annotation)
    raise AssertionError(f"no strategy for {annotation!r}")


def payloads(cls: type[Payload]) -> st.SearchStrategy[Any]:
    fields = {info.name: strategy_for(info.type) for info in msgspec.structs.fields(cls)}
    return st.fixed_dictionaries(fields).map(lambda values: cls(**values))


def falsify(value: Any) -> Any:
    if value is True:
        return False
    if isinstance(value, dict):
        return {k: falsify(v) for k, v in value.items()}
    if isinstance(value, list):
        return [falsify(v) for v in value]
    return value


CLASSES = payload_classes()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_from_map_inverts_to_builtins(cls: type[Payload], data: st.DataObject) -> None:
    record = data.draw(payloads(cls))
    plain = to_builtins(record)
    rebuilt = cls.from_map(plain)
    private = cls.private_fields
    for name in cls.fields():
        if name not in private:
            assert to_builtins(getattr(rebuilt, name)) == to_builtins(getattr(record, name))
    assert cls.from_map(record) is record


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_falsified_booleans_survive_from_map(cls: type[Payload], data: st.DataObject) -> None:
    plain = falsify(to_builtins(data.draw(payloads(cls))))
    assert to_builtins(cls.from_map(plain)) == plain


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
@settings(max_examples=25, deadline=None)
@given(
    data=st.data(),
    extra=st.dictionaries(
        st.text(min_size=1, max_size=6).map("zz_unknown_{}".format), scalars, max_size=4
    ),
)
def test_unknown_keys_are_dropped_by_from_map_and_refused_by_new(
    cls: type[Payload], data: st.DataObject, extra: dict[str, Any]
) -> None:
    record = data.draw(payloads(cls))
    plain = to_builtins(record)
    assert to_builtins(cls.from_map({**plain, **extra})) == plain
    if extra:
        fields = {name: getattr(record, name) for name in cls.fields()}
        with pytest.raises(EventPayloadError, match="unknown"):
            cls.new(**fields, **extra)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_new_accepts_every_valid_record_field_set(cls: type[Payload], data: st.DataObject) -> None:
    record = data.draw(payloads(cls))
    assert cls.new(**{name: getattr(record, name) for name in cls.fields()}) == record


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_no_payload_supports_item_access(cls: type[Payload]) -> None:
    assert not issubclass(cls, typing.Mapping)  # type: ignore[misc]  # runtime ABC check
    record = cls.from_map(
        dict.fromkeys(cls.payload_fields().required, "x") | _required_samples(cls)
    )
    with pytest.raises(TypeError, match="attribute access only"):
        record[cls.fields()[0]]


def _required_samples(cls: type[Payload]) -> dict[str, Any]:
    samples: dict[str, Any] = {}
    for info in msgspec.structs.fields(cls):
        if not info.required:
            continue
        annotation = info.type
        if annotation is int:
            samples[info.name] = 1
        elif annotation is bool:
            samples[info.name] = True
        elif annotation is dt.datetime:
            samples[info.name] = "2026-01-01T00:00:00Z"
        elif isinstance(annotation, type) and issubclass(annotation, enum.Enum):
            samples[info.name] = next(iter(annotation)).value
        elif isinstance(annotation, type) and issubclass(annotation, Payload):
            samples[info.name] = {
                "x": 1,
                **dict.fromkeys(annotation.payload_fields().required, "x"),
                **_required_samples(annotation),
            }
        elif typing.get_origin(annotation) is dict:
            samples[info.name] = {}
    return samples


json_like = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
    ),
    max_leaves=12,
)
anything = st.one_of(
    json_like,
    st.dictionaries(st.sampled_from(["ok", "completed", "action", "pending", "run_id"]), json_like),
    st.builds(object),
)


@settings(max_examples=300, deadline=None)
@given(
    event_type=st.one_of(st.sampled_from(sorted(registry())), st.text(max_size=10), scalars),
    value=anything,
)
def test_cast_and_coerce_never_raise(event_type: Any, value: Any) -> None:
    result = cast(event_type, value)
    assert isinstance(result, CastOk | CastError)
    coerced = coerce(event_type, value)
    if isinstance(result, CastOk):
        assert coerced == result.value or coerced is value
