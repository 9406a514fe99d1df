"""Fixtures of the tests that drive ``lemon`` as a real subprocess against a daemon."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from lemon_platform_test.lemon_process import lemon_env, run_lemon


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A clean environment whose home is this test's own (a module may define its own)."""
    return lemon_env(tmp_path)


@pytest.fixture
def started(env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    """``lemon daemon start --port 0`` in ``env``: the daemon's URL; stopped after."""
    proc = run_lemon(env, "daemon", "start", "--port", "0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = re.search(r"(http://127\.0\.0\.1:\d+)", proc.stdout)
    assert found, proc.stdout
    try:
        yield found[1]
    finally:
        run_lemon(env, "daemon", "stop")
