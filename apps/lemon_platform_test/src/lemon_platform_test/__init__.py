"""Contract kits (pytest plugins) for Lemon events, backends and providers."""

from __future__ import annotations

from lemon_platform_test import events_fixtures
from lemon_platform_test.bus_kit import BusContract
from lemon_platform_test.events_kit import EventsContract, example_payload

__all__ = ["BusContract", "EventsContract", "events_fixtures", "example_payload"]
