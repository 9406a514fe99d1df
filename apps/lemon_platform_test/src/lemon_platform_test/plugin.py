"""The pytest plugin entry point of the contract kits."""

from __future__ import annotations

from lemon_platform_test.providers.fixtures import (  # noqa: F401  (re-exported fixtures)
    scripted_provider,
    scripted_provider_server_session,
)
