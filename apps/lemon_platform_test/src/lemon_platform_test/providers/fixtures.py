"""Pytest fixtures for the scripted provider server (registered by the lemon_platform_test plugin).

``scripted_provider`` gives each test a clean server (empty script, no records, counters at zero);
the one server process-wide is started lazily on first use and stopped at the end of the session.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lemon_platform_test.providers._server import ScriptedProviderServer

__all__ = ["scripted_provider", "scripted_provider_server_session"]


@pytest.fixture(scope="session")
def scripted_provider_server_session() -> Iterator[ScriptedProviderServer]:
    """The session-wide scripted provider server (prefer ``scripted_provider``)."""
    with ScriptedProviderServer() as server:
        yield server


@pytest.fixture
def scripted_provider(
    scripted_provider_server_session: ScriptedProviderServer,
) -> Iterator[ScriptedProviderServer]:
    """A reset scripted provider server; any unserved script items fail the test at teardown."""
    server = scripted_provider_server_session
    server.reset()
    yield server
    left = server.pending
    server.reset()
    if left:
        pytest.fail(f"scripted provider server: {left} scripted answer(s) were never requested")
