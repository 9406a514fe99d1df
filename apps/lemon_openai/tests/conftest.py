"""Fixtures: a real daemon (the booted ``daemon`` profile: router, gateway, the native
executor on the offline scripted model, the control plane on 127.0.0.1:<ephemeral>) with
``[openai_api] enabled``.

The offline model is the scripted model: ``/echo TEXT`` answers exactly TEXT, streamed word by
word; ``/tool NAME {json}`` calls a tool (``bash`` asks for approval).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from lemon_control_plane import ControlPlane, ControlPlaneOptions
from lemon_core.config import load_config
from lemon_core.sessions import SESSION_PORT, SessionPort
from lemon_runtime import Runtime


@pytest.fixture
def boot(tmp_path: Path) -> Callable[..., Runtime]:
    def make(config: str = "[openai_api]\nenabled = true\n") -> Runtime:
        home = tmp_path / "home"
        work = tmp_path / "work"
        home.mkdir(exist_ok=True)
        work.mkdir(exist_ok=True)
        (home / "config.toml").write_text(config, encoding="utf-8")
        loaded = load_config(home=home, cwd=work, environ={})
        settings = {"port": 0, "cwd": str(work)}
        return Runtime(
            profile="daemon", config=loaded, options=[ControlPlaneOptions(settings=settings)]
        )

    return make


@dataclass(frozen=True, slots=True)
class Daemon:
    """The running daemon's control plane (its URL and local token) and its session port."""

    plane: ControlPlane
    port: SessionPort

    @property
    def url(self) -> str:
        return self.plane.url

    @property
    def local_token(self) -> str:
        assert self.plane.local_token is not None
        return self.plane.local_token


@pytest.fixture
async def plane(boot: Callable[..., Runtime]) -> AsyncIterator[Daemon]:
    async with boot() as runtime:
        handle = runtime.handle("lemon_control_plane")
        assert isinstance(handle, ControlPlane)
        yield Daemon(plane=handle, port=runtime.context.capabilities.require(SESSION_PORT))
