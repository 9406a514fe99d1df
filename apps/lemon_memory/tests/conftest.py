"""Fixtures: the booted ``daemon`` profile (real SQLite stores in a temporary home, the
control plane on 127.0.0.1:<ephemeral>) and a WebSocket client that speaks the wire."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from lemon_control_plane import ControlPlane, ControlPlaneOptions
from lemon_control_plane.testing import ClientFactory, plane_client
from lemon_core.config import load_config
from lemon_runtime import Runtime


@pytest.fixture
def boot(tmp_path: Path) -> Callable[..., Runtime]:
    def make(config: str = "", **control_plane: Any) -> Runtime:
        home = tmp_path / "home"
        work = tmp_path / "work"
        home.mkdir(exist_ok=True)
        work.mkdir(exist_ok=True)
        (home / "config.toml").write_text(config, encoding="utf-8")
        loaded = load_config(home=home, cwd=work, environ={})
        settings = {"port": 0, "cwd": str(work), **control_plane}
        return Runtime(
            profile="daemon", config=loaded, options=[ControlPlaneOptions(settings=settings)]
        )

    return make


@pytest.fixture
async def runtime(boot: Callable[..., Runtime]) -> AsyncIterator[Runtime]:
    async with boot() as rt:
        yield rt


@pytest.fixture
def client(runtime: Runtime) -> ClientFactory:
    plane = runtime.handle("lemon_control_plane")
    assert isinstance(plane, ControlPlane)
    return plane_client(plane)
