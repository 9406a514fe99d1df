"""Fixtures: ``lemon acp`` as the editor runs it (a real subprocess on pipes), hosting the
runtime in-process (``LEMON_DAEMON=0``) on a home of the test's own, on the offline scripted
model (``/echo TEXT`` answers TEXT word by word; ``/tool NAME {json}`` calls a tool; ``bash``
asks for approval)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

LEMON = str(Path(sys.executable).parent / "lemon")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.fixture
def agent_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEMON_")}
    env.update(LEMON_HOME=str(home), LEMON_DAEMON="0")
    return env
