"""The runtime boot: apps (``lemon.apps`` entry points) whose lifespans are entered by profile
on one context.

See :class:`Runtime` and the lemon_core README.
"""

from __future__ import annotations

from lemon_core.runtime._app import (
    APPS_ENTRY_POINT_GROUP,
    AppSpec,
    Lifespan,
    discover_apps,
    known_profiles,
    resolve_profile,
)
from lemon_core.runtime._backends import open_configured_bus, open_configured_store
from lemon_core.runtime._capabilities import (
    AGENT_RUNTIME,
    APPROVALS,
    MODEL_CATALOG,
    AgentRuntime,
    ModelCatalog,
    ModelInfo,
)
from lemon_core.runtime._http import (
    HTTP_MOUNTS,
    RESERVED_PATHS,
    ASGIApp,
    HttpMount,
    HttpMounts,
)
from lemon_core.runtime._runtime import AppState, Runtime, RuntimeStatistics, store_path
from lemon_core.runtime.errors import AppHookError, RuntimeBootError, RuntimeUsageError

__all__ = [
    "AGENT_RUNTIME",
    "APPROVALS",
    "APPS_ENTRY_POINT_GROUP",
    "HTTP_MOUNTS",
    "MODEL_CATALOG",
    "RESERVED_PATHS",
    "ASGIApp",
    "AgentRuntime",
    "AppHookError",
    "AppSpec",
    "AppState",
    "HttpMount",
    "HttpMounts",
    "Lifespan",
    "ModelCatalog",
    "ModelInfo",
    "Runtime",
    "RuntimeBootError",
    "RuntimeStatistics",
    "RuntimeUsageError",
    "discover_apps",
    "known_profiles",
    "open_configured_bus",
    "open_configured_store",
    "resolve_profile",
    "store_path",
]
