"""Publishing on the Bus: exact-match topics, typed validation at the publisher, thread twins."""

from __future__ import annotations

import asyncio
import threading

import pytest

from lemon_core import (
    Bus,
    BusClosedError,
    ConsumerClass,
    Delivery,
    Event,
    EventPayloadError,
    Overflow,
    PayloadValidation,
    UnencodableItemError,
    run_topic,
    session_topic,
)
from lemon_core.bus import LocalBackend, validation_from_env
from lemon_core.events import Delta, RoutingFeedback, RunStarted
from lemon_infra import BACKENDS, create_backend


def drain(handle: Delivery) -> list[object]:
    items: list[object] = []
    while True:
        try:
            items.append(handle.get_nowait())
        except asyncio.QueueEmpty:
            return items


async def test_a_subscriber_receives_what_is_broadcast_on_its_topic() -> None:
    async with Bus(validation="raise") as bus:
        subscription = bus.subscribe("run:r1")
        event = Event.new("custom", {"data": "hello"})
        bus.broadcast("run:r1", event)
        assert await subscription.get() is event


async def test_topics_match_exactly() -> None:
    async with Bus() as bus:
        handle = Delivery()
        bus.subscribe("run:r1", delivery=handle)
        bus.broadcast("run:r10", Event.new("x"))
        bus.broadcast("run:", Event.new("x"))
        bus.broadcast("session:r1", Event.new("x"))
        assert drain(handle) == []


async def test_every_subscriber_receives_a_broadcast() -> None:
    async with Bus() as bus:
        first, second = Delivery(), Delivery()
        bus.subscribe("system", delivery=first)
        bus.subscribe("system", delivery=second)
        bus.broadcast("system", Event.new("config_probe"))
        assert len(drain(first)) == len(drain(second)) == 1


async def test_one_handle_serves_several_topics_in_publication_order() -> None:
    async with Bus() as bus:
        handle = Delivery()
        bus.subscribe(session_topic("s1"), delivery=handle)
        bus.subscribe("exec_approvals", delivery=handle)
        bus.broadcast("exec_approvals", Event.new("a"))
        bus.broadcast(session_topic("s1"), Event.new("b"))
        assert [e.type for e in drain(handle)] == ["a", "b"]  # type: ignore[attr-defined]
        assert handle.topics() == ("exec_approvals", "session:s1")


async def test_subscribing_twice_returns_the_same_subscription() -> None:
    async with Bus() as bus:
        handle = Delivery()
        first = bus.subscribe("cron", delivery=handle)
        assert bus.subscribe("cron", delivery=handle) is first
        bus.broadcast("cron", Event.new("tick"))
        assert len(drain(handle)) == 1


async def test_a_cancelled_subscription_receives_nothing_more() -> None:
    async with Bus() as bus:
        handle = Delivery()
        with bus.subscribe("cron", delivery=handle) as subscription:
            assert subscription.active
        assert not subscription.active
        bus.broadcast("cron", Event.new("tick"))
        assert drain(handle) == []
        assert bus.topics() == ()


async def test_subscribe_without_a_handle_is_bounded_and_signals_overflow() -> None:
    async with Bus() as bus:
        subscription = bus.subscribe("run:r1")
        limits = subscription.delivery.limits
        assert (limits.max_entries, limits.max_message_bytes) == (256, 1_048_576)
        for seq in range(300):
            bus.broadcast("run:r1", Event.new("delta", Delta(run_id="r1", seq=seq, text="x")))
        items = drain(subscription.delivery)
        assert len(items) == 257
        assert isinstance(items[-1], Overflow)


async def test_broadcast_event_delivers_the_record_intact_with_meta() -> None:
    async with Bus(validation="raise") as bus:
        subscription = bus.subscribe("routing_feedback")
        payload = RoutingFeedback(fingerprint_key="fp", outcome="success", duration_ms=12)
        sent = bus.broadcast_event("routing_feedback", "routing_feedback", payload, {"run_id": "r"})
        received = await subscription.get()
        assert received is sent
        assert received.payload == payload
        assert received.meta == {"run_id": "r"}
        assert received.type == "routing_feedback"


