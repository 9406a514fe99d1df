"""Fixtures: the fake Telegram Bot API server on 127.0.0.1, and the booted daemon profile
(the real run pipeline with the offline model, a real SQLite store, the control plane on an
ephemeral port) with ``[channels.telegram]`` pointed at the fake."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from lemon_channels import ChannelsOptions
from lemon_channels.testing import FakeTelegram
from lemon_control_plane import ControlPlaneOptions
from lemon_core.config import load_config
from lemon_runtime import DaemonWorkspace, Runtime

TOKEN_ENV = "LEMON_TEST_TELEGRAM_TOKEN"


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    (path / "a.txt").write_text("1")
    return path


@pytest.fixture
def daemon(telegram: FakeTelegram, home: Path, work: Path) -> Callable[..., Runtime]:
    """``daemon(token=..., **telegram_keys)``: a Runtime (not started) of the daemon profile."""

    def make(*, token: str | None = None, **keys: Any) -> Runtime:
        section = {
            "token_env": TOKEN_ENV,
            "api_base_url": telegram.url,
            "allowed_users": [42],
            "poll_timeout_s": 5,
            **keys,
        }
        lines = ["[channels.telegram]"]
        for name, value in section.items():
            rendered = (
                f'"{value}"'
                if isinstance(value, str)
                else str(value).lower()
                if isinstance(value, bool)
                else str(value)
            )
            lines.append(f"{name} = {rendered}")
        lines += ["", "[gateway]", f'default_cwd = "{work}"']
        (home / "config.toml").write_text("\n".join(lines) + "\n")
        loaded = load_config(home=home, cwd=work, environ={})
        options = [
            ControlPlaneOptions(port=0, cwd=str(work)),
            ChannelsOptions(
                environ={TOKEN_ENV: telegram.token if token is None else token},
                edit_interval_s=0,
            ),
        ]
        return Runtime(profile="daemon", config=loaded, options=options)

    return make


@pytest.fixture
def served(telegram: FakeTelegram, home: Path, tmp_path: Path) -> Callable[[Path], Runtime]:
    """``served(D)``: the daemon profile as ``lemon serve --cwd D`` boots it, with no
    ``[gateway] default_cwd`` (runs of every ingress start in the daemon's workspace)."""

    def make(cwd: Path) -> Runtime:
        lines = [
            "[channels.telegram]",
            f'token_env = "{TOKEN_ENV}"',
            f'api_base_url = "{telegram.url}"',
            "allowed_users = [42]",
            "poll_timeout_s = 5",
        ]
        (home / "config.toml").write_text("\n".join(lines) + "\n")
        loaded = load_config(home=home, cwd=tmp_path, environ={})
        options = [
            ControlPlaneOptions(port=0, cwd=str(cwd)),
            DaemonWorkspace(path=str(cwd.resolve())),
            ChannelsOptions(environ={TOKEN_ENV: telegram.token}, edit_interval_s=0),
        ]
        return Runtime(profile="daemon", config=loaded, options=options)

    return make
