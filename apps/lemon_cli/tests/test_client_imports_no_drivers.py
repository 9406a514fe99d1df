"""A client of the daemon (and lemon_core itself) never loads a database or Redis driver.

Checked in a fresh interpreter: this test process has loaded them already.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CLIENT_MODULES = (
    "lemon_core",
    "lemon_core.approvals",
    "lemon_core.backoff",
    "lemon_core.bus",
    "lemon_core.bus.backends",
    "lemon_core.capabilities",
    "lemon_core.channels",
    "lemon_core.clock",
    "lemon_core.config",
    "lemon_core.errors",
    "lemon_core.events",
    "lemon_core.execution",
    "lemon_core.home",
    "lemon_core.idempotency",
    "lemon_core.leases",
    "lemon_core.mounts",
    "lemon_core.runtime_errors",
    "lemon_core.sessions",
    "lemon_core.store",
    "lemon_core.tasks",
    "lemon_tui",
    "lemon_web",
    "lemon_control_plane.client",
)
DRIVERS = ("psycopg", "psycopg_pool", "redis")

PROBE = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
import lemon_core
for name in lemon_core.__all__:
    getattr(lemon_core, name)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {drivers!r})))
"""


def _loaded(*modules: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(drivers=DRIVERS), *modules],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded: list[str] = json.loads(proc.stdout)
    return loaded


@pytest.mark.parametrize("module", CLIENT_MODULES)
def test_importing_a_client_module_loads_no_driver(module: str) -> None:
    assert _loaded(module) == []


def test_all_client_modules_together_load_no_driver() -> None:
    assert _loaded(*CLIENT_MODULES) == []


def test_the_probe_sees_a_driver_when_one_is_loaded() -> None:
    assert "psycopg" in _loaded("lemon_infra._postgres_store")