async def test_raise_mode_rejects_a_mapping_or_a_mismatched_record() -> None:
    async with Bus(validation=PayloadValidation.RAISE) as bus:
        handle = Delivery()
        bus.subscribe("routing_feedback", delivery=handle)
        with pytest.raises(EventPayloadError, match=r"RoutingFeedback\.new"):
            bus.broadcast_event(
                "routing_feedback", "routing_feedback", {"fingerprint_key": "fp", "outcome": "ok"}
            )
        with pytest.raises(EventPayloadError, match="got RunStarted"):
            bus.broadcast_event("routing_feedback", "routing_feedback", RunStarted(run_id="r"))
        assert drain(handle) == []


async def test_coerce_mode_converts_mappings_and_passes_the_rest() -> None:
    async with Bus(validation=PayloadValidation.COERCE) as bus:
        handle = Delivery()
        bus.subscribe("run:r", delivery=handle)
        bus.broadcast_event("run:r", "delta", {"run_id": "r", "seq": 1, "text": "x", "zz": 0})
        bus.broadcast_event("run:r", "delta", {"not": "a delta"})
        first, second = drain(handle)
        assert first.payload == Delta(run_id="r", seq=1, text="x")  # type: ignore[attr-defined]
        assert second.payload == {"not": "a delta"}  # type: ignore[attr-defined]


async def test_unregistered_types_pass_through_in_every_mode() -> None:
    for mode in PayloadValidation:
        async with Bus(validation=mode) as bus:
            handle = Delivery()
            bus.subscribe("nodes", delivery=handle)
            bus.broadcast_event("nodes", "node_pair_requested", {"pairing_id": "p"})
            (event,) = drain(handle)
            assert event.payload == {"pairing_id": "p"}  # type: ignore[attr-defined]


def test_validation_defaults_come_from_lemon_env() -> None:
    assert validation_from_env({}) is PayloadValidation.RAISE
    assert validation_from_env({"LEMON_ENV": "dev"}) is PayloadValidation.RAISE
    assert validation_from_env({"LEMON_ENV": "test"}) is PayloadValidation.RAISE
    assert validation_from_env({"LEMON_ENV": "prod"}) is PayloadValidation.COERCE
    with pytest.raises(ValueError, match="LEMON_ENV must be one of dev, test, prod"):
        validation_from_env({"LEMON_ENV": "staging"})


def test_bus_reads_lemon_env_when_no_mode_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEMON_ENV", "prod")
    assert Bus().validation is PayloadValidation.COERCE
    monkeypatch.setenv("LEMON_ENV", "test")
    assert Bus().validation is PayloadValidation.RAISE


async def test_running_asks_the_backend_and_a_closed_bus_refuses_work() -> None:
    backend = LocalBackend()
    bus = Bus(backend=backend)
    assert bus.running()
    assert backend.running()
    handle = Delivery()
    bus.subscribe("system", delivery=handle)
    bus.close()
    assert not bus.running()
    assert not backend.running()
    assert handle.topics() == ()
    with pytest.raises(BusClosedError):
        bus.broadcast("system", Event.new("x"))
    with pytest.raises(BusClosedError):
        bus.subscribe("system", delivery=handle)


async def test_unencodable_items_are_refused_at_the_publisher() -> None:
    async with Bus() as bus:
        bus.subscribe("system", delivery=Delivery())
        with pytest.raises(UnencodableItemError, match="not JSON-encodable"):
            bus.broadcast("system", Event.new("x", object()))


