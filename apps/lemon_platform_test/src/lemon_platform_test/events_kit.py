"""The events contract kit: checks every payload class must pass, as plain functions and as a
test class to subclass.

Use it on your own payload classes::

    from lemon_platform_test import EventsContract

    class TestMyEvents(EventsContract):
        payload_classes = (ThingHappened,)

With no ``payload_classes`` it covers every class of ``lemon_core.events.payload_classes()``
and every registered type. The eight properties: registry completeness, round trip through
``from_map`` (nested records flattened, booleans falsified), string keys, unknown keys (``new``
raises, ``from_map`` drops), Introspection compatibility (a record sanitises to the same map as
its untyped form, through the codec and plain msgspec), JSON encodability (no encoder writes a
private field), envelope discipline (``broadcast_event`` delivers the record intact and rejects
a mismatched payload, under each bus backend) and backend parity (every backend delivers and
refuses the same publications; at least two backends: ``local`` and the serialising
``loopback``), and no item access.
"""

from __future__ import annotations

import datetime as dt
import enum
import inspect
import json
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import msgspec

from lemon_core.bus import Bus, BusBackend, Delivery, PayloadValidation
from lemon_core.errors import EventPayloadError
from lemon_core.events import (
    Event,
    Payload,
    encode_json,
    is_registered,
    nested_payload_classes,
    payload_class,
    payload_classes,
    registry,
    to_builtins,
)
from lemon_infra import BACKENDS
from lemon_platform_test.bus_kit import settle

__all__ = [
    "EventsContract",
    "check_backend_parity",
    "check_envelope_discipline",
    "check_falsified_round_trip",
    "check_introspection_compatibility",
    "check_json_encodable",
    "check_no_item_access",
    "check_payload_class",
    "check_registry_completeness",
    "check_round_trip",
    "check_string_keys",
    "check_unknown_keys",
    "contract_backends",
    "contract_event_types",
    "contract_payload_classes",
    "example_payload",
    "parity_backends",
    "payload_classes_in",
    "private_values",
    "strip_private",
    "untyped",
]

_SAMPLE_AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _sample(name: str, annotation: Any, *, full: bool) -> Any:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _sample(name, options[0], full=full) if options else None
    if annotation is str:
        return f"example_{name}"
    if annotation is bool:
        return True
    if annotation is int:
        return 1
    if annotation is float:
        return 1.5
    if annotation is dt.datetime:
        return _SAMPLE_AT
    if origin is dict or annotation is dict:
        return {"example": True}
    if origin is list or annotation is list:
        return [f"example_{name}"]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return next(iter(annotation))
    if isinstance(annotation, type) and issubclass(annotation, Payload):
        return example_payload(annotation, full=full)
    return f"example_{name}"


def example_payload(cls: type[Payload], *, full: bool = False) -> Payload:
    """A valid record of ``cls``: required fields filled with samples (``full``: every field,
    booleans ``True``, so falsifying them is a real change)."""
    fields: dict[str, Any] = {}
    for info in msgspec.structs.fields(cls):
        if info.required or full:
            fields[info.name] = _sample(info.name, info.type, full=full)
    if full:
        for name, annotation in cls.private_field_types().items():
            fields[name] = _sample(name, annotation, full=full)
    return cls.new(**fields)


def strip_private(record: Payload) -> Payload:
    """``record`` as it arrives from the wire: every private field (at any depth) unset."""
    changes: dict[str, Any] = {}
    for info in msgspec.structs.fields(type(record)):
        value = getattr(record, info.name)
        if isinstance(value, Payload):
            changes[info.name] = strip_private(value)
    if changes or record.private_fields:
        # replace() builds a new record through the field constructor: private values stay
        # behind with the original.
        return msgspec.structs.replace(record, **changes)
    return record


def private_values(record: Payload) -> dict[str, Any]:
    """The private field values set on ``record`` and its nested records, by dotted path."""
    found: dict[str, Any] = {}
    for name in record.private_fields:
        value = getattr(record, name)
        if value is not None:
            found[name] = value
    for info in msgspec.structs.fields(type(record)):
        value = getattr(record, info.name)
        if isinstance(value, Payload):
            for path, nested in private_values(value).items():
                found[f"{info.name}.{path}"] = nested
    return found


