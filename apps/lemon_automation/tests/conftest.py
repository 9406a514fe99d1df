"""Fixtures: a real daemon (the booted ``daemon`` profile: router, gateway, the native executor
on the offline scripted model, the control plane on 127.0.0.1:<ephemeral>, SQLite stores in a
temporary home) with the scheduler running, and a WebSocket client that speaks the wire.

The scripted model answers ``/echo TEXT`` with exactly TEXT."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from lemon_automation import AutomationApp
from lemon_automation._boot import AutomationOptions
from lemon_automation.service import AutomationService
from lemon_control_plane import ControlPlane, ControlPlaneOptions
from lemon_control_plane.testing import ClientFactory, plane_client
from lemon_core.config import load_config
from lemon_runtime import Runtime


@pytest.fixture
def boot(tmp_path: Path) -> Callable[..., Runtime]:
    def make(config: str = "", *, profile: str = "daemon", tick_s: float = 60.0) -> Runtime:
        home = tmp_path / "home"
        work = tmp_path / "work"
        home.mkdir(exist_ok=True)
        work.mkdir(exist_ok=True)
        (home / "config.toml").write_text(config, encoding="utf-8")
        loaded = load_config(home=home, cwd=work, environ={})
        options: list[Any] = [AutomationOptions(tick_s=tick_s)]
        if profile == "daemon":
            options.append(ControlPlaneOptions(settings={"port": 0, "cwd": str(work)}))
        return Runtime(profile=profile, config=loaded, options=options)

    return make


@pytest.fixture
async def runtime(boot: Callable[..., Runtime]) -> AsyncIterator[Runtime]:
    async with boot(tick_s=0.2) as rt:
        yield rt


@pytest.fixture
def service(runtime: Runtime) -> AutomationService:
    app = runtime.handle("lemon_automation")
    assert isinstance(app, AutomationApp)
    assert app.service is not None
    return app.service


@pytest.fixture
def client(runtime: Runtime) -> ClientFactory:
    plane = runtime.handle("lemon_control_plane")
    assert isinstance(plane, ControlPlane)
    return plane_client(plane)
