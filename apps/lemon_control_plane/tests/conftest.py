"""Fixtures: the booted daemon profile (the real run pipeline, the offline provider, a real
SQLite store) with its control plane on 127.0.0.1:<ephemeral>, and a WebSocket client that
speaks the wire like the terminal client does."""

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
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def boot(tmp_path: Path, work: Path) -> Callable[..., Runtime]:
    def make(**control_plane: Any) -> Runtime:
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        loaded = load_config(home=home, cwd=work, environ={})
        settings = {"port": 0, "cwd": str(work), **control_plane}
        return Runtime(
            profile="daemon", config=loaded, options=[ControlPlaneOptions(settings=settings)]
        )

    return make


@pytest.fixture
async def daemon(boot: Callable[..., Runtime]) -> AsyncIterator[ControlPlane]:
    async with boot() as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        yield plane


@pytest.fixture
def client(daemon: ControlPlane) -> ClientFactory:
    return plane_client(daemon)
