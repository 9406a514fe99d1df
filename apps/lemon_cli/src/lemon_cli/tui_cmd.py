"""``lemon tui``: the full-screen terminal UI (the ``lemon_tui`` app) on a daemon; also what
``lemon chat`` opens on a terminal when it is given no message.

The UI is a client of the control plane only: ``--url`` names the daemon's WebSocket, else
this home's running daemon is used (its recorded URL). The token it presents: this home's
daemon gets ``LEMON_CONTROL_PLANE_TOKEN`` or else the home's local token; a ``--url`` daemon
gets only ``LEMON_CONTROL_PLANE_TOKEN`` (the local token never goes to another server).
With neither, ``lemon tui`` (like ``lemon chat`` with no message) hosts the daemon's runtime
in this process for as long as the UI is open (its control plane on 127.0.0.1, an ephemeral
port, its own local token), so the UI still speaks the same protocol; it leaves no daemon
behind (``lemon daemon start`` makes one that outlives the UI). Imports are
lazy so ``lemon --help`` does not pay for Textual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

import typer

from lemon_cli._output import make_console

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from lemon_cli._daemon import DaemonState
    from lemon_tui import LemonTUI

__all__ = ["check_client_options", "open_tui", "tui"]


def _running_daemon() -> DaemonState | None:
    """This home's running daemon (``LEMON_DAEMON=0``: none)."""
    from lemon_cli._daemon import running_daemon
    from lemon_core.config import lemon_home

    return running_daemon(lemon_home())


def open_tui(
    err: Console,
    *,
    url: str | None,
    session: str,
    cwd: str,
    model: str | None = None,
    preapproved: frozenset[str] = frozenset(),
    shade: Literal["light", "dark"] | None = None,
    host_if_needed: bool = False,
    who: str = "lemon chat",
) -> int:
    """Run the UI until it quits; its exit code. See the module docstring for where it
    connects."""
    import asyncio
    import os
    import ssl

    from lemon_cli._daemon import client_ssl, ws_url_of
    from lemon_control_plane.config import TOKEN_ENV
    from lemon_control_plane.local_token import client_token
    from lemon_core.config import lemon_home
    from lemon_core.home import Home
    from lemon_tui import LemonTUI, websocket_connector

    state = None if url else _running_daemon()
    target = url or (ws_url_of(state.url) if state is not None else None)
    token = (os.environ.get(TOKEN_ENV) or None) if url else client_token(lemon_home())
    trust = client_ssl(state) if state is not None else None
    if target is None and not host_if_needed:
        err.print(
            f"lemon tui: no daemon runs for {lemon_home()}; start one with `lemon daemon start` "
            "(or pass --url ws://HOST:PORT/ws)",
            markup=False,
        )
        return 1

    history = Home.from_env().tui_history  # what was typed, kept across runs (0600)

    def app_on(
        ws_url: str, where: str, token: str | None, trust: ssl.SSLContext | None = None
    ) -> LemonTUI:
        app = LemonTUI(
            websocket_connector(ws_url, token=token, ssl=trust),
            where=where,
            session=session,
            cwd=cwd,
            preapproved=preapproved,
            shade=shade,
            history=history,
        )
        app.model = model
        return app

    if target is not None:
        return app_on(target, target, token, trust).run() or 0
    return asyncio.run(_hosted(err, app_on, cwd, who))


async def _hosted(err: Console, app_on: Callable[..., LemonTUI], cwd: str, who: str) -> int:
    """The daemon's runtime in this process, its control plane on loopback, for the UI."""
    from lemon_cli._home import home_error, home_problem
    from lemon_control_plane import ControlPlane, ControlPlaneOptions
    from lemon_core.config import ConfigError, load_config
    from lemon_core.cwd import real_path
    from lemon_core.runtime_errors import AppHookError, RuntimeBootError
    from lemon_runtime import DaemonWorkspace, Runtime

    try:
        loaded = load_config()
    except ConfigError as exc:
        for issue in exc.issues:
            err.print(f"error {issue.render()}", markup=False)
        return 2
    problem = home_problem(loaded.home, create=True)
    if problem is not None:
        err.print(home_error(loaded.home, problem), markup=False)
        return 2
    options = ControlPlaneOptions(host="127.0.0.1", port=0, cwd=cwd)
    # As `lemon serve`: one workspace for every ingress of this daemon (channels included).
    workspace = DaemonWorkspace(path=real_path(cwd))
    runtime = Runtime(profile="daemon", config=loaded, options=[options, workspace])
    try:
        await runtime.start()
    except (RuntimeBootError, AppHookError, OSError) as exc:
        err.print(f"{who}: the runtime did not start: {exc}", markup=False)
        return 2
    try:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        code = await app_on(plane.ws_url, "this process", plane.local_token).run_async()
        return code or 0
    finally:
        await runtime.stop()


def tui(
    url: Annotated[
        str | None,
        typer.Option(help="The daemon's WebSocket, ws://HOST:PORT/ws (default: this home's)."),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(help="Session key to open (default: this directory's own session)."),
    ] = None,
    theme: Annotated[
        str | None,
        typer.Option(help="light or dark (default: $LEMON_TUI_THEME, else from COLORFGBG)."),
    ] = None,
) -> None:
    """Open the full-screen terminal UI: on --url, else on this home's running daemon, else
    hosting the runtime in this process while the UI is open (as lemon chat does). This home's
    daemon is given LEMON_CONTROL_PLANE_TOKEN, else the home's local token; a --url daemon only
    LEMON_CONTROL_PLANE_TOKEN."""
    import os

    err = make_console(emoji=False, stderr=True, highlight=False)
    shade = _shade_or_exit(err, theme, "lemon tui")
    check_client_options(err, "lemon tui", url=url, session=session)
    from lemon_cli._chat import session_for

    raise typer.Exit(
        open_tui(
            err,
            url=url,
            session=session or session_for(os.getcwd()),
            cwd=os.getcwd(),
            shade=shade,
            host_if_needed=url is None,
            who="lemon tui",
        )
    )


def _shade_or_exit(err: Console, theme: str | None, who: str) -> Literal["light", "dark"]:
    import os

    from lemon_tui import pick_shade

    try:
        return pick_shade(os.environ, theme)
    except ValueError as exc:
        err.print(f"{who}: {exc} (--theme, or LEMON_TUI_THEME)", markup=False)
        raise typer.Exit(2) from None


def check_client_options(
    err: Console, command: str, *, url: str | None, session: str | None
) -> None:
    """A session-port client's ``--session`` and ``--url`` (``lemon tui``, ``lemon acp``): a
    clear error on stderr and exit 2 for a bad session key or a URL that is not ``ws(s)://``."""
    if session is not None:
        from lemon_core.sessions import check_session_key

        try:
            check_session_key(session)
        except ValueError as exc:
            err.print(f"{command}: --session: {exc}", markup=False)
            raise typer.Exit(2) from None
    if url is not None and not url.startswith(("ws://", "wss://")):
        err.print(f"{command}: --url must be ws://HOST:PORT/ws, not {url!r}", markup=False)
        raise typer.Exit(2)
