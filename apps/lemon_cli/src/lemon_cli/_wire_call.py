"""One control-plane method on this home's running daemon, for the commands that are clients
of an app's wire methods (``lemon goal``, ``lemon memory``, ``lemon runs``): find the daemon
(its recorded URL), connect with this home's local token (or ``LEMON_CONTROL_PLANE_TOKEN``),
call, and turn every
failure into one line on stderr and an exit code (1: no daemon, no such feature, refused
connection; 2: the daemon refused the input, in its own words)."""

from __future__ import annotations

from typing import Any

import typer

from lemon_cli._output import make_console

__all__ = ["daemon_call", "daemon_runs"]


def daemon_runs() -> bool:
    """Whether a daemon runs for this home (its recorded state names a live process)."""
    from lemon_cli._daemon import read_state
    from lemon_core.config import lemon_home

    state = read_state(lemon_home())
    return state is not None and state.alive


def daemon_call(
    command: str,
    method: str,
    params: dict[str, Any],
    *,
    feature: str,
    app: str = "lemon_memory",
    hint: str = "is the {app} app installed? restart the daemon after installing it",
    url: str | None = None,
) -> Any:
    """``method``'s payload on the running daemon (or the daemon at the WebSocket ``url``,
    which is given only ``LEMON_CONTROL_PLANE_TOKEN``, never this home's local token);
    ``feature`` names what a daemon without the method lacks (``goals``, ``memory``), ``hint``
    what to do about it."""
    import asyncio
    import os

    from lemon_cli._daemon import client_ssl, read_state, ws_url_of
    from lemon_control_plane.client import WebSocketSessionPort
    from lemon_control_plane.config import TOKEN_ENV
    from lemon_control_plane.errors import ControlPlaneError, WireError, WireUsageError
    from lemon_control_plane.local_token import client_token
    from lemon_core.config import lemon_home

    err = make_console(emoji=False, stderr=True, highlight=False)
    home = lemon_home()
    state = None if url is not None else read_state(home)
    if url is None and (state is None or not state.alive):
        err.print(
            f"{command}: no daemon runs for {home}; start one with `lemon daemon start`",
            markup=False,
        )
        raise typer.Exit(1)
    where = url if url is not None else state.url if state is not None else ""

    async def call() -> Any:
        if url is not None:
            target, token, trust = url, os.environ.get(TOKEN_ENV) or None, None
        else:
            assert state is not None
            target, token, trust = ws_url_of(state.url), client_token(home), client_ssl(state)
        async with WebSocketSessionPort(target, token=token, ssl=trust) as port:
            return await port.call(method, params)

    try:
        return asyncio.run(call())
    except WireUsageError as exc:
        err.print(f"{command}: {exc.message}", markup=False)
        raise typer.Exit(2) from None
    except WireError as exc:
        if exc.code in ("METHOD_NOT_FOUND", "NOT_IMPLEMENTED"):
            err.print(
                f"{command}: the daemon at {where} has no {feature} ({hint.format(app=app)})",
                markup=False,
            )
        elif exc.code == "FORBIDDEN":
            err.print(
                f"{command}: {exc.message} (it takes an admin token: this home's local token "
                f"or one in {TOKEN_ENV})",
                markup=False,
            )
        else:
            err.print(f"{command}: {exc.code}: {exc.message}", markup=False)
        raise typer.Exit(1) from None
    except (ControlPlaneError, OSError) as exc:
        err.print(
            f"{command}: the daemon at {where} refused the connection ({exc}); it takes "
            f"this home's local token or a token in {TOKEN_ENV}",
            markup=False,
        )
        raise typer.Exit(1) from None
