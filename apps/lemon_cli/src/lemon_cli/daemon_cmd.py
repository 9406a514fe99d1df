"""``lemon daemon start|stop|status|logs``: ``lemon serve`` in the background, one per home.

The pid file (``daemon.json``), the lock and the log live under ``$LEMON_HOME/daemon/`` (see
:mod:`lemon_cli._daemon`); ``logs`` adds the home's activity (:mod:`lemon_cli._activity`).
Imports are made inside the commands, so ``lemon --help`` stays fast.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lemon_cli._groups import command_group

if TYPE_CHECKING:
    import ssl

    from rich.console import Console

__all__ = ["daemon_app"]

daemon_app = command_group("The background daemon of this $LEMON_HOME (lemon serve, detached).")

_START_WAIT_S = 60.0
_STOP_WAIT_S = 60.0
_POLL_S = 0.05


def _console() -> Console:
    from rich.console import Console

    return Console(emoji=False, highlight=False, soft_wrap=True)


def _home() -> Path:
    from lemon_core.config import lemon_home

    return lemon_home()


def _healthy(url: str, trust: ssl.SSLContext | None = None) -> bool:
    import httpx

    try:
        verify: ssl.SSLContext | bool = trust if trust is not None else True
        answer: object = httpx.get(f"{url}/healthz", timeout=2.0, verify=verify).json()
    except (httpx.HTTPError, ValueError):
        return False
    return answer == {"ok": True}


@daemon_app.command()
def start(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int | None, typer.Option(help="Port (default 4040, or $LEMON_CONTROL_PLANE_PORT).")
    ] = None,
    cwd: Annotated[
        Path | None, typer.Option(help="Working directory of runs (default: here).")
    ] = None,
) -> None:
    """Start the daemon in the background (a second start says where the first is)."""
    import subprocess

    from rich.markup import escape

    from lemon_cli._daemon import daemon_dir, log_path, read_state

    console = _console()
    home = _home()
    running = read_state(home)
    if running is not None and running.alive:
        console.print(f"lemon daemon: already running for {home}: pid {running.pid}, {running.url}")
        raise typer.Exit(1)
    daemon_dir(home).mkdir(parents=True, exist_ok=True, mode=0o700)
    args = [sys.executable, "-c", "from lemon_cli.main import main; main()", "serve"]
    args += ["--host", host, "--cwd", str((cwd or Path.cwd()).resolve())]
    if port is not None:
        args += ["--port", str(port)]
    log = log_path(home)
    with log.open("a") as out:
        child = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "LEMON_HOME": str(home)},
        )
    deadline = time.monotonic() + _START_WAIT_S
    while time.monotonic() < deadline:
        state = read_state(home)
        if state is not None and state.pid == child.pid:
            console.print(f"lemon daemon: started, pid {state.pid}, {state.url} (log: {log})")
            return
        code = child.poll()
        if code is not None:
            tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-5:])
            console.print(f"lemon daemon: it exited at start (code {code}):\n{escape(tail)}")
            raise typer.Exit(code or 1)
        time.sleep(_POLL_S)
    console.print(f"lemon daemon: not ready after {_START_WAIT_S:.0f}s; see {log}")
    raise typer.Exit(1)


@daemon_app.command()
def stop() -> None:
    """Stop the daemon gracefully (SIGTERM; runs in flight are cancelled)."""
    import signal

    from lemon_cli._daemon import clear_state, is_alive, read_state

    console = _console()
    home = _home()
    state = read_state(home)
    if state is None or not state.alive:
        if state is not None:
            clear_state(home)
        console.print(f"lemon daemon: none is running for {home}")
        return
    os.kill(state.pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_WAIT_S
    while (alive := is_alive(state.pid)) and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    if alive:
        console.print(f"lemon daemon: pid {state.pid} is still running after {_STOP_WAIT_S:.0f}s")
        raise typer.Exit(1)
    console.print(f"lemon daemon: stopped (pid {state.pid})")


@daemon_app.command()
def status() -> None:
    """Whether a daemon runs for this home, where, and whether it answers /healthz."""
    from lemon_cli._daemon import client_ssl, read_state

    console = _console()
    home = _home()
    state = read_state(home)
    if state is None or not state.alive:
        console.print(f"lemon daemon: not running for {home}")
        raise typer.Exit(3)
    health = "healthy" if _healthy(state.url, client_ssl(state)) else "not answering /healthz"
    console.print(
        f"lemon daemon: running, pid {state.pid}, {state.url}, {health}; runs in {state.cwd}"
    )


_FOLLOW_POLL_S = 0.5
_FOLLOW_BATCH = 500  # what one poll may print: every run and delivery since the last one


@daemon_app.command()
def logs(
    lines: Annotated[int, typer.Option(help="How many of the last lines (of each part).")] = 50,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Keep printing new lines until interrupted."),
    ] = False,
) -> None:
    """Print the end of the daemon's log, then its activity: one line per finished run,
    webhook delivery and provider error (secrets hidden); --follow keeps printing both."""
    import asyncio

    from lemon_cli._home import require_home

    home = _home()
    require_home(home, create=False)
    try:
        asyncio.run(_logs(home, max(1, lines), follow))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


async def _logs(home: Path, lines: int, follow: bool) -> None:
    import asyncio

    from lemon_cli._activity import Activity
    from lemon_cli._daemon import log_path

    path = log_path(home)
    offset = _print_log_tail(path, lines)
    activity = await Activity.open(home)
    try:
        for problem in activity.problems:
            _echo(f"lemon daemon: {problem}")
        for line in await activity.new_lines(limit=lines):
            _echo(line.text)
        while follow:
            await asyncio.sleep(_FOLLOW_POLL_S)
            offset = _print_log_since(path, offset)
            for line in await activity.new_lines(limit=_FOLLOW_BATCH):
                _echo(line.text)
    finally:
        await activity.close()


def _echo(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _print_log_tail(path: Path, lines: int) -> int:
    """Print the last ``lines`` of the log; where it ends (``0`` when there is none yet)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        _echo(f"lemon daemon: no log yet ({path})")
        return 0
    text = data.decode(errors="replace")
    sys.stdout.write("".join(text.splitlines(keepends=True)[-lines:]))
    sys.stdout.flush()
    return len(data)


def _print_log_since(path: Path, offset: int) -> int:
    """Print what the log gained since ``offset`` (from its start when it was replaced by a
    shorter one); the new end."""
    try:
        with path.open("rb") as log:
            size = log.seek(0, os.SEEK_END)
            start = offset if size >= offset else 0
            log.seek(start)
            data = log.read()
    except FileNotFoundError:
        return 0
    if data:
        sys.stdout.write(data.decode(errors="replace"))
        sys.stdout.flush()
    return start + len(data)
