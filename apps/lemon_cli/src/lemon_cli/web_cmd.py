"""``lemon web``: open the daemon's chat page (served by the ``lemon_web`` app) in a browser,
signed in.

The page is the daemon's own: this command finds this home's running daemon (its recorded
URL), checks that it serves the page, asks it for a one-time sign-in nonce (``auth.loginNonce``,
over the control plane, with this home's local token or ``LEMON_CONTROL_PLANE_TOKEN``), and
prints (and, without ``--no-open``, opens) ``<url>/login?once=<nonce>``, which signs the
browser in once, within two minutes, and goes to the page (or one session's page). The token
itself never goes into a URL. With no daemon it says how to start one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated
from urllib.parse import quote

import typer

from lemon_cli._output import make_console

if TYPE_CHECKING:
    import ssl

__all__ = ["login_url", "page_url", "web"]


def page_url(http_url: str, session: str | None = None) -> str:
    """The chat page of a daemon recorded as ``http://HOST:PORT`` (one session's, if given)."""
    base = http_url.rstrip("/")
    return f"{base}/chat/{quote(session, safe='')}" if session else f"{base}/"


def login_url(http_url: str, nonce: str, session: str | None = None) -> str:
    """The one-time sign-in link of a daemon recorded as ``http://HOST:PORT``: it signs the
    browser in with ``nonce`` and goes to the page (one session's, if given)."""
    base = http_url.rstrip("/")
    link = f"{base}/login?once={quote(nonce, safe='')}"
    if session:
        link += "&next=" + quote(f"/chat/{quote(session, safe='')}", safe="")
    return link


async def _login_nonce(ws_url: str, token: str | None, trust: ssl.SSLContext | None) -> str | None:
    """A one-time sign-in nonce of the daemon at ``ws_url`` (``None``: it offers none: an
    older daemon; then the page asks for a token itself)."""
    from lemon_control_plane.client import WebSocketSessionPort

    async with WebSocketSessionPort(ws_url, token=token, ssl=trust) as port:
        if "auth.loginNonce" not in port.hello.get("features", {}).get("methods", ()):
            return None
        minted = await port.call("auth.loginNonce")
    nonce = minted.get("nonce") if isinstance(minted, dict) else None
    return nonce if isinstance(nonce, str) and nonce else None


def _serves_page(url: str, trust: ssl.SSLContext | None) -> bool:
    import urllib.error
    import urllib.request

    try:
        # Our daemon's http(s) URL, trusted as its home's clients trust it.
        with urllib.request.urlopen(url, timeout=5, context=trust) as response:
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
    """Open the chat page of this home's running daemon, signed in by a one-time link (start
    a daemon: lemon daemon start)."""
    import asyncio

    from lemon_cli._daemon import client_ssl, read_state, ws_url_of
    from lemon_control_plane.config import TOKEN_ENV
    from lemon_control_plane.errors import ControlPlaneError
    from lemon_control_plane.local_token import client_token, local_token_path
    from lemon_core.config import lemon_home

    err = make_console(emoji=False, stderr=True, highlight=False)
    if session is not None:
        from lemon_core.sessions import check_session_key

        try:
            check_session_key(session)
        except ValueError as exc:
            err.print(f"lemon web: {exc}", markup=False)
            raise typer.Exit(2) from None
    home = lemon_home()
    state = read_state(home)
    if state is None or not state.alive or not state.url.startswith(("http://", "https://")):
        err.print(
            f"lemon web: no daemon runs for {home}; start one with `lemon daemon start`",
            markup=False,
        )
        raise typer.Exit(1)
    url = page_url(state.url, session)
    trust = client_ssl(state)
    if not _serves_page(url, trust):
        err.print(
            f"lemon web: the daemon at {state.url} does not serve the chat page (is the "
            "lemon_web app installed? restart the daemon after installing it)",
            markup=False,
        )
        raise typer.Exit(1)
    try:
        nonce = asyncio.run(_login_nonce(ws_url_of(state.url), client_token(home), trust))
    except (ControlPlaneError, OSError) as exc:
        err.print(
            f"lemon web: the daemon at {state.url} refused the connection ({exc}); it takes "
            f"this home's local token ({local_token_path(home)}, readable by its owner only) "
            f"or an admin token in {TOKEN_ENV}",
            markup=False,
        )
        raise typer.Exit(1) from None
    if nonce is not None:
        url = login_url(state.url, nonce, session)
    typer.echo(url)  # never wrapped: a terminal shows it whole, a script reads it
    if not no_open:
        import webbrowser

        if not webbrowser.open(url):
            err.print("lemon web: no browser could be started; open the URL above", markup=False)
