"""``lemon serve``: the full runtime and its control plane, in the foreground.

Boots the runtime's ``daemon`` profile (the run pipeline plus the control plane, found through
their ``lemon.apps`` entry points, so nothing here imports them) and waits for SIGTERM or
SIGINT; then the runtime stops: runs in flight are cancelled through the session port (the
clients see their failed completion), the clients are told, and the store is closed. Imports
are made inside the command, so ``lemon --help`` stays fast.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from lemon_control_plane import ControlPlaneOptions

__all__ = ["serve"]

#: The runtime profile that boots the control plane with the run pipeline.
DAEMON_PROFILE = "daemon"


def serve(
    host: Annotated[
        str, typer.Option(help="Address to listen on (a non-loopback one needs a token).")
    ] = "127.0.0.1",
    port: Annotated[
        int | None,
        typer.Option(help="Port to listen on (default 4040, or $LEMON_CONTROL_PLANE_PORT)."),
    ] = None,
    cwd: Annotated[
        Path | None,
        typer.Option(
            help="The daemon's workspace: where the runs of every session without a workspace "
            "of its own start, whatever their ingress (default: the current directory)."
        ),
    ] = None,
) -> None:
    """Run the daemon in the foreground: the runtime and its control plane (/healthz, /ws)."""
    import asyncio
    import logging

    from rich.console import Console
    from rich.markup import escape

    from lemon_cli.chat_cmd import _config_or_exit
    from lemon_core.cwd import CwdError, resolve_cwd

    console = Console(emoji=False, highlight=False, soft_wrap=True)
    try:  # lemon_core's one rule: the real path of an existing directory
        work = resolve_cwd(None if cwd is None else str(cwd))
    except CwdError:
        shown = (cwd or Path.cwd()).expanduser()
        console.print(f"lemon serve: --cwd {escape(str(shown))} is not a directory")
        raise typer.Exit(2) from None
    loaded = _config_or_exit(console)
    from lemon_control_plane import ControlPlaneOptions

    options = ControlPlaneOptions(host=host, port=port, cwd=str(work))
    # Timestamped lines: the daemon log `logs.tail` reads back over the wire.
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    raise typer.Exit(asyncio.run(_serve(loaded, options, console)))


def _access_lines(plane: Any, home: Path) -> list[str]:
    """What the banner says about who may connect, after the listening line: first, on a
    non-loopback bind without TLS, that tokens cross the network in clear; then how clients
    authenticate."""
    from lemon_control_plane import ControlPlane, is_loopback_host, local_token_path

    if not isinstance(plane, ControlPlane):
        return ["lemon serve: access: unknown (no control plane)"]
    config = plane.config
    lines: list[str] = []
    if not is_loopback_host(config.host) and not config.tls:
        lines.append(
            f"lemon serve: warning: listening on {config.host} without TLS: tokens, sign-in "
            "cookies, prompts and answers cross the network in clear; set [control_plane] "
            "tls_cert and tls_key"
        )
    if plane.local_token is not None:
        lines.append(
            "lemon serve: every client needs a token; this home's own clients (lemon chat, "
            f"tui, web) read its local token ({local_token_path(home)}, yours only); give "
            "another client `lemon tokens local`"
        )
    elif plane.requires_token:
        lines.append("lemon serve: every client needs a token (local_auth is off)")
    else:
        lines.append(
            "lemon serve: warning: local_auth is off and no token is set: every account of "
            "this machine can drive this daemon as admin"
        )
    return lines


async def _serve(loaded: Any, options: ControlPlaneOptions, console: Console) -> int:
    from rich.markup import escape

    from lemon_cli._daemon import DaemonLock, read_state

    home: Path = loaded.home
    lock = DaemonLock(home)
    if not lock.acquire():
        first = read_state(home)
        where = f" (pid {first.pid}, {first.url})" if first is not None else ""
        console.print(
            f"lemon serve: a daemon is already running for {escape(str(home))}{where}; "
            "stop it with `lemon daemon stop`, or use another LEMON_HOME"
        )
        return 1
    try:
        return await _serve_locked(loaded, options, console)
    finally:
        lock.release()


async def _serve_locked(loaded: Any, options: ControlPlaneOptions, console: Console) -> int:
    import asyncio
    import signal

    from rich.markup import escape

    from lemon_cli._daemon import clear_state, write_state
    from lemon_core.runtime_errors import AppHookError, RuntimeBootError
    from lemon_runtime import DaemonWorkspace, Runtime

    home: Path = loaded.home
    assert options.cwd is not None
    # One workspace for every ingress: the control plane's runs, the channels', the webhooks'
    # (a session's own, set with sessions.patch, wins).
    workspace = DaemonWorkspace(path=options.cwd)
    try:
        runtime = Runtime(profile=DAEMON_PROFILE, config=loaded, options=[options, workspace])
        await runtime.start()
    except (RuntimeBootError, AppHookError) as exc:
        cause = exc.__cause__ if isinstance(exc, AppHookError) and exc.__cause__ else exc
        console.print(f"[red]lemon serve: the daemon did not start:[/] {escape(str(cause))}")
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        plane = runtime.handle("lemon_control_plane")
        url = getattr(plane, "url", "?")
        console.print(
            f"lemon serve: listening on {url} (WebSocket {url.replace('http', 'ws', 1)}/ws), "
            f"pid {os.getpid()}; runs start in {escape(str(options.cwd))} (every session "
            "without a workspace of its own, from any ingress); Ctrl+C or SIGTERM stops",
        )
        for line in _access_lines(plane, home):
            console.print(line, markup=False)
        sys.stdout.flush()
        config = getattr(plane, "config", None)
        write_state(home, url=url, cwd=str(options.cwd), tls_cert=getattr(config, "tls_cert", None))
        await stop.wait()
        console.print("lemon serve: stopping (runs in flight are cancelled)")
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        clear_state(home)
        try:
            await runtime.stop()
        except AppHookError as exc:
            console.print(f"[red]lemon serve: stopping:[/] {escape(str(exc))}")
            return 1
    console.print("lemon serve: stopped")
    return 0
