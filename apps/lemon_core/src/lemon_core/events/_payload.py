"""The base of every typed event payload: keyword-only, immutable msgspec records.

A payload record has three constructors, from strictest to most lenient:

* ``Cls(...)``: the plain record constructor; no validation at all (fast, for trusted code).
* ``Cls.new(**fields)``: strict. An unknown or missing required field raises
  :class:`~lemon_core.errors.EventPayloadError`; nested payloads given as mappings are built with
  the nested record's own strict ``new``; every field is type-checked (enums included).
* ``Cls.from_map(mapping)``: lenient, for data that crossed a boundary. A record of the class
  passes through; unknown keys are dropped (at every nesting level); nested mappings become
  records; scalars are converted where unambiguous (``"3"`` to ``3``); ``False`` stays ``False``.
  Missing required fields and values that cannot be converted still raise.

Payloads support attribute access only: ``payload["x"]`` raises ``TypeError``. Use
:func:`lemon_core.events.get_field` to read a field from a record or a plain mapping alike.

**Private fields** stay in process: no serialisation path writes them, whether the explicit
codec (:func:`lemon_core.events.to_builtins`), the Store, a bus backend, or a plain
``msgspec.json.encode`` / ``msgspec.to_builtins`` / ``msgspec.msgpack.encode``. They are not
msgspec fields at all: a payload with private fields uses the :class:`PrivateFields` metaclass,
names them in ``private_fields`` and declares each as a ``ClassVar`` with its default::

    class ThingHappened(Payload, frozen=True, kw_only=True, metaclass=PrivateFields):
        private_fields: ClassVar[frozenset[str]] = frozenset({"token"})

        thing_id: str
        token: ClassVar[str | None] = None  # private: keyword of every constructor

Every constructor accepts them as keywords (``new`` type-checks them, ``from_map`` converts
leniently, the plain constructor trusts them; type checkers only see the msgspec fields in the
plain constructor's signature, so type-checked code passes private fields to ``new``) and the
record reads them as attributes. They
take no part in equality, ``repr`` or ``msgspec.structs.replace`` (a replaced record drops them),
and a record decoded from the wire never has them. Declaring a private field as an ordinary
msgspec field is a ``TypeError`` at class creation: it would be encoded.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, NoReturn, Self

import msgspec

from lemon_core.errors import EventPayloadError, UsageTypeError

__all__ = ["Payload", "PayloadFields", "PrivateFields"]


class PayloadFields(msgspec.Struct, frozen=True, kw_only=True):
    """What a payload class declares: its field names, required ones and nested record types."""

    names: tuple[str, ...]
    required: frozenset[str]
    nested: Mapping[str, type[Payload]]
    private: frozenset[str]


_FIELDS_CACHE: dict[type[Payload], PayloadFields] = {}


def _nested_payload_type(annotation: Any) -> type[Payload] | None:
    """The payload class a field holds (``X`` or ``X | None``), or ``None``."""
    if isinstance(annotation, type) and issubclass(annotation, Payload):
        return annotation
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        found = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(found) == 1:
            return _nested_payload_type(found[0])
    return None


class PrivateFields(msgspec.StructMeta):
    """The metaclass of payloads with private fields (see the module docstring).

    Only records with private fields pay for it: their constructor pops the private keywords,
    builds the record and keeps them in the instance's ``__dict__``, out of every encoder's
    reach.
    """

    def __new__(
        mcls,
        name: str,
        bases: tuple[type, ...],
        namespace: dict[str, Any],
        **kwargs: Any,
    ) -> PrivateFields:
        kwargs.setdefault("dict", True)
        cls: PrivateFields = super().__new__(mcls, name, bases, namespace, **kwargs)
        private = _private_names(cls)
        encoded = sorted(private & set(getattr(cls, "__struct_fields__", ())))
        if encoded:
            raise UsageTypeError(
                f"{name}: private fields {encoded} are msgspec fields, so every encoder would "
                f"write them; declare each as `name: ClassVar[T] = default`"
            )
        missing = sorted(field for field in private if not hasattr(cls, field))
        if missing:
            raise UsageTypeError(
                f"{name}: private fields {missing} need a class-level default "
                f"(`name: ClassVar[T] = default`)"
            )
        return cls

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        private = _private_names(cls)
        values = {name: kwargs.pop(name) for name in private if name in kwargs}
        record = super().__call__(*args, **kwargs)
        if values:
            record.__dict__.update(values)
        return record


_PRIVATE_TYPES: dict[type, dict[str, Any]] = {}


def _private_names(cls: type) -> frozenset[str]:
    names: frozenset[str] = getattr(cls, "private_fields", frozenset())
    return names


def _private_types(cls: type[Payload]) -> dict[str, Any]:
    """The declared type of each private field (``ClassVar[T]`` -> ``T``)."""
    cached = _PRIVATE_TYPES.get(cls)
    if cached is None:
        hints = typing.get_type_hints(cls)
        cached = {}
        for name in cls.private_fields:
            hint = hints.get(name, Any)
            if typing.get_origin(hint) is typing.ClassVar:
                args = typing.get_args(hint)
                hint = args[0] if args else Any
            cached[name] = hint
        _PRIVATE_TYPES[cls] = cached
    return cached


class Payload(msgspec.Struct, frozen=True, kw_only=True):
    """Base class of every event payload record (see the module docstring)."""

    #: The type string this record reports. It may not itself be registered (``GoalChanged``
    #: reports ``"goal_changed"`` while its registered types are ``goal_set`` and so on).
    event_type: ClassVar[str] = ""
    #: Fields never written by the JSON codec (they stay on the record, in process).
    private_fields: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        private = cls.private_fields
        if private and not isinstance(cls, PrivateFields):
            raise UsageTypeError(
                f"{cls.__name__} declares private_fields {sorted(private)}: give it "
                f"metaclass=PrivateFields and declare each as `name: ClassVar[T] = default`, "
                f"so that no encoder ever writes them (see lemon_core.events.Payload)"
            )

    # -- class-level description ------------------------------------------------------------

    @classmethod
    def event_version(cls) -> int:
        """The payload's schema version; bumped only for a breaking field change."""
        return 1

    @classmethod
    def payload_fields(cls) -> PayloadFields:
        """Field names (declaration order), required fields, nested record fields."""
        cached = _FIELDS_CACHE.get(cls)
        if cached is not None:
            return cached
        infos = msgspec.structs.fields(cls)
        nested: dict[str, type[Payload]] = {}
        for info in infos:
            nested_type = _nested_payload_type(info.type)
            if nested_type is not None:
                nested[info.name] = nested_type
        described = PayloadFields(
            names=tuple(info.name for info in infos),
            required=frozenset(info.name for info in infos if info.required),
            nested=types.MappingProxyType(nested),
            private=frozenset(cls.private_fields),
        )
        _FIELDS_CACHE[cls] = described
        return described

    @classmethod
    def private_field_types(cls) -> Mapping[str, Any]:
        """The declared type of each private field (``ClassVar[T]`` gives ``T``)."""
        return types.MappingProxyType(_private_types(cls))

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        """The field names in declaration order."""
        return cls.payload_fields().names

    # -- constructors -------------------------------------------------------------------------

    @classmethod
    def new(cls, **fields: Any) -> Self:
        """Build a record strictly: unknown or missing fields and mistyped values raise."""
        described = cls.payload_fields()
        unknown = sorted(set(fields) - set(described.names) - described.private)
        if unknown:
            raise EventPayloadError(
                f"unknown {cls.__name__} fields: {unknown}; "
                f"known fields are {list(described.names)}"
            )
        missing = sorted(described.required - set(fields))
        if missing:
            raise EventPayloadError(
                f"missing required {cls.__name__} fields: {missing}; "
                f"pass them to {cls.__name__}.new(...)"
            )
        for name, nested_type in described.nested.items():
            value = fields.get(name)
            if isinstance(value, Mapping):
                fields[name] = nested_type.new(**_string_keys(nested_type, value))
        return cls._convert(fields, strict=True)

    @classmethod
    def from_map(cls, value: Mapping[str, Any] | Self) -> Self:
        """Build a record leniently from a mapping (see the module docstring)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, Payload):
            raise EventPayloadError(
                f"{cls.__name__}.from_map got a {type(value).__name__} record; "
                f"pass a mapping or a {cls.__name__}"
            )
        if not isinstance(value, Mapping):
            raise EventPayloadError(
                f"{cls.__name__}.from_map requires a mapping, got {type(value).__name__}"
            )
        data = cls._lenient_input(value)
        described = cls.payload_fields()
        kept: dict[str, Any] = {}
        for key, item in data.items():
            name = str(key)
            if name in described.names or name in described.private:
                kept[name] = item
        for name, nested_type in described.nested.items():
            item = kept.get(name)
            if isinstance(item, Mapping):
                kept[name] = nested_type.from_map(item)
        return cls._convert(kept, strict=False)

    @classmethod
    def _lenient_input(cls, value: Mapping[str, Any]) -> Mapping[str, Any]:
        """Hook for records that accept a legacy shape in ``from_map`` (e.g. RunCompleted)."""
        return value

    @classmethod
    def _convert(cls, fields: Mapping[str, Any], *, strict: bool) -> Self:
        missing = sorted(cls.payload_fields().required - set(fields))
        if missing:
            raise EventPayloadError(
                f"missing required {cls.__name__} fields: {missing}; "
                f"the mapping must carry them (got keys {sorted(fields)})"
            )
        private: dict[str, Any] = {}
        if cls.private_fields:
            fields = dict(fields)
            types_ = _private_types(cls)
            for name in cls.private_fields:
                if name in fields:
                    private[name] = fields.pop(name)
        try:
            record = msgspec.convert(fields, cls, strict=strict)
            for name, value in private.items():
                private[name] = msgspec.convert(value, types_[name], strict=strict)
        except msgspec.ValidationError as error:
            raise EventPayloadError(
                f"invalid {cls.__name__} payload: {error}; "
                f"see {cls.__name__}.fields() and the bus_events catalog"
            ) from error
        if private:
            record.__dict__.update(private)
        return record

    # -- no item access -------------------------------------------------------------------------

    def __getitem__(self, key: object) -> NoReturn:
        raise UsageTypeError(
            f"{type(self).__name__} payloads support attribute access only: "
            f"use payload.{key} or lemon_core.events.get_field(payload, {key!r})"
        )


def _string_keys(nested_type: type[Payload], value: Mapping[Any, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise EventPayloadError(
                f"{nested_type.__name__} field names must be strings, got {key!r}"
            )
        out[key] = item
    return out
