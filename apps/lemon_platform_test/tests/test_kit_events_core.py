"""The platform's own run of the events kit: every lemon_core payload class and registered type,
under every bus backend."""

from __future__ import annotations

from lemon_platform_test import BusContract, EventsContract


class TestCoreEvents(EventsContract):
    """With no ``payload_classes`` the kit covers everything in lemon_core.events."""


class TestCoreBus(BusContract):
    """With no ``bus_backends`` the kit runs under every built-in backend."""
