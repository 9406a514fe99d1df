"""The runtime composition: apps (``lemon.apps`` entry points) started by profile on one
context, and the store, bus and leases a configuration names.

Imported by the composition root (lemon_cli) and the apps' ``_boot`` modules only. The
capability keys apps share live in lemon_core (``lemon_core.capabilities``,
``lemon_core.mounts``). See :class:`Runtime` and the lemon_runtime README.
"""

from __future__ import annotations

from lemon_runtime._app import (
    APPS_ENTRY_POINT_GROUP,
    AppSpec,
    Lifespan,
    discover_apps,
    known_profiles,
    resolve_profile,
)
from lemon_runtime._backends import (
    open_configured_bus,
    open_configured_store,
    open_fire_ledger,
    shared_leases,
    store_path,
)
from lemon_runtime._options import DaemonWorkspace
from lemon_runtime._runtime import AppState, Runtime, RuntimeStatistics

__all__ = [
    "APPS_ENTRY_POINT_GROUP",
    "AppSpec",
    "AppState",
    "DaemonWorkspace",
    "Lifespan",
    "Runtime",
    "RuntimeStatistics",
    "discover_apps",
    "known_profiles",
    "open_configured_bus",
    "open_configured_store",
    "open_fire_ledger",
    "resolve_profile",
    "shared_leases",
    "store_path",
]
