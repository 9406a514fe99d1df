"""An extension author's use of the kit: their own payload class, unregistered in lemon_core."""

from __future__ import annotations

import enum
import types
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

import lemon_core.events
import lemon_core.events.delta
import lemon_core.events.run_completed
from lemon_core.bus import LocalBackend
from lemon_core.events import Delta, Event, Payload, PrivateFields
from lemon_infra import LoopbackBackend
from lemon_platform_test import BusContract, EventsContract, example_payload
from lemon_platform_test.events_kit import (
    check_backend_parity,
    check_introspection_compatibility,
    check_no_item_access,
    check_round_trip,
    check_unknown_keys,
    parity_backends,
    payload_classes_in,
)


class Mood(enum.StrEnum):
    HAPPY = "happy"
    GRUMPY = "grumpy"


class ThingHappened(Payload, frozen=True, kw_only=True, metaclass=PrivateFields):
    event_type: ClassVar[str] = "thing_happened"
    private_fields: ClassVar[frozenset[str]] = frozenset({"token"})
    token: ClassVar[str | None] = None  # private: never serialised

    thing_id: str
    mood: Mood = Mood.HAPPY
    loud: bool | None = None


class TestThingEvents(EventsContract):
    payload_classes = (ThingHappened,)
    bus_backends: ClassVar = {"local": LocalBackend}


class TestEventsByModule(EventsContract):
    payload_modules = (lemon_core.events.delta, lemon_core.events.run_completed)


def test_payload_modules_are_searched_for_their_own_payload_classes() -> None:
    assert payload_classes_in([lemon_core.events.delta]) == (lemon_core.events.Delta,)
    # run_completed imports Completion: only the class defined there counts.
    assert payload_classes_in([lemon_core.events.run_completed]) == (
        lemon_core.events.RunCompleted,
    )
    assert payload_classes_in([types.ModuleType("empty")]) == ()


def test_the_kit_collects_only_the_given_classes(lemon_payload_class: type[Payload]) -> None:
    assert lemon_payload_class is not ThingHappened  # module default: the core classes


def test_example_payloads_fill_required_fields_only_unless_full() -> None:
    minimal = example_payload(ThingHappened)
    assert minimal == ThingHappened(thing_id="example_thing_id")
    full = example_payload(ThingHappened, full=True)
    assert full.loud is True
    assert full.token == "example_token"


class Leaky(Payload, frozen=True, kw_only=True):
    """A broken payload: it supports item access."""

    event_type: ClassVar[str] = "leaky"
    name: str

    def __getitem__(self, key: object) -> str:  # type: ignore[override]  # the defect under test
        return self.name


def test_the_kit_catches_item_access() -> None:
    with pytest.raises(AssertionError, match="supports item access"):
        check_no_item_access(Leaky)


class Forgetful(Payload, frozen=True, kw_only=True):
    """A broken payload: from_map forgets a field."""

    event_type: ClassVar[str] = "forgetful"
    name: str
    count: int = 0

    @classmethod
    def from_map(cls, value):  # type: ignore[no-untyped-def, override]  # the defect under test
        if isinstance(value, cls):
            return value
        return cls(name=value["name"])


def test_the_kit_catches_a_lossy_round_trip() -> None:
    with pytest.raises(AssertionError, match="from_map"):
        check_round_trip(Forgetful)


def test_unknown_keys_check_passes_on_a_sound_class() -> None:
    check_unknown_keys(ThingHappened)


class RelayBackend:
    """A third-party backend: publications go through a separate dispatch step."""

    def __init__(self) -> None:
        self._fanout: Callable[[str, Any], int] | None = None
        self._closed = False

    @property
    def name(self) -> str:
        return "relay"

    def open(self, fanout: Callable[[str, Any], int]) -> None:
        self._fanout = fanout

    def publish(self, topic: str, item: Any) -> None:
        if self._fanout is not None and not self._closed:
            self._fanout(topic, item)

    def topic_added(self, topic: str) -> None:
        pass

    def topic_removed(self, topic: str) -> None:
        pass

    def running(self) -> bool:
        return self._fanout is not None and not self._closed

    def close(self) -> None:
        self._closed = True


class TestRelayBus(BusContract):
    bus_backends: ClassVar = {"relay": RelayBackend}


class TestCoreEventsOnRelay(EventsContract):
    """Envelope discipline under the relay; parity compares it with the built-in local one."""

    bus_backends: ClassVar = {"relay": RelayBackend}


def test_parity_always_compares_at_least_two_backends() -> None:
    assert sorted(parity_backends(None)) == ["local", "loopback"]
    assert sorted(parity_backends({"relay": RelayBackend})) == ["local", "relay"]
    assert sorted(parity_backends({"local": LocalBackend})) == ["local", "loopback"]


class Shapeshifter:
    """A backend that loses a field on the way: parity must catch it."""

    def __init__(self) -> None:
        self._inner = LoopbackBackend()

    @property
    def name(self) -> str:
        return "shapeshifter"

    def open(self, fanout: Callable[[str, Any], int]) -> None:
        def lossy(topic: str, item: Any) -> int:
            meta = {k: v for k, v in item.meta.items() if k != "n"}
            return fanout(topic, Event(type=item.type, ts_ms=item.ts_ms, meta=meta,
                                       payload=item.payload))  # fmt: skip

        self._inner.open(lossy)

    def publish(self, topic: str, item: Any) -> None:
        self._inner.publish(topic, item)

    def topic_added(self, topic: str) -> None:
        self._inner.topic_added(topic)

    def topic_removed(self, topic: str) -> None:
        self._inner.topic_removed(topic)

    def running(self) -> bool:
        return self._inner.running()

    def close(self) -> None:
        self._inner.close()


def test_the_kit_catches_a_backend_that_differs_from_local() -> None:
    with pytest.raises(AssertionError, match="differ"):
        check_backend_parity("delta", Delta, parity_backends({"shapeshifter": Shapeshifter}))


def test_the_kit_catches_a_record_that_persists_unlike_its_plain_form() -> None:
    with pytest.raises(AssertionError, match="plain form"):
        check_introspection_compatibility(CamelThing)


class CamelThing(Payload, frozen=True, kw_only=True, omit_defaults=True):
    """Leaves defaults out on encode: the Store would persist ``{}`` for a record whose plain
    map is ``{"mood": "happy"}``."""

    event_type: ClassVar[str] = "camel_thing"
    mood: Mood = Mood.HAPPY
