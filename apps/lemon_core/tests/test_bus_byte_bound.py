"""The byte bound is hard: values cannot pin more memory than they are charged for."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
import pytest

from lemon_core import Bus, Delivery, Event, UnencodableItemError
from lemon_core.bus import OverflowReason, measure
from lemon_core.events import Delta, RunStarted

PINNED = 8 * 1024 * 1024  # 8 MiB
BOUND = 32 * 1024  # a handle bounded at 32 KiB per message


def small_handle() -> Delivery:
    return Delivery(max_entries=8, max_message_bytes=BOUND, bind_current_task=False)


async def test_a_view_in_a_str_field_of_an_unchecked_record_is_charged_its_backing() -> None:
    backing = bytearray(PINNED)
    # The plain constructor does not check types: a memoryview lands in a ``str`` field.
    payload = Delta(run_id="r1", seq=1, text=memoryview(backing)[:64])  # type: ignore[arg-type]  # the bypass under test
    event = Event.new("delta", payload, {"run_id": "r1"})
    assert measure(event) >= PINNED
    handle = small_handle()
    assert not handle.offer(event)
    stats = handle.statistics()
    assert stats.overflow_reason is OverflowReason.BYTES
    assert stats.admitted == 0


async def test_a_view_anywhere_in_a_record_or_its_meta_is_charged() -> None:
    backing = bytearray(PINNED)
    view = memoryview(backing)[:16]
    started = RunStarted(run_id="r1", session_key=view)  # type: ignore[arg-type]  # bypass under test
    assert measure(Event.new("run_started", started)) >= PINNED
    assert measure(Event.new("x", None, {"run_id": "r1", "blob": view})) >= PINNED
    assert measure(Event.new("x", {"deep": [{"deeper": (view,)}]})) >= PINNED


async def test_a_view_in_a_dataclass_is_charged() -> None:
    @dataclasses.dataclass
    class Carrier:
        data: Any

    backing = bytearray(PINNED)
    assert measure(Carrier(data=memoryview(backing)[:8])) >= PINNED


async def test_a_raw_that_does_not_own_its_bytes_is_refused_at_the_publisher() -> None:
    backing = bytearray(PINNED)
    backing[:2] = b"{}"
    raw = msgspec.Raw(memoryview(backing)[:2])
    async with Bus() as bus:
        handle = small_handle()
        bus.subscribe("system", delivery=handle)
        with pytest.raises(UnencodableItemError, match=r"raw\.copy\(\)"):
            bus.broadcast("system", Event.new("x", {"raw": raw}))
        # The advised fix is admitted and charged its own size only.
        bus.broadcast("system", Event.new("x", {"raw": raw.copy()}))
        assert handle.statistics().admitted == 1
        assert handle.statistics().bytes < 1_024


async def test_a_raw_decoded_out_of_a_larger_message_is_refused() -> None:
    class Frame(msgspec.Struct):
        body: msgspec.Raw

    message = b'{"body": {"a": 1}, "padding": "' + b"x" * 100_000 + b'"}'
    frame = msgspec.json.decode(message, type=Frame)
    with pytest.raises(UnencodableItemError, match="does not own its buffer"):
        measure(Event.new("x", {"body": frame.body}))
    assert measure(Event.new("x", {"body": msgspec.Raw(b'{"a":1}')})) < 1_024


async def test_an_item_hiding_a_large_graph_in_unencoded_attributes_is_refused() -> None:
    class Tagged(list[int]):
        """A list subclass: the encoder writes its items, not its instance attributes."""

    hidden = Tagged([1])
    hidden.attached = [[n] for n in range(50_000)]  # type: ignore[attr-defined]  # hidden graph
    with pytest.raises(UnencodableItemError, match="far more objects"):
        measure(Event.new("x", {"items": hidden}))


async def test_a_large_private_value_is_charged_though_never_encoded() -> None:
    from lemon_core.events import ApprovalPending, ApprovalRequested

    pending = ApprovalPending(id="p", tool="bash", invocation_context_key="k" * (2 * BOUND))
    event = Event.new("approval_requested", ApprovalRequested(approval_id="a", pending=pending))
    assert measure(event) > 2 * BOUND
    assert not small_handle().offer(event)


async def test_a_bare_record_takes_the_fast_path_and_still_pays_for_what_it_pins() -> None:
    # Session events (a TextDelta, say) are offered to handles as bare records, not Events:
    # the fast path that skips the walk for them must still see a view in any field.
    from lemon_core.sessions import TextDelta

    plain = TextDelta(session_key="agent:a:main", run_id="r", seq=1, text="tok ")
    assert measure(plain) == len(msgspec.json.encode(plain))
    backing = bytearray(PINNED)
    hiding = TextDelta(session_key="agent:a:main", run_id="r", seq=1, text=memoryview(backing)[:8])  # type: ignore[arg-type]  # the bypass under test
    assert measure(hiding) >= PINNED
    assert not small_handle().offer(hiding)


async def test_a_bare_record_with_private_fields_is_charged_them() -> None:
    from lemon_core.events import ApprovalPending

    pending = ApprovalPending(id="p", tool="bash", invocation_context_key="k" * (2 * BOUND))
    assert measure(pending) > 2 * BOUND


async def test_a_view_in_a_nested_record_is_charged_though_the_fast_path_looks_two_deep() -> None:
    class Inner(msgspec.Struct):
        data: Any

    class Middle(msgspec.Struct):
        inner: Inner

    class Outer(msgspec.Struct):
        middle: Middle

    backing = bytearray(PINNED)
    plain = Outer(middle=Middle(inner=Inner(data="x")))
    assert measure(plain) == len(msgspec.json.encode(plain))
    for item in (
        Inner(data=memoryview(backing)[:8]),
        Middle(inner=Inner(data=memoryview(backing)[:8])),
        Outer(middle=Middle(inner=Inner(data=memoryview(backing)[:8]))),
    ):
        assert measure(item) >= PINNED, item


@pytest.mark.parametrize("position", range(4))
async def test_a_seen_record_class_is_still_looked_at_in_every_field(position: int) -> None:
    # The scalar test for a record class already measured is one expression over its fields:
    # a view in any one of them, the first through the last, still takes the walk.
    class Four(msgspec.Struct):
        a: Any
        b: Any
        c: Any
        d: Any

    assert measure(Four(a="x", b=1, c=2.5, d=None)) == len(
        msgspec.json.encode(Four("x", 1, 2.5, None))
    )
    backing = bytearray(PINNED)
    values: list[Any] = ["x", 1, 2.5, None]
    values[position] = memoryview(backing)[:8]
    assert measure(Four(*values)) >= PINNED


async def test_a_record_whose_field_names_are_not_identifiers_is_looked_at_too() -> None:
    odd = msgspec.defstruct("Odd", [("from", Any), ("x", Any)])
    assert measure(odd("a", "b")) == len(msgspec.json.encode(odd("a", "b")))
    backing = bytearray(PINNED)
    assert measure(odd("a", memoryview(backing)[:8])) >= PINNED
    assert measure(odd(memoryview(backing)[:8], "b")) >= PINNED


async def test_a_record_of_enum_members_and_datetimes_skips_the_walk_and_still_pays_for_a_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A run's phase events (a str enum, a datetime) are published many times per run: they
    # take the fast path (no walk: a member belongs to its enum class, a datetime holds
    # nothing the walk could see), and a view in any other field is still charged.
    import datetime as dt
    import enum

    from lemon_core.bus import _measure
    from lemon_core.events import RunPhase, RunPhaseChanged

    walks: list[object] = []
    walk = _measure._walk

    def counted(root: Any, encoded: int) -> int:
        walks.append(root)
        return walk(root, encoded)

    monkeypatch.setattr(_measure, "_walk", counted)
    phase = RunPhaseChanged.build(run_id="r", phase=RunPhase.STREAMING, source="gateway")
    for item in (phase, Event.new("run_phase_changed", phase, {"run_id": "r"})):
        assert measure(item) == len(msgspec.json.encode(item))
        assert measure(item) == len(msgspec.json.encode(item))  # seen: the flat test
    assert walks == []

    class Level(enum.IntEnum):
        LOW = 1

    class Stamped(msgspec.Struct):
        level: Any
        at: Any
        data: Any

    now = dt.datetime.now(dt.UTC)
    assert measure(Stamped(Level.LOW, now, "x")) == len(
        msgspec.json.encode(Stamped(Level.LOW, now, "x"))
    )
    assert walks == []
    backing = bytearray(PINNED)
    assert measure(Stamped(Level.LOW, now, memoryview(backing)[:8])) >= PINNED

    class Holder(enum.Enum):  # neither str nor int: its members are still looked into
        VIEW = memoryview(bytes(PINNED))[:8]  # read-only: an enum value is hashed

    assert measure(Stamped(Holder.VIEW, now, "x")) >= PINNED
