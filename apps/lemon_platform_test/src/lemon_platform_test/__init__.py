"""Contract kits (pytest plugins) for Lemon events, backends, providers, session ports and
error trees, and channel plugins."""

from __future__ import annotations

from lemon_platform_test import events_fixtures
from lemon_platform_test.bus_kit import BusContract
from lemon_platform_test.channel_kit import ChannelContract, ChannelHarness, StartedChannel
from lemon_platform_test.clock import ManualClock
from lemon_platform_test.errors import PlatformTestError
from lemon_platform_test.errors_kit import ErrorTreeContract
from lemon_platform_test.events_kit import EventsContract, example_payload
from lemon_platform_test.executor import Gate, Script, ScriptedExecutor
from lemon_platform_test.gateway_kit import RunEvents
from lemon_platform_test.idempotency_kit import IdempotencyStoreContract
from lemon_platform_test.session_kit import (
    SessionPortContract,
    SessionPortHarness,
    SessionRecorder,
)
from lemon_platform_test.store_kit import StoreContract

__all__ = [
    "BusContract",
    "ChannelContract",
    "ChannelHarness",
    "ErrorTreeContract",
    "EventsContract",
    "Gate",
    "IdempotencyStoreContract",
    "ManualClock",
    "PlatformTestError",
    "RunEvents",
    "Script",
    "ScriptedExecutor",
    "SessionPortContract",
    "SessionPortHarness",
    "SessionRecorder",
    "StartedChannel",
    "StoreContract",
    "events_fixtures",
    "example_payload",
]
