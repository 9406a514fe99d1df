"""The pytest plugin of the contract kits (the ``pytest11`` entry point).

Parametrises the kit's arguments for any test that asks for them:

* ``lemon_payload_class``: each payload class of the test class's ``payload_classes`` (or the
  module's ``lemon_event_payloads``; default every lemon_core payload class);
* ``lemon_event_type``: each ``(event type, payload class)`` pair to publish;
* ``lemon_bus_backend``: each bus backend name (``bus_backends`` or every built-in backend).

Fixtures: ``lemon_bus`` (a Bus on ``lemon_bus_backend``, closed afterwards) and ``lemon_events``
(the payload builders of :mod:`lemon_platform_test.events_fixtures`).
"""

from __future__ import annotations

import types
from collections.abc import Iterator

import pytest

from lemon_core.bus import Bus, PayloadValidation
from lemon_platform_test import events_fixtures
from lemon_platform_test.bus_kit import bus_backends_of
from lemon_platform_test.events_kit import (
    contract_backends,
    contract_event_types,
    contract_payload_classes,
)
from lemon_platform_test.executor import ScriptedExecutor
from lemon_platform_test.providers.fixtures import (  # noqa: F401  (re-exported fixtures)
    scripted_provider,
    scripted_provider_server_session,
)


def _owner(metafunc: pytest.Metafunc) -> object:
    return metafunc.cls if metafunc.cls is not None else metafunc.module


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    owner = _owner(metafunc)
    if "lemon_payload_class" in metafunc.fixturenames:
        classes = contract_payload_classes(owner)
        metafunc.parametrize("lemon_payload_class", classes, ids=[cls.__name__ for cls in classes])
    if "lemon_event_type" in metafunc.fixturenames:
        pairs = contract_event_types(owner)
        metafunc.parametrize("lemon_event_type", pairs, ids=[pair[0] for pair in pairs])
    if "lemon_bus_backend" in metafunc.fixturenames:
        names = contract_backends(owner)
        metafunc.parametrize("lemon_bus_backend", names, ids=names)


@pytest.fixture
def lemon_bus(request: pytest.FixtureRequest, lemon_bus_backend: str) -> Iterator[Bus]:
    """A running Bus on the parametrised backend (validation ``RAISE``), closed afterwards."""
    owner = request.cls if request.cls is not None else request.module
    factory = bus_backends_of(owner)[lemon_bus_backend]
    bus = Bus(backend=factory(), validation=PayloadValidation.RAISE)
    try:
        yield bus
    finally:
        bus.close()


@pytest.fixture
def lemon_events() -> types.ModuleType:
    """The payload builders (``lemon_events.delta(seq=5)``, ``lemon_events.run_completed()``)."""
    return events_fixtures


@pytest.fixture
def scripted_executor() -> ScriptedExecutor:
    """A fresh scriptable test executor (see :mod:`lemon_platform_test.executor`)."""
    return ScriptedExecutor()
