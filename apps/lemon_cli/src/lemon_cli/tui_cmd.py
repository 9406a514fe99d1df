"""``lemon tui``: the full-screen terminal UI (the ``lemon_tui`` app) on a daemon.

It is a client of the control plane only: ``--url`` names the daemon's WebSocket, else this
home's running daemon is used (its recorded URL); with neither it says how to start one.
Imports are lazy so ``lemon --help`` does not pay for Textual.
"""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["tui", "ws_url_of"]


def ws_url_of(http_url: str) -> str:
    """The WebSocket URL of a daemon recorded as ``http://HOST:PORT``."""
    return "ws://" + http_url.removeprefix("http://").rstrip("/") + "/ws"


def tui(
    url: Annotated[
        str | None,
        typer.Option(help="The daemon's WebSocket, ws://HOST:PORT/ws (default: this home's)."),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(help="Session key to open (default: this directory's own session)."),
    ] = None,
) -> None:
    """Open the full-screen terminal UI on a running daemon (start one: lemon daemon start).
    A token, when the daemon needs one, is read from LEMON_CONTROL_PLANE_TOKEN."""
    import os

    from rich.console import Console

    err = Console(emoji=False, stderr=True, highlight=False)
    if session is not None:
        from lemon_core.sessions import check_session_key

        try:
            check_session_key(session)
        except ValueError as exc:
            err.print(f"lemon tui: {exc}", markup=False)
            raise typer.Exit(2) from None
    if url is None:
        from lemon_cli._daemon import read_state
        from lemon_core.config import lemon_home

        home = lemon_home()
        state = read_state(home)
        if state is None or not state.alive or not state.url.startswith("http://"):
            err.print(
                f"lemon tui: no daemon runs for {home}; start one with `lemon daemon start` "
                "(or pass --url ws://HOST:PORT/ws)",
                markup=False,
            )
            raise typer.Exit(1)
        url = ws_url_of(state.url)
    elif not url.startswith(("ws://", "wss://")):
        err.print(f"lemon tui: --url must be ws://HOST:PORT/ws, not {url!r}", markup=False)
        raise typer.Exit(2)
    from lemon_cli._chat import session_for
    from lemon_control_plane.config import TOKEN_ENV
    from lemon_tui import LemonTUI, websocket_connector

    token = os.environ.get(TOKEN_ENV) or None
    app = LemonTUI(
        websocket_connector(url, token=token),
        where=url,
        session=session or session_for(os.getcwd()),
        cwd=os.getcwd(),
    )
    raise typer.Exit(app.run() or 0)