def untyped(value: Any) -> Any:
    """The plain-map form of ``value``: records become dicts of their public fields (at any
    depth); scalars, enums and datetimes are left as they are."""
    if isinstance(value, Payload):
        private = value.private_fields
        return {
            name: untyped(getattr(value, name)) for name in value.fields() if name not in private
        }
    if isinstance(value, Mapping):
        return {key: untyped(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [untyped(item) for item in value]
    return value


def _falsify(value: Any) -> Any:
    if value is True:
        return False
    if isinstance(value, dict):
        return {k: _falsify(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_falsify(v) for v in value]
    return value


# -- the checks ---------------------------------------------------------------------------------


def check_payload_class(cls: type[Payload]) -> None:
    """``cls`` is a payload record with ``new``, ``from_map``, ``event_version`` and fields."""
    candidate: object = cls
    assert isinstance(candidate, type), f"{cls!r} is not a class"
    assert issubclass(candidate, Payload), f"{cls!r} is not a Payload class"
    for name in ("new", "from_map", "event_version", "fields"):
        assert callable(getattr(cls, name, None)), f"{cls.__name__} lacks {name}()"
    version: object = cls.event_version()
    assert isinstance(version, int), f"{cls.__name__}.event_version() is not an int"
    assert version >= 1, f"{cls.__name__}.event_version() = {version}"
    assert cls.fields(), f"{cls.__name__} declares no fields"
    assert cls.__struct_config__.frozen, f"{cls.__name__} must be frozen"
    positional = [
        p.name
        for p in inspect.signature(cls).parameters.values()
        if p.kind is not inspect.Parameter.KEYWORD_ONLY
    ]
    assert not positional, f"{cls.__name__} fields {positional} are not keyword-only"


def check_registry_completeness() -> None:
    """Every registered type resolves to a sound payload class, and every payload class is
    registered or nested."""
    for event_type, cls in registry().items():
        assert is_registered(event_type)
        assert payload_class(event_type) is cls
        check_payload_class(cls)
    registered = set(registry().values())
    for cls in payload_classes():
        assert cls in registered or cls in nested_payload_classes(), (
            f"{cls.__name__} is neither registered nor nested"
        )


def check_round_trip(cls: type[Payload]) -> None:
    """``from_map`` rebuilds the record from its flattened form and passes records through."""
    for example in (example_payload(cls), example_payload(cls, full=True)):
        assert cls.from_map(example) is example
        flattened = to_builtins(example)
        assert cls.from_map(flattened) == strip_private(example), (
            f"{cls.__name__}.from_map(to_builtins(x)) != x for {example!r}"
        )


def check_falsified_round_trip(cls: type[Payload]) -> None:
    """Booleans set to ``False`` stay ``False`` through ``from_map``."""
    flattened = _falsify(to_builtins(example_payload(cls, full=True)))
    assert to_builtins(cls.from_map(flattened)) == flattened, (
        f"{cls.__name__}.from_map lost a False: {flattened!r}"
    )


def check_string_keys(cls: type[Payload]) -> None:
    """``from_map`` accepts string-keyed mappings of any Mapping type."""
    example = example_payload(cls, full=True)
    top_level = {name: getattr(example, name) for name in cls.fields()}
    assert cls.from_map(types.MappingProxyType(top_level)) == example


def check_unknown_keys(cls: type[Payload]) -> None:
    """``new`` raises on an unknown field; ``from_map`` drops it."""
    example = example_payload(cls)
    fields = {name: getattr(example, name) for name in cls.fields()}
    try:
        cls.new(**fields, definitely_not_a_field=True)
    except EventPayloadError:
        pass
    else:
        raise AssertionError(f"{cls.__name__}.new accepted an unknown field")
    assert cls.from_map({**fields, "definitely_not_a_field": True}) == example


def check_json_encodable(cls: type[Payload]) -> None:
    """The record encodes to a JSON object, and no encoder writes its private fields (set to
    sample values): not the explicit codec, not plain msgspec JSON, builtins or MessagePack
    (what the Store and the bus backends use)."""
    for example in (example_payload(cls), example_payload(cls, full=True)):
        decoded = json.loads(encode_json(example))
        assert isinstance(decoded, dict)
        secrets = private_values(example)
        encodings = {
            "encode_json": encode_json(example),
            "msgspec.json.encode": msgspec.json.encode(example),
            "msgspec.to_builtins": msgspec.json.encode(msgspec.to_builtins(example)),
            "msgspec.msgpack.encode": msgspec.msgpack.encode(example),
        }
        for encoder, data in encodings.items():
            for path, value in secrets.items():
                name = path.rsplit(".", 1)[-1]
                leaked = name.encode() in data or str(value).encode() in data
                assert not leaked, f"{cls.__name__}: {encoder} wrote private field {path}"


def check_introspection_compatibility(cls: type[Payload]) -> None:
    """A record sanitises to the same map as its untyped (plain-map) form: through the
    explicit codec (``to_builtins``) and through plain msgspec (the Store's encoding), for the
    minimal, full and falsified examples. Persisting a record or the equivalent map is the
    same; and the sanitised map rebuilds the record (less private fields) with ``from_map``."""
    full = example_payload(cls, full=True)
    falsified = cls.from_map(_falsify(to_builtins(full)))
    for example in (example_payload(cls), full, falsified):
        plain = untyped(example)
        assert to_builtins(example) == to_builtins(plain), (
            f"{cls.__name__}: to_builtins(record) differs from to_builtins(its plain form)"
        )
        assert msgspec.to_builtins(example) == msgspec.to_builtins(plain), (
            f"{cls.__name__}: msgspec.to_builtins(record) differs from its plain form's"
        )
        assert json.loads(msgspec.json.encode(example)) == json.loads(msgspec.json.encode(plain))
        assert cls.from_map(to_builtins(example)) == strip_private(example)


def check_no_item_access(cls: type[Payload]) -> None:
    """Payloads are not mappings: ``payload[key]`` raises ``TypeError``."""
    example = example_payload(cls)
    assert not isinstance(example, Mapping), f"{cls.__name__} is a Mapping"
    try:
        example[cls.fields()[0]]
    except TypeError:
        return
    raise AssertionError(f"{cls.__name__} supports item access")


def check_envelope_discipline(
    event_type: str,
    cls: type[Payload],
    backend_factory: Callable[[], BusBackend],
) -> None:
    """On a bus of the given backend, ``broadcast_event`` delivers the record intact with its
    meta, and (for a registered type) rejects a mismatched payload in ``RAISE`` mode."""
    topic = "run:run_test"
    bus = Bus(backend=backend_factory(), validation=PayloadValidation.RAISE)
    try:
        assert bus.running(), f"backend {bus.backend.name} is not running"
        handle = Delivery(bind_current_task=False)
        bus.subscribe(topic, delivery=handle)
        example = example_payload(cls)
        bus.broadcast_event(topic, event_type, example, {"run_id": "run_test"})
        settle(bus)
        received = handle.get_nowait()
        assert isinstance(received, Event)
        assert received.type == event_type
        assert received.payload == example
        assert type(received.payload) is cls
        assert received.meta["run_id"] == "run_test"
        if payload_class(event_type) is cls:
            for wrong in ({"bogus": True}, to_builtins(example), _other_record(cls)):
                try:
                    bus.broadcast_event(topic, event_type, wrong)
                except EventPayloadError:
                    continue
                raise AssertionError(f"broadcast_event({event_type!r}) accepted {wrong!r}")
        assert handle.statistics().queued == 0
    finally:
        bus.close()


def check_backend_parity(
    event_type: str,
    cls: type[Payload],
    backend_factories: Mapping[str, Callable[[], BusBackend]],
) -> None:
    """Every backend delivers the same thing for the same publications: the record of a
    registered type (minimal and full examples) intact, less private fields (which never leave
    the process, so a serialising backend drops them and the local one keeps them on the very
    object), with the same meta; the same JSON values for an unregistered type; and every
    backend refuses the same publications."""
    assert len(backend_factories) >= 2, "backend parity needs at least two backends"
    topic = "run:run_test"
    examples = (example_payload(cls), example_payload(cls, full=True))
    registered = payload_class(event_type) is cls
    seen: dict[str, list[Any]] = {}
    for name, factory in backend_factories.items():
        bus = Bus(backend=factory(), validation=PayloadValidation.RAISE)
        try:
            handle = Delivery(bind_current_task=False)
            bus.subscribe(topic, delivery=handle)
            for example in examples:
                bus.broadcast_event(topic, event_type, example, {"run_id": "run_test", "n": 1})
            settle(bus)
            received: list[Any] = []
            while handle.statistics().queued:
                received.append(handle.get_nowait())
            assert len(received) == len(examples), f"backend {name} delivered {received!r}"
            for item, example in zip(received, examples, strict=True):
                assert isinstance(item, Event), f"backend {name} delivered {item!r}"
                if registered:
                    assert type(item.payload) is cls, f"backend {name}: {type(item.payload)}"
                    assert item.payload == strip_private(example), f"backend {name}: {item!r}"
            # An unregistered type's payload is whatever its publisher chose: across a wire it
            # arrives as its JSON values, so parity compares those.
            seen[name] = [(item.type, item.meta, to_builtins(item.payload)) for item in received]
            refusals = []
            for wrong in ({"bogus": True}, {"unencodable": object()}):
                try:
                    bus.broadcast_event(topic, event_type, wrong)
                except (EventPayloadError, TypeError) as error:
                    refusals.append(type(error).__name__)
            seen[name].append(tuple(refusals))
        finally:
            bus.close()
    first_name, first = next(iter(seen.items()))
    for name, delivered in seen.items():
        assert delivered == first, (
            f"backends {first_name} and {name} differ: {first!r} != {delivered!r}"
        )


def parity_backends(
    chosen: Mapping[str, Callable[[], BusBackend]] | None,
) -> dict[str, Callable[[], BusBackend]]:
    """The backends parity compares: the chosen ones (default: every built-in backend), always
    next to the built-in ``local`` reference, and the built-in ``loopback`` when that still
    leaves fewer than two."""
    if chosen is None:
        return dict(BACKENDS)
    backends = {"local": BACKENDS["local"], **chosen}
    if len(backends) < 2:
        backends["loopback"] = BACKENDS["loopback"]
    return backends


def _other_record(cls: type[Payload]) -> Payload:
    for other in payload_classes():
        if other is not cls:
            return example_payload(other)
    raise AssertionError("need at least two payload classes")


# -- the test class -----------------------------------------------------------------------------


class EventsContract:
    """Subclass (``class TestMyEvents(EventsContract)``) to run the kit on your payloads.

    ``payload_classes``: the classes to check, or ``payload_modules``: Python modules whose
    payload classes to check (default: every lemon_core payload class).
    ``event_types``: type -> class pairs for envelope discipline (default: the core registry, or
    each class's own ``event_type`` when ``payload_classes`` is given).
    ``bus_backends``: name -> backend factory (default: ``lemon_infra.BACKENDS``).
    """

    payload_classes: ClassVar[Sequence[type[Payload]] | None] = None
    payload_modules: ClassVar[Sequence[types.ModuleType] | None] = None
    event_types: ClassVar[Mapping[str, type[Payload]] | None] = None
    bus_backends: ClassVar[Mapping[str, Callable[[], BusBackend]] | None] = None

    def test_registry_completeness(self) -> None:
        check_registry_completeness()

    def test_payload_class(self, lemon_payload_class: type[Payload]) -> None:
        check_payload_class(lemon_payload_class)

    def test_round_trip(self, lemon_payload_class: type[Payload]) -> None:
        check_round_trip(lemon_payload_class)

    def test_falsified_round_trip(self, lemon_payload_class: type[Payload]) -> None:
        check_falsified_round_trip(lemon_payload_class)

    def test_string_keys(self, lemon_payload_class: type[Payload]) -> None:
        check_string_keys(lemon_payload_class)

    def test_unknown_keys(self, lemon_payload_class: type[Payload]) -> None:
        check_unknown_keys(lemon_payload_class)

    def test_json_encodable(self, lemon_payload_class: type[Payload]) -> None:
        check_json_encodable(lemon_payload_class)

    def test_no_item_access(self, lemon_payload_class: type[Payload]) -> None:
        check_no_item_access(lemon_payload_class)

    def test_introspection_compatibility(self, lemon_payload_class: type[Payload]) -> None:
        check_introspection_compatibility(lemon_payload_class)

    def test_envelope_discipline(
        self,
        lemon_event_type: tuple[str, type[Payload]],
        lemon_bus_backend: str,
    ) -> None:
        event_type, cls = lemon_event_type
        factories = type(self).bus_backends or BACKENDS
        check_envelope_discipline(event_type, cls, factories[lemon_bus_backend])

    def test_backend_parity(self, lemon_event_type: tuple[str, type[Payload]]) -> None:
        event_type, cls = lemon_event_type
        check_backend_parity(event_type, cls, parity_backends(type(self).bus_backends))


def payload_classes_in(modules: Iterable[types.ModuleType]) -> tuple[type[Payload], ...]:
    """The payload classes defined in ``modules`` (in definition order, each once)."""
    found: dict[type[Payload], None] = {}
    for module in modules:
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Payload)
                and value is not Payload
                and value.__module__ == module.__name__
            ):
                found[value] = None
    return tuple(found)


def _explicit_classes(owner: object) -> Sequence[type[Payload]] | None:
    chosen = getattr(owner, "payload_classes", None)
    if chosen is None:
        chosen = getattr(owner, "lemon_event_payloads", None)
    if chosen is None:
        modules = getattr(owner, "payload_modules", None)
        if modules is not None:
            chosen = payload_classes_in(modules)
    return None if chosen is None else tuple(chosen)


def contract_payload_classes(owner: object) -> Sequence[type[Payload]]:
    """The payload classes a test class (or module) asks the kit to cover."""
    chosen = _explicit_classes(owner)
    return payload_classes() if chosen is None else chosen


def contract_event_types(owner: object) -> list[tuple[str, type[Payload]]]:
    """The (event type, class) pairs a test class (or module) asks the kit to publish."""
    chosen: Mapping[str, type[Payload]] | None = getattr(owner, "event_types", None)
    if chosen is not None:
        return list(chosen.items())
    explicit = _explicit_classes(owner)
    if explicit is None:
        return list(registry().items())
    return [(cls.event_type, cls) for cls in explicit if cls.event_type]


def contract_backends(owner: object) -> list[str]:
    """The bus backend names a test class asks the kit to run under."""
    chosen = getattr(owner, "bus_backends", None)
    return sorted(BACKENDS if chosen is None else chosen)
