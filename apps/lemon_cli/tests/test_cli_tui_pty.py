"""``lemon tui`` as a real subprocess in a pseudo-terminal: without a daemon it hosts the
runtime in its own process, as ``lemon chat`` does with no message (its control plane on
loopback, for as long as the UI is open), and leaves no daemon behind."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_cli_chat_pty import LEMON, Terminal


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("LEMON_")}
    out.update(LEMON_HOME=str(tmp_path / "home"), NO_COLOR="1", TERM="xterm", LEMON_PLAIN="1")
    return out


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    made: list[Terminal] = []
    yield made
    for t in made:
        t.kill()


def test_tui_without_a_daemon_hosts_the_runtime(
    tmp_path: Path, env: dict[str, str], terminals: list[Terminal]
) -> None:
    term = Terminal([LEMON, "tui"], tmp_path, env)
    terminals.append(term)
    term.expect(r"online · idle")  # the full-screen UI, connected to its own runtime
    term.send("/echo hosted by the tui\r")
    term.expect("hosted by the tui")
    term.expect(r"tokens")  # the run ended
    term.send("\x03")
    term.expect("Ctrl\\+C again")
    term.send("\x03")
    assert term.wait() == 0
    status = subprocess.run(
        [LEMON, "daemon", "status"], env=env, capture_output=True, text=True, timeout=60
    )
    assert status.returncode == 3  # no daemon was started, none is left
    sessions = subprocess.run(
        [LEMON, "sessions", "list", "--json"],
        env={**env, "LEMON_DAEMON": "0"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert '"runs": 1' in sessions.stdout, sessions.stdout + sessions.stderr
