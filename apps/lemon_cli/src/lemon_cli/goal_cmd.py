"""``lemon goal``: a session's goal on this home's running daemon (``set``, ``status``, ``pause``,
``resume``, ``clear``).

The goals belong to the daemon (lemon_memory registers ``goal.*`` on the control plane); this
command is one of their clients, like the terminal UI: it finds the running daemon (its recorded
URL), connects with this home's local token (or ``LEMON_CONTROL_PLANE_TOKEN``) and calls the
method. With no daemon, or a daemon without goals, it says what to do; a refused input (an
empty objective, a session without a goal) is the daemon's own message, exit 2.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from lemon_cli._output import make_console

__all__ = ["goal_app"]

goal_app = typer.Typer(
    help="A session's goal on the running daemon (set, status, pause, resume, clear).",
    no_args_is_help=True,
)

SessionArg = Annotated[str, typer.Argument(help="The session key, e.g. agent:default:main.")]


def _call(method: str, params: dict[str, Any]) -> Any:
    import asyncio

    from lemon_cli._daemon import client_ssl, read_state, ws_url_of
    from lemon_control_plane.client import WebSocketSessionPort
    from lemon_control_plane.config import TOKEN_ENV
    from lemon_control_plane.errors import ControlPlaneError, WireError, WireUsageError
    from lemon_control_plane.local_token import client_token
    from lemon_core.config import lemon_home
    from lemon_core.sessions import check_session_key

    err = make_console(emoji=False, stderr=True, highlight=False)
    try:
        check_session_key(params["sessionKey"])
    except ValueError as exc:
        err.print(f"lemon goal: {exc}", markup=False)
        raise typer.Exit(2) from None
    home = lemon_home()
    state = read_state(home)
    if state is None or not state.alive:
        err.print(
            f"lemon goal: no daemon runs for {home}; start one with `lemon daemon start`",
            markup=False,
        )
        raise typer.Exit(1)

    async def call() -> Any:
        async with WebSocketSessionPort(
            ws_url_of(state.url), token=client_token(home), ssl=client_ssl(state)
        ) as port:
            return await port.call(method, params)

    try:
        return asyncio.run(call())
    except WireUsageError as exc:
        err.print(f"lemon goal: {exc.message}", markup=False)
        raise typer.Exit(2) from None
    except WireError as exc:
        if exc.code in ("METHOD_NOT_FOUND", "NOT_IMPLEMENTED"):
            err.print(
                f"lemon goal: the daemon at {state.url} has no goals (is the lemon_memory app "
                "installed? restart the daemon after installing it)",
                markup=False,
            )
        else:
            err.print(f"lemon goal: {exc.code}: {exc.message}", markup=False)
        raise typer.Exit(1) from None
    except (ControlPlaneError, OSError) as exc:
        err.print(
            f"lemon goal: the daemon at {state.url} refused the connection ({exc}); it takes "
            f"this home's local token or a token in {TOKEN_ENV}",
            markup=False,
        )
        raise typer.Exit(1) from None


def _show(goal: Any, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({"goal": goal}))
    elif not isinstance(goal, dict):
        typer.echo("no goal")
    else:
        done = f"{goal.get('continuationCount', 0)}/{goal.get('maxContinuations', '?')}"
        typer.echo(f"{goal.get('status')}: {goal.get('objective')} (continuations {done})")


JsonOpt = Annotated[bool, typer.Option("--json", help="Print the goal as JSON.")]


@goal_app.command("set")
def set_goal(
    session: SessionArg,
    objective: Annotated[str, typer.Argument(help="What the session should achieve.")],
    as_json: JsonOpt = False,
) -> None:
    """Set (or replace) the session's goal; it is active at once."""
    _show(_call("goal.set", {"sessionKey": session, "objective": objective})["goal"], as_json)


@goal_app.command("status")
def status(session: SessionArg, as_json: JsonOpt = False) -> None:
    """Show the session's goal ("no goal" when it has none)."""
    _show(_call("goal.status", {"sessionKey": session}).get("goal"), as_json)


def _transition(name: str, doc: str) -> None:
    def command(session: SessionArg, as_json: JsonOpt = False) -> None:
        _show(_call(f"goal.{name}", {"sessionKey": session}).get("goal"), as_json)

    command.__doc__ = doc
    goal_app.command(name)(command)


_transition("pause", "Pause the session's goal (runs no longer see it).")
_transition("resume", "Resume the session's paused goal.")
_transition("clear", "Clear the session's goal.")
