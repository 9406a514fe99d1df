"""``lemon web``: open the daemon's chat page (served by the ``lemon_web`` app) in a browser.

The page is the daemon's own: this command only finds this home's running daemon (its recorded
URL), checks that it serves the page, and prints (and, without ``--no-open``, opens) the URL of
the page or of one session's page. With no daemon it says how to start one.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

import typer

__all__ = ["page_url", "web"]


def page_url(http_url: str, session: str | None = None) -> str:
    """The chat page of a daemon recorded as ``http://HOST:PORT`` (one session's, if given)."""
    base = http_url.rstrip("/")
    return f"{base}/chat/{quote(session, safe='')}" if session else f"{base}/"


def _serves_page(url: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # our daemon's http URL
            return bool(response.headers.get("content-type", "").startswith("text/html"))
    except (urllib.error.URLError, OSError):
        return False


def web(
    session: Annotated[
        str | None, typer.Option(help="Session key to open (default: a new tab's own session).")
    ] = None,
    no_open: Annotated[
        bool, typer.Option("--no-open", help="Print the page's URL; do not start a browser.")
    ] = False,
) -> None:
    """Open the chat page of this home's running daemon (start one: lemon daemon start)."""
    from rich.console import Console

    from lemon_cli._daemon import read_state
    from lemon_core.config import lemon_home

    err = Console(emoji=False, stderr=True, highlight=False)
    if session is not None:
        from lemon_core.sessions import check_session_key

        try:
            check_session_key(session)
        except ValueError as exc:
            err.print(f"lemon web: {exc}", markup=False)
            raise typer.Exit(2) from None
    home = lemon_home()
    state = read_state(home)
    if state is None or not state.alive or not state.url.startswith("http://"):
        err.print(
            f"lemon web: no daemon runs for {home}; start one with `lemon daemon start`",
            markup=False,
        )
        raise typer.Exit(1)
    url = page_url(state.url, session)
    if not _serves_page(url):
        err.print(
            f"lemon web: the daemon at {state.url} does not serve the chat page (is the "
            "lemon_web app installed? restart the daemon after installing it)",
            markup=False,
        )
        raise typer.Exit(1)
    typer.echo(url)  # never wrapped: a terminal shows it whole, a script reads it
    if not no_open:
        import webbrowser

        if not webbrowser.open(url):
            err.print("lemon web: no browser could be started; open the URL above", markup=False)
