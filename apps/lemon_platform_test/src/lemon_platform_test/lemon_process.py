"""The ``lemon`` command as a real subprocess, for tests of every app that drive it: a clean
environment for a throw-away home, a one-shot run, and ``lemon serve`` started (its readiness
handshake read: the URL it listens on) and stopped.

Nothing here imports the CLI: it runs the ``lemon`` executable installed next to the running
interpreter, as a user would.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

__all__ = ["LEMON", "lemon_env", "run_lemon", "serve", "start_serve", "stop_serve"]

#: The ``lemon`` executable of the running environment.
LEMON: Final = Path(sys.executable).with_name("lemon")

_KEEP: Final = ("PATH", "LANG", "SYSTEMROOT")
_LISTENING: Final = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


def lemon_env(root: Path, *, home: Path | None = None, **extra: str) -> dict[str, str]:
    """An environment with nothing of the caller's but ``PATH``/``LANG`` (and ``SYSTEMROOT``):
    ``HOME`` is ``root``, ``LEMON_HOME`` is ``home`` (default ``root / "home"``), plus
    ``extra``."""
    keep = {k: v for k, v in os.environ.items() if k in _KEEP}
    lemon_home = root / "home" if home is None else home
    return {**keep, "HOME": str(root), "LEMON_HOME": str(lemon_home), **extra}


def run_lemon(
    env: dict[str, str], *args: str, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``lemon *args`` to completion, output captured as text (never raises on an exit code)."""
    return subprocess.run(
        [str(LEMON), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        cwd=cwd,
    )


def start_serve(
    env: dict[str, str], work: Path, *args: str, stderr: int = subprocess.PIPE
) -> tuple[subprocess.Popen[str], str]:
    """``lemon serve --port 0 --cwd work *args`` started, and the URL it listens on (read
    from its readiness handshake, the first line it prints). A daemon that does not become
    ready is killed and an :class:`AssertionError` carries its first line and its stderr."""
    proc = subprocess.Popen(
        [str(LEMON), "serve", "--port", "0", "--cwd", str(work), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the readiness handshake: printed once it listens
    found = _LISTENING.search(line)
    if not found:
        proc.kill()
        detail = proc.stderr.read() if proc.stderr else ""
        proc.wait(30)
        _close_pipes(proc)
        raise AssertionError((line, detail))
    return proc, found[1]


def stop_serve(proc: subprocess.Popen[str], *, graceful: bool = False) -> None:
    """Stop a daemon of :func:`start_serve` (if it still runs) and close its pipes:
    ``graceful`` sends SIGTERM first and kills only if it is not gone within 30 s."""
    if proc.poll() is None:
        if graceful:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        else:
            proc.kill()
    proc.wait(30)
    _close_pipes(proc)


@contextmanager
def serve(
    env: dict[str, str], work: Path, *args: str, stderr: int = subprocess.PIPE
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """:func:`start_serve` for the block, then killed (:func:`stop_serve`)."""
    proc, url = start_serve(env, work, *args, stderr=stderr)
    try:
        yield proc, url
    finally:
        stop_serve(proc)


def _close_pipes(proc: subprocess.Popen[str]) -> None:
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
