"""Fixtures: the test servers (real subprocesses) and a hub over a real config file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lemon_core.config import Config, load_config


@pytest.fixture
def config_for(tmp_path: Path) -> Callable[..., tuple[Config, Path, Path]]:
    """``config_for(home_toml, project_toml=None)`` -> (config, home, work)."""

    def make(home_text: str, project_text: str | None = None) -> tuple[Config, Path, Path]:
        home = tmp_path / "home"
        work = tmp_path / "work"
        home.mkdir(exist_ok=True)
        work.mkdir(exist_ok=True)
        (home / "config.toml").write_text(home_text, encoding="utf-8")
        if project_text is not None:
            (work / ".lemon").mkdir(exist_ok=True)
            (work / ".lemon" / "config.toml").write_text(project_text, encoding="utf-8")
        return load_config(environ={}, cwd=work, home=home).config, home, work

    return make