async def test_unencodable_items_fail_at_the_publisher_with_no_subscriber() -> None:
    """Whether a publication fails must not depend on who is listening."""
    async with Bus() as bus:
        assert bus.topics() == ()
        with pytest.raises(UnencodableItemError, match="not JSON-encodable"):
            bus.broadcast("system", Event.new("x", object()))
        with pytest.raises(UnencodableItemError, match="not JSON-encodable"):
            bus.broadcast_threadsafe("system", {"raw": object()})
        with pytest.raises(UnencodableItemError, match="not JSON-encodable"):
            bus.broadcast_event("system", "x", {"usage": {"raw": object()}})
        with pytest.raises(UnencodableItemError, match="not JSON-encodable"):
            bus.broadcast_event_threadsafe("system", "x", object())
        assert bus.statistics().published == 0


async def test_bad_topics_are_rejected_with_a_hint() -> None:
    async with Bus() as bus:
        with pytest.raises(ValueError, match="non-empty strings"):
            bus.subscribe("")
        with pytest.raises(ValueError, match="non-empty strings"):
            bus.broadcast("", Event.new("x"))
    with pytest.raises(ValueError, match="run_id"):
        run_topic("")
    assert run_topic("abc-123") == "run:abc-123"
    assert session_topic("agent:main:abc") == "session:agent:main:abc"


async def test_broadcast_threadsafe_wakes_a_consumer_waiting_on_the_loop() -> None:
    async with Bus() as bus:
        subscription = bus.subscribe("run:r1")
        waiting = asyncio.create_task(subscription.get())
        await asyncio.sleep(0)  # let the consumer park on its waiter
        event = Event.new("delta", Delta(run_id="r1", seq=0, text="x"))
        thread = threading.Thread(target=bus.broadcast_threadsafe, args=("run:r1", event))
        thread.start()
        received = await asyncio.wait_for(waiting, timeout=10)
        thread.join()
        assert received is event


async def test_broadcast_event_threadsafe_validates_too() -> None:
    async with Bus(validation="raise") as bus:
        errors: list[BaseException] = []

        def publish() -> None:
            try:
                bus.broadcast_event_threadsafe("run:r", "delta", {"run_id": "r"})
            except EventPayloadError as error:
                errors.append(error)

        thread = threading.Thread(target=publish)
        thread.start()
        thread.join()
        assert len(errors) == 1


async def test_bus_statistics_sum_over_attached_handles() -> None:
    async with Bus(validation="raise") as bus:
        small = Delivery(max_entries=2)
        large = Delivery()
        bus.subscribe("cron", delivery=small)
        bus.subscribe("cron", delivery=large)
        for _ in range(3):
            bus.broadcast("cron", Event.new("tick"))
        stats = bus.statistics()
        assert stats.backend == "local"
        assert stats.running
        assert (stats.topics, stats.subscriptions, stats.handles) == (1, 2, 2)
        assert stats.published == 3
        assert stats.admitted == 5
        assert stats.refused == 1
        assert stats.fenced_handles == 1
        assert stats.queued == 2 + 1 + 3


def test_backends_are_listed_by_name() -> None:
    assert set(BACKENDS) == {"local", "loopback"}
    assert create_backend("local").name == "local"
    with pytest.raises(ValueError, match="available: local"):
        create_backend("carrier-pigeon")


async def test_the_default_handle_follows_the_bus_consumer_class() -> None:
    async with Bus(default_consumer=ConsumerClass.BROWSER_PANE) as bus:
        limits = bus.subscribe("session:s1").delivery.limits
        assert (limits.max_entries, limits.max_message_bytes, limits.tagged) == (256, 65_536, True)


async def test_bad_contention_bounds_are_refused() -> None:
    for bad in (-1, float("nan"), float("inf"), "1", True):
        with pytest.raises(ValueError, match="contention_timeout"):
            Bus(contention_timeout=bad)  # type: ignore[arg-type]  # the bad input under test
        with pytest.raises(ValueError, match="contention_timeout"):
            Delivery(contention_timeout=bad)  # type: ignore[arg-type]  # the bad input under test
